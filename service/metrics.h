/* metrics.h -- process-wide counters, rendered in Prometheus text format. */
#ifndef DLOCKD_METRICS_H
#define DLOCKD_METRICS_H

#include <stddef.h>

enum metric {
	METRIC_ACQUIRED,		/* locks granted */
	METRIC_ACQUIRE_TIMEOUTS,	/* waits that ended with 409 locked */
	METRIC_RELEASED,		/* releases that freed a hold */
	METRIC_HEARTBEATS,		/* successful renewals */
	METRIC_ABANDONED_GRANTS,	/* grants released again: client gone */
	METRIC_REDIS_ERRORS,		/* requests answered 503 */
	METRIC_REDIS_RECONNECTS,	/* subscriber connection losses */
	METRIC_PUBSUB_MESSAGES,		/* messages received on lock channels */
	METRIC_COUNT
};

void metrics_inc(enum metric m);
/* Count one answered request with its HTTP status. */
void metrics_request(unsigned status);
/* Render all metrics plus the gauges given; the caller frees the text. */
char *metrics_render(unsigned waiters, size_t *len);

#endif
