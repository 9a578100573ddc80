/* test_cluster.c -- dlockd on a real Redis Cluster (3 masters with a
 * replica each, on loopback, built by redis-cli --cluster create). */
#include "../harness/cluster.h"

#include <stdio.h>
#include <string.h>

/* The harness's cluster comes up whole: every slot served, names of one
 * lock on one slot, names spread over the three masters. */
TEST(cluster_harness_builds_three_masters_with_a_replica_each)
{
	struct redis_cluster c;
	bool on[3] = { false, false, false };

	CHECK(cluster_start(&c, 3, 1) == 0, "the cluster starts");
	for (int i = 0; i < 30; i++) {
		char name[32];
		int m;

		snprintf(name, sizeof(name), "spread-%d", i);
		m = cluster_master_of(&c, 0, name);
		CHECK(m >= 0 && m < 6, "%s has a master (%d)", name, m);
		if (m >= 0 && m < 3)
			on[m] = true;
	}
	CHECK(on[0] && on[1] && on[2], "30 names reach all three masters");
	cluster_stop(&c);
}
