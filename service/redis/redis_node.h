/* redis_node.h -- a pipelined, non-blocking connection to one Redis node,
 * attached to an event loop (any number per loop). Commands are
 * pipelined: redis_node_send() only appends to a buffer; the connection
 * writes everything queued in a turn of its loop in one write before the
 * loop sleeps, and hands replies to their callbacks in send order. It
 * watches its own socket and keeps its own timers on the loop. Everything
 * below runs on the loop's thread.
 *
 * The lock domain does not use it directly: it goes through redis_conn.h,
 * whose front owns either one node connection or a cluster router
 * (redis_cluster.h) that owns one per master. */
#ifndef DLOCKD_REDIS_NODE_H
#define DLOCKD_REDIS_NODE_H

#include "service/redis/redis_reply.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct redis_node;
struct redis_url;

/* A connection to url (which must outlive it) on loop l: to its address,
 * or with a sentinel URL to the master the resolver knows
 * (redis_target.h), confirmed with ROLE. It connects on
 * redis_node_open() or its first command (and again, with a backoff,
 * whenever it is lost). */
struct redis_node *redis_node_new(struct loop *l, const struct redis_url *url);
/* A connection to host:port, with url's credentials: a cluster node's. */
struct redis_node *redis_node_new_at(struct loop *l, const struct redis_url *url,
				     const char *host, int port);
/* Fail what is still waiting (its callbacks run, here; what they send is
 * failed too) and free n; not from inside one of n's callbacks. */
void redis_node_free(struct redis_node *n);

/* Connect now, unless connected or in the backoff after a failed try:
 * the first command then finds the connection set up and Redis' clock
 * measured (what a new connection holds commands for). */
void redis_node_open(struct redis_node *n);

/* Queue a command on n (argv is copied; lens NULL: C strings); fn is
 * called exactly once, later, from n's loop -- never from inside this
 * call. With deadline_from (now_ms() clock; 0: none), the last argument
 * added is the time in Redis' clock (ms) past which dlockd will have
 * given up on the reply, counted from deadline_from, so the command must
 * then do nothing (lua/lib/common.lua checks it). */
void redis_node_send(struct redis_node *n, int argc, const char **argv, const size_t *lens,
		     int64_t deadline_from, redis_reply_fn fn, void *ctx);

/* Which connection n has now: changes with each connection it opens. A
 * reply callback reads the one that answered it; two answers came on the
 * same connection when they read the same number. */
unsigned redis_node_generation(const struct redis_node *n);

/* No caller's command of n is waiting for its reply or its callback (the
 * node's own set-up and TIME may be). */
bool redis_node_idle(const struct redis_node *n);

#endif
