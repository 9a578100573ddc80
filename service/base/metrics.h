/* metrics.h -- process-wide counters and histograms, rendered in the
 * Prometheus text format. Every call is lock-free and safe from any thread.
 * Metrics know no domain: lock operations are counted by plain indices
 * (kind, result), whose label values the composition root registers at
 * start-up, as the HTTP server registers its routes'. */
#ifndef DLOCKD_METRICS_H
#define DLOCKD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metric {
	METRIC_PUBSUB_MESSAGES,		/* messages received on lock channels */
	METRIC_REPLICATION_WAITS,	/* WAITs sent (--redis-sync-replicas) */
	METRIC_REPLICATION_UNCONFIRMED,	/* grants answered 503: too few replicas had them */
	METRIC_REPLICATION_UNCONFIRMED_KEPT, /* releases, renewals, force releases
					 * too few replicas had (they stand) */
	METRIC_SESSIONS_CREATED,	/* sessions made (POST /sessions) */
	METRIC_SESSIONS_ENDED,		/* sessions ended by DELETE */
	METRIC_SESSIONS_EXPIRED,	/* heartbeats that found their session's lease
					 * had run out */
	METRIC_COUNT
};

/* Lock operations, labelled op="..." */
enum metric_op {
	MOP_ACQUIRE,
	MOP_RELEASE,
	MOP_FORCE_RELEASE,
	MOP_HEARTBEAT,
	MOP_COUNT
};

void metrics_inc(enum metric m);

/* The kinds of connection to Redis, labelled connection="...". */
enum metric_conn {
	MCONN_COMMAND,			/* a loop's pipelined connection to a node */
	MCONN_SUBSCRIBER,		/* the pub/sub subscriber's */
	MCONN_SENTINEL,			/* a sentinel listener's */
	MCONN_COUNT
};

/* A connection of kind k to Redis was lost (it is opened again). */
void metrics_reconnect(enum metric_conn k);

/* The reasons a Redis command failed (reason="..."), by index: labels[r]
 * names reason r. Registered once at start-up by the composition root;
 * at most 32; labels must live as long as the process. */
void metrics_set_redis_error_labels(const char *const *labels, unsigned n);
/* A command to Redis failed for reason r (its index above). */
void metrics_redis_error(unsigned r);
/* One command's round trip to Redis, from its send to its reply. */
void metrics_redis_round_trip(int64_t us);

/* Redis nodes by address ("host:port", or a unix socket's path): the
 * index of addr's row, made on first use (at most 64 nodes; -1 past
 * that). A node is shown while a connection is meant for it (+1/-1 with
 * metrics_redis_node_conns) and is up while one of them is ready (+1/-1
 * with metrics_redis_node_ready). */
int metrics_redis_node(const char *addr);
void metrics_redis_node_conns(int node, int delta);
void metrics_redis_node_ready(int node, int delta);

/* The HTTP connections open now (read when rendering: the caller's
 * counter, updated with __atomic builtins, living as long as the
 * process) and --max-connections. */
void metrics_set_http_connections(const unsigned *open, unsigned limit);
/* Sessions open in Redis (every dlockd's), as a session call last counted
 * them. */
void metrics_set_sessions_open(int64_t open);

/* The label values of the lock series, by index: kinds[k] names kind k
 * (kind="..."), results[r] result r (result="..."); results[0] is the
 * success, whose series are shown even at 0. At most 8 kinds and 16
 * results are counted. Call once at start-up, before anything is
 * counted; the arrays must live as long as the process. */
void metrics_set_lock_labels(const char *const *kinds, unsigned nkinds,
			     const char *const *results, unsigned nresults);
/* The mode="..." label of each kind index (as many as kinds), NULL where
 * a kind has none: the two sides of a read-write lock share one kind. */
void metrics_set_lock_modes(const char *const *modes);

/* One lock operation of kind ended with result res (indices of the lock
 * labels; others are not counted). */
void metrics_lock(unsigned kind, enum metric_op op, unsigned res);

/* A release or heartbeat of kind found the lease had already run out. */
void metrics_expiration(unsigned kind);

/* A waiting acquire (wait_ms > 0) ended after waited_us, granted or not. */
void metrics_wait(unsigned kind, bool granted, int64_t waited_us);

/* The route labels requests are counted under; labels[n] is used for
 * requests that matched no route. Call once at start-up; labels must live
 * as long as the process. The method labels the same way: labels[n] for
 * any other method. */
void metrics_set_routes(const char *const *labels, unsigned n);
void metrics_set_methods(const char *const *labels, unsigned n);
/* One answered request: its route and method indices, HTTP status and
 * duration (without the time it slept waiting for a lock or a change:
 * metrics_wait has that). */
void metrics_request(unsigned route, unsigned method, unsigned status, int64_t duration_us);

/* Render everything plus the gauges of waiting acquires and of watches;
 * the caller frees the text. */
char *metrics_render(unsigned waiters, unsigned watches, size_t *len);

#endif
