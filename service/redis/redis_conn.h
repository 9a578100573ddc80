/* redis_conn.h -- the pipelined connection of an event loop to Redis, as
 * the lock domain uses it: one front, whatever stands behind it -- one
 * node's connection (redis_node.h), or for a Redis Cluster a router
 * (redis_cluster.h) that sends each command to the master of its slot.
 *
 * Commands are pipelined: redis_conn_send() only appends to a buffer; the
 * connection writes everything queued in a turn of its loop in one write
 * before the loop sleeps, and hands replies to their callbacks in send
 * order. It watches its own socket and keeps its own timers on the loop.
 * Everything below runs on the loop's thread. */
#ifndef DLOCKD_REDIS_CONN_H
#define DLOCKD_REDIS_CONN_H

#include "service/redis/redis_reply.h"
#include "service/redis/redis_url.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

struct loop;
struct redis_conn;
struct redis_node;

/* A connection to url (which must outlive it) on loop l. It connects on
 * redis_conn_open() or its first command (and again, with a backoff,
 * whenever it is lost). For
 * a cluster URL (url->cluster) it is the front of a router
 * (redis_cluster.h) that sends each command to the master of its slot,
 * over a connection per node. */
struct redis_conn *redis_conn_new(struct loop *l, const struct redis_url *url);
/* Fail what is still waiting (its callbacks run, here; what they send is
 * failed too) and free c; not from inside one of c's callbacks. */
void redis_conn_free(struct redis_conn *c);

/* Connect now (a cluster: ask a seed for the slot map), so that the
 * loop's first request finds the connection ready; from c's loop. */
void redis_conn_open(struct redis_conn *c);

/* Queue a command on c (argv is copied; lens NULL: C strings); fn
 * (redis_reply.h) is called exactly once, later, from c's loop -- never
 * from inside this call. With deadline, the last argument added is the
 * time in Redis' clock (ms) past which dlockd will have given up on the
 * reply, so the command must then do nothing (lua/lib/common.lua checks
 * it). */
void redis_conn_send(struct redis_conn *c, int argc, const char **argv, const size_t *lens,
		     bool deadline, redis_reply_fn fn, void *ctx);
/* The same, with the deadline counted from deadline_from (now_ms() clock;
 * 0: none) instead of now: a command sent again (a script retried after
 * NOSCRIPT) keeps the deadline of its first send, so that a call that
 * reached Redis too late is never run late by its retry. */
void redis_conn_send_from(struct redis_conn *c, int argc, const char **argv,
			  const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
			  void *ctx);

/* Inside the callback of a command sent on c that Redis answered: the
 * node connection that answered it -- on a cluster the master's that ran
 * it, else c's one -- on which a WAIT covers its writes (replica_sync.c).
 * NULL on a cluster outside such a callback. */
struct redis_node *redis_conn_answering(struct redis_conn *c);

/* ----- Clusters ----- */

/* c routes by slot over a Redis Cluster's masters (redis_cluster.h). */
bool redis_conn_is_cluster(const struct redis_conn *c);
/* redis_conn_send() without a deadline, on a cluster to the master of
 * slot whatever the command (SCAN walks one node's keys); elsewhere as
 * redis_conn_send(). */
void redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
			  const size_t *lens, redis_reply_fn fn, void *ctx);
/* A cluster's masters in the order of their lowest slots: that of the
 * master after slot's, or -1 after the last (and for no cluster). */
int redis_conn_next_shard(const struct redis_conn *c, unsigned slot);

/* No command of c is waiting for its reply or its callback. */
bool redis_conn_idle(const struct redis_conn *c);

#endif
