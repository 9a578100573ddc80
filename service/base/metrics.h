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
	METRIC_REDIS_ERRORS,		/* requests answered 503 for want of Redis */
	METRIC_REDIS_RECONNECTS,	/* subscriber connection losses */
	METRIC_PUBSUB_MESSAGES,		/* messages received on lock channels */
	METRIC_REPLICATION_WAITS,	/* WAITs sent (--redis-sync-replicas) */
	METRIC_REPLICATION_UNCONFIRMED,	/* grants answered 503: too few replicas had them */
	METRIC_REPLICATION_UNCONFIRMED_KEPT, /* releases, renewals, force releases
					 * too few replicas had (they stand) */
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

/* The label values of the lock series, by index: kinds[k] names kind k
 * (kind="..."), results[r] result r (result="..."); results[0] is the
 * success, whose series are shown even at 0. At most 8 kinds and 16
 * results are counted. Call once at start-up, before anything is
 * counted; the arrays must live as long as the process. */
void metrics_set_lock_labels(const char *const *kinds, unsigned nkinds,
			     const char *const *results, unsigned nresults);

/* One lock operation of kind ended with result res (indices of the lock
 * labels; others are not counted). */
void metrics_lock(unsigned kind, enum metric_op op, unsigned res);

/* A release or heartbeat of kind found the lease had already run out. */
void metrics_expiration(unsigned kind);

/* A waiting acquire (wait_ms > 0) ended after waited_us, granted or not. */
void metrics_wait(unsigned kind, bool granted, int64_t waited_us);

/* The route labels requests are counted under; labels[n] is used for
 * requests that matched no route. Call once at start-up; labels must live
 * as long as the process. */
void metrics_set_routes(const char *const *labels, unsigned n);
/* One answered request: its route index, HTTP status and duration. */
void metrics_request(unsigned route, unsigned status, int64_t duration_us);

/* Render everything plus the gauges of waiting acquires and of watches;
 * the caller frees the text. */
char *metrics_render(unsigned waiters, unsigned watches, size_t *len);

#endif
