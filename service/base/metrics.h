/* metrics.h -- process-wide counters and histograms, rendered in the
 * Prometheus text format. Every call is lock-free and safe from any thread. */
#ifndef DLOCKD_METRICS_H
#define DLOCKD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/lock/locks.h"

enum metric {
	METRIC_REDIS_ERRORS,		/* requests answered 503 for want of Redis */
	METRIC_REDIS_RECONNECTS,	/* subscriber connection losses */
	METRIC_PUBSUB_MESSAGES,		/* messages received on lock channels */
	METRIC_REPLICATION_WAITS,	/* WAITs sent (--redis-sync-replicas) */
	METRIC_REPLICATION_UNCONFIRMED,	/* grants undone: too few replicas had them */
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

#define METRIC_ABANDONED LOCK_RESULT_COUNT	/* a grant nobody received */

void metrics_inc(enum metric m);

/* One lock operation of kind ended with res (enum lock_result, or
 * METRIC_ABANDONED). A release or heartbeat that finds LOCK_NOT_HELD also
 * counts as an expiration seen: the lease had run out. */
void metrics_lock(enum lock_kind kind, enum metric_op op, unsigned res);

/* A waiting acquire (wait_ms > 0) ended after waited_us, granted or not. */
void metrics_wait(enum lock_kind kind, bool granted, int64_t waited_us);

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
