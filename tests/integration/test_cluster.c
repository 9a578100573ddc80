/* test_cluster.c -- dlockd on a real Redis Cluster (3 masters with a
 * replica each, on loopback, built by redis-cli --cluster create): every
 * kind of lock on names spread over all shards, waiters woken across
 * shards, a cluster found from one seed. */
#include "../harness/cluster.h"

#include <stdio.h>
#include <string.h>

static char url[300];

static void start(struct redis_cluster *c, struct dlockd_srv *d, bool one_seed)
{
	CHECK(cluster_start(c, 3, 1) == 0, "the cluster starts");
	if (one_seed)
		snprintf(url, sizeof(url), "redis://127.0.0.1:%d", c->node[1].port);
	else
		snprintf(url, sizeof(url), "redis://%s", c->seeds);
	CHECK(dlockd_start(d, url, NULL) == 0, "dlockd starts on %s", url);
}

/* Names on each of the three masters: for each master i, a name whose
 * slot it serves. */
static void names_per_master(struct redis_cluster *c, char names[3][32])
{
	bool found[3] = { false, false, false };

	for (int i = 0; i < 200 && !(found[0] && found[1] && found[2]); i++) {
		char n[32];
		int m;

		snprintf(n, sizeof(n), "shard-%d", i);
		m = cluster_master_of(c, 0, n);
		if (m >= 0 && m < 3 && !found[m]) {
			found[m] = true;
			snprintf(names[m], 32, "%s", n);
		}
	}
	CHECK(found[0] && found[1] && found[2], "a name on each master");
}

/* The lock hash of name is on node i (a master of the cluster). */
static bool hash_on(struct redis_cluster *c, int i, const char *name)
{
	redisReply *r = cluster_cmd(c, i, "EXISTS %s", name);
	bool yes = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;

	if (r)
		freeReplyObject(r);
	return yes;
}

/* The harness's cluster comes up whole: every slot served, names spread
 * over the three masters. */
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

/* Every kind of lock works on a name of each shard; each lock's keys are
 * on the master that serves its slot; fencing tokens grow per name. */
TEST(cluster_every_kind_works_on_every_shard)
{
	static const char *const res[] = { "/locks/%s", "/fairlocks/%s-f", "/rwlocks/%s-rw/write",
					   "/rwlocks/%s-rw/read" };
	struct redis_cluster c;
	struct dlockd_srv d;
	char names[3][32];

	start(&c, &d, false);
	names_per_master(&c, names);
	for (int m = 0; m < 3; m++) {
		for (size_t k = 0; k < sizeof(res) / sizeof(res[0]); k++) {
			char path[200], p[300];
			struct http_resp r;
			long long t1, t2;

			snprintf(path, sizeof(path), res[k], names[m]);
			snprintf(p, sizeof(p), "%s?owner=a&ttl_ms=30000", path);
			http_on(d.base, "PUT", p, NULL, &r);
			CHECK(r.status == 200, "PUT %s: %ld %s", p, r.status, r.body);
			t1 = json_int(&r, "fencing_token");
			http_free(&r);
			snprintf(p, sizeof(p), "%s?owner=a", path);
			CHECK(status_of(&d, "DELETE", "%s", p) == 200, "DELETE %s", p);
			snprintf(p, sizeof(p), "%s?owner=b&ttl_ms=30000", path);
			http_on(d.base, "PUT", p, NULL, &r);
			t2 = json_int(&r, "fencing_token");
			CHECK(r.status == 200 && t2 > t1, "a second grant of %s, token %lld > %lld",
			      path, t2, t1);
			http_free(&r);
			if (k == 0)
				CHECK(hash_on(&c, m, names[m]), "%s's hash is on master %d", names[m], m);
			snprintf(p, sizeof(p), "%s?owner=b", path);
			CHECK(status_of(&d, "DELETE", "%s", p) == 200, "DELETE %s", p);
		}
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	cluster_stop(&c);
}

/* A waiter on each shard is woken by the release on that shard, at once
 * (not at the holder's lease end, 30 s); dlockd found the cluster from
 * one seed, a replica's neighbour. */
TEST(cluster_waiters_on_each_shard_are_woken_by_its_release)
{
	struct redis_cluster c;
	struct dlockd_srv d;
	char names[3][32];

	start(&c, &d, true);
	names_per_master(&c, names);
	for (int m = 0; m < 3; m++) {
		char p[200];
		struct bg w;
		int64_t t0;

		CHECK(status_of(&d, "PUT", "/locks/%s?owner=h&ttl_ms=30000", names[m]) == 200,
		      "h holds %s", names[m]);
		snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=30000&wait_ms=20000", names[m]);
		bg_start_on(&w, d.base, "PUT", p, NULL);
		CHECK(wait_waiters(&d, 1, 10000), "w waits");
		sleep_ms(200);	/* past its post-subscribe retry: only a wake-up serves it now */
		t0 = mono_ms();
		CHECK(status_of(&d, "DELETE", "/locks/%s?owner=h", names[m]) == 200, "h releases");
		bg_join(&w);
		CHECK(w.r.status == 200, "w gets %s: %ld %s", names[m], w.r.status, w.r.body);
		CHECK(w.done_ms - t0 < 3000, "within a moment of the release on master %d: %lld ms",
		      m, (long long)(w.done_ms - t0));
		http_free(&w.r);
		CHECK(status_of(&d, "DELETE", "/locks/%s?owner=w", names[m]) == 200, "w releases");
	}
	CHECK(file_contains(d.log, "slot map read from"), "the slot map was read");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	cluster_stop(&c);
}
