/* sentinel.h -- a real Redis Sentinel topology for tests: a master, its
 * replicas and three sentinels (quorum 2) on free loopback ports, each
 * stopped by its pid at the end. */
#ifndef DLOCKD_TEST_SENTINEL_H
#define DLOCKD_TEST_SENTINEL_H

#include "harness.h"

#define SENTINEL_MASTER "m"

struct sentinel_topo {
	struct redis_srv data[3];	/* data[0]: the first master */
	int ndata;			/* the master and its replicas */
	struct redis_srv sent[3];
	char url[128];			/* redis-sentinel://...#m, database 0 */
};

/* Start a master with replicas replicas (1 or 2), wait until they are in
 * sync, then three sentinels, and wait until every sentinel knows the
 * others, the quorum and every replica; 0, or -1 with what went wrong
 * printed. t must outlive the test (static): it is stopped at its end. */
int sentinel_topo_start(struct sentinel_topo *t, int replicas);
/* The same over TLS: every node also serves TLS (redis_srv.tls_port, the
 * harness' certificates) and replicates over it, the sentinels watch the
 * master's TLS port, and url is rediss-sentinel://, naming the sentinels'
 * TLS ports (the plaintext ports stay for the harness' own checks). */
int sentinel_topo_start_tls(struct sentinel_topo *t, int replicas);
/* SIGTERM every process still running and reap it (once). */
void sentinel_topo_stop(void *t);
/* Does INFO section of r contain needle? */
bool redis_info_has(const struct redis_srv *r, const char *section, const char *needle);
/* The master's port as the first sentinel that answers says; 0 if none. */
int sentinel_master_port(const struct sentinel_topo *t);
/* The data node on port, or NULL. */
struct redis_srv *sentinel_data_on(struct sentinel_topo *t, int port);

#endif
