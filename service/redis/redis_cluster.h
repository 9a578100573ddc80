/* redis_cluster.h -- a Redis Cluster as one pipelined connection of an
 * event loop: a router that keeps the slot map and one node connection
 * (redis_node.h) per master, and sends each command to the master of its
 * slot, following MOVED and ASK. Every lock operation of dlockd touches
 * keys of one slot (the {name} hash tag), so each is one command on one
 * node. Used through the front of redis_conn.h, which makes one for a
 * cluster URL; nothing else calls it. Runs on its loop's thread only. */
#ifndef DLOCKD_REDIS_CLUSTER_H
#define DLOCKD_REDIS_CLUSTER_H

#include "service/redis/redis_reply.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct redis_cluster;
struct redis_node;
struct redis_url;

/* A router on loop l for the cluster whose seeds url lists (url must
 * outlive it). It asks a seed for the slot map on redis_cluster_open() or
 * its first command. */
struct redis_cluster *redis_cluster_new(struct loop *l, const struct redis_url *url);
void redis_cluster_open(struct redis_cluster *rc);
/* Fail what waits (callbacks run, here) and free rc and its connections. */
void redis_cluster_free(struct redis_cluster *rc);

/* redis_node_send(), routed: the slot is that of an EVAL/EVALSHA/FCALL's
 * first key, or a (S)PUBLISH's channel; a command without one (PING) goes
 * to any master. MOVED updates the map and sends again, ASK sends ASKING
 * and the command to the node named, TRYAGAIN, LOADING and MASTERDOWN are
 * tried again shortly, all within the command's deadline; what is left
 * (CLUSTERDOWN, no node reachable) reaches fn as Redis' error or NULL. */
void redis_cluster_send(struct redis_cluster *rc, int argc, const char **argv,
			const size_t *lens, int64_t deadline_from, redis_reply_fn fn, void *ctx);

/* The same, to the master of slot (0..16383) whatever the command: for a
 * command that is about one node's keys, not one key (SCAN). slot -1:
 * redis_cluster_send(). */
void redis_cluster_send_slot(struct redis_cluster *rc, int slot, int argc, const char **argv,
			     const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
			     void *ctx);

/* The masters in the order of the lowest slot each serves: the lowest
 * slot of the master after the one that serves slot, or -1 when that is
 * the last (or the map does not know slot's master). */
int redis_cluster_next_shard(const struct redis_cluster *rc, unsigned slot);

/* Inside the callback of a routed command: the connection to the node
 * that answered it (a WAIT for its replicas goes there); else NULL. */
struct redis_node *redis_cluster_answering(const struct redis_cluster *rc);

/* No command is waiting for its reply or its callback. */
bool redis_cluster_idle(const struct redis_cluster *rc);

#endif
