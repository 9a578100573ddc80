/* cluster.h -- a real Redis Cluster for tests: redis-server processes with
 * cluster-enabled on free loopback ports, joined by `redis-cli --cluster
 * create`, each stopped by its pid at the end; over TLS too. */
#ifndef DLOCKD_TEST_CLUSTER_H
#define DLOCKD_TEST_CLUSTER_H

#include "harness.h"

#define CLUSTER_MAX_NODES 9

struct redis_cluster {
	struct redis_srv node[CLUSTER_MAX_NODES];
	int n;			/* nodes started */
	/* "127.0.0.1:P,127.0.0.1:Q": the first masters, at the ports
	 * clients use (over TLS the TLS ports) */
	char seeds[256];
	bool tls;		/* started by cluster_start_tls */
};

/* Start masters masters with replicas replicas each and wait until every
 * node says cluster_state:ok and knows every slot's master, and every
 * replica is in sync; 0, or -1 with
 * what went wrong printed (what started is stopped). */
int cluster_start(struct redis_cluster *c, int masters, int replicas);
/* The same, served over TLS (the certificates of pki_ready(): node.pem,
 * CA ca.pem; client certificates required, tls-auth-clients yes): the
 * cluster bus and replication are TLS too (tls-cluster, tls-replication),
 * so the nodes name their TLS ports (node[i].tls_port) to TLS clients in
 * CLUSTER SLOTS and in MOVED and ASK. Each node serves plaintext on
 * node[i].port besides, for the harness (cluster_cmd: hiredis has no
 * TLS), where the nodes name their plaintext ports. */
int cluster_start_tls(struct redis_cluster *c, int masters, int replicas);
/* SIGKILL every node still running and reap it. */
void cluster_stop(struct redis_cluster *c);
/* cluster_stop for test_at_end(cluster_stop_at_end, c): c static. */
void cluster_stop_at_end(void *c);
/* The index of the node that is master of key's slot now, asked of node
 * from (any node); -1 if it cannot tell. */
int cluster_master_of(struct redis_cluster *c, int from, const char *key);
/* The index of a replica of node m (a master) by ROLE, or -1. */
int cluster_replica_of(struct redis_cluster *c, int m);
/* Run a command on node i; the reply (caller frees) or NULL. */
redisReply *cluster_cmd(struct redis_cluster *c, int i, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* CLUSTER KEYSLOT key, asked of the first running node; -1 on error. */
long long cluster_key_slot_of(struct redis_cluster *c, const char *key);
/* Wait until every running node says cluster_state:ok, and every replica
 * has its link to its master up. */
bool cluster_wait_ok(struct redis_cluster *c, int timeout_ms);
/* For each of the first three masters i, a name (lockname(hint)) whose
 * slot it serves, into names[i]; false if one was not found. */
bool cluster_names_per_master(struct redis_cluster *c, const char *hint, char names[3][128]);
/* Node i has key (EXISTS). */
bool cluster_has_key(struct redis_cluster *c, int i, const char *key);
/* Node i has keys at all (DBSIZE): a replica that has caught up. */
bool cluster_node_has_keys(struct redis_cluster *c, int i);
/* A name prefix-<n> on the slot of name into out (cap bytes; "" if none
 * was found). */
void cluster_same_slot_name(const char *name, const char *prefix, char *out, size_t cap);

#endif
