/* redis_conn.h -- connections to Redis: pipelined, non-blocking ones that
 * attach to an event loop (any number per loop), and the blocking ones the
 * subscriber makes for itself. */
#ifndef DLOCKD_REDIS_CONN_H
#define DLOCKD_REDIS_CONN_H

#include "service/redis/redis_url.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

struct loop;
struct redis_conn;

/* What an error reply of Redis means, for a person, when it says Redis
 * cannot serve the command now or not for dlockd as set up (BUSY, LOADING,
 * MASTERDOWN, READONLY, OOM, NOPERM, NOAUTH, TRYAGAIN, CLUSTERDOWN, MOVED,
 * MISCONF, NOREPLICAS, and DLOCKD_LATE from the scripts' deadline check):
 * a sentence (static) for a 503; the command changed nothing. NULL for any
 * other error: a script failed (a bug, or data it cannot read). The one
 * place where Redis' error codes are told apart. */
const char *redis_error_unavailable(const char *err);

/* A blocking connection to url (the subscriber's), authenticated and on the
 * right db, with the command timeout set; NULL (and a log line) if Redis
 * cannot be reached. With a sentinel URL, to the master known now (NULL
 * while none is), confirmed with ROLE; *target_gen (may be NULL) is then
 * the address's generation, for redis_target_lost() when the connection
 * is lost (else 0). The caller frees it with redisFree(). */
redisContext *redis_open_blocking(const struct redis_url *url, unsigned *target_gen);

/* A blocking connection to the cluster node host:port with url's
 * credentials (the sharded subscriber's, one per node); NULL if it cannot
 * be reached or set up. The caller frees it with redisFree(). */
redisContext *redis_open_blocking_at(const struct redis_url *url, const char *host, int port);

/* Does the Redis of url have sharded pub/sub (Redis 7: PUBSUB SHARDNUMSUB
 * answers without error), as Redisson probes it? false when it cannot be
 * asked. */
bool redis_has_sharded_pubsub(const struct redis_url *url);

/* Decide url->cluster before any connection is made: a redis:// URL with
 * several hosts names a cluster's seeds; with one, the node is asked
 * (INFO cluster: cluster_enabled), and one that does not answer is taken
 * for a single Redis (logged). -1 (logged) for a setting a cluster cannot
 * serve (a database other than 0). */
int redis_detect_cluster(struct redis_url *url);

/* ----- Pipelined connections on an event loop -----
 *
 * Commands are pipelined: redis_conn_send() only appends to a buffer; the
 * connection writes everything queued in a turn of its loop in one write
 * before the loop sleeps, and hands replies to their callbacks in send
 * order. It watches its own socket and keeps its own timers on the loop.
 * Everything below runs on the loop's thread. */

#define REDIS_CONN_MAX_ARGS 24

/* A connection to url (which must outlive it) on loop l. It connects on
 * its first command (and again, with a backoff, whenever it is lost). For
 * a cluster URL (url->cluster) it is the front of a router
 * (redis_cluster.h) that sends each command to the master of its slot,
 * over a connection per node. */
struct redis_conn *redis_conn_new(struct loop *l, const struct redis_url *url);
/* A connection to one node of a cluster, host:port, with url's
 * credentials: the cluster router's (redis_cluster.c). */
struct redis_conn *redis_conn_new_at(struct loop *l, const struct redis_url *url,
				     const char *host, int port);
/* Fail what is still waiting (its callbacks run, here; what they send is
 * failed too) and free c; not from inside one of c's callbacks. */
void redis_conn_free(struct redis_conn *c);

/* A command's outcome: its reply (freed by redis_conn after the call), or
 * NULL when Redis is unreachable or did not answer within 2 s of the send
 * (answer 503: by then a command with a deadline can no longer take
 * effect). */
typedef void (*redis_reply_fn)(void *ctx, redisReply *r);

/* Queue a command on c (argv is copied; lens NULL: C strings); fn is
 * called exactly once, later, from c's loop -- never from inside this
 * call. With deadline, the last argument added is the time in Redis'
 * clock (ms) past which dlockd will have given up on the reply, so the
 * command must then do nothing (lua/lib/common.lua checks it). */
void redis_conn_send(struct redis_conn *c, int argc, const char **argv, const size_t *lens,
		     bool deadline, redis_reply_fn fn, void *ctx);
/* The same, with the deadline counted from deadline_from (now_ms() clock;
 * 0: none) instead of now: a command sent again (a script retried after
 * NOSCRIPT) keeps the deadline of its first send, so that a call that
 * reached Redis too late is never run late by its retry. */
void redis_conn_send_from(struct redis_conn *c, int argc, const char **argv,
			  const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
			  void *ctx);

/* Which connection c has now: changes with each connection it opens. A
 * reply callback reads the one that answered it; two answers came on the
 * same connection when they read the same number. */
unsigned redis_conn_generation(const struct redis_conn *c);

/* ----- Clusters ----- */

/* c routes by slot over a Redis Cluster's masters (redis_cluster.h). */
bool redis_conn_is_cluster(const struct redis_conn *c);
/* redis_conn_send() without a deadline, on a cluster to the master of
 * slot whatever the command (SCAN walks one node's keys); elsewhere as
 * redis_conn_send(). */
void redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
			  const size_t *lens, redis_reply_fn fn, void *ctx);
/* Inside the callback of a command sent on c: the connection that
 * answered it -- a cluster node's for a cluster, else c itself. */
struct redis_conn *redis_conn_answering(struct redis_conn *c);
/* A cluster's masters in the order of their lowest slots: that of the
 * master after slot's, or -1 after the last (and for no cluster). */
int redis_conn_next_shard(const struct redis_conn *c, unsigned slot);

/* No command of c is waiting for its reply or its callback. */
bool redis_conn_idle(const struct redis_conn *c);

#endif
