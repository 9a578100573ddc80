/* metrics.c -- lock-free counters (relaxed atomics) and their rendering in
 * the Prometheus text exposition format. */
#include "metrics.h"

#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	const char *help;
} metric_rows[METRIC_COUNT] = {
	[METRIC_ACQUIRED] = { "dlockd_acquisitions_total", "Locks granted." },
	[METRIC_ACQUIRE_TIMEOUTS] = { "dlockd_acquire_timeouts_total",
		"Acquisitions answered 409 locked." },
	[METRIC_RELEASED] = { "dlockd_releases_total", "Holds released." },
	[METRIC_HEARTBEATS] = { "dlockd_heartbeats_total", "Leases renewed." },
	[METRIC_ABANDONED_GRANTS] = { "dlockd_abandoned_grants_total",
		"Locks released again because the client left before the answer." },
	[METRIC_REDIS_ERRORS] = { "dlockd_backend_unavailable_total",
		"Requests answered 503 because Redis could not be used." },
	[METRIC_REDIS_RECONNECTS] = { "dlockd_redis_subscriber_reconnects_total",
		"Times the subscriber connection to Redis was lost." },
	[METRIC_PUBSUB_MESSAGES] = { "dlockd_pubsub_messages_total",
		"Messages received on lock channels." },
};

static atomic_ullong counters[METRIC_COUNT];

/* HTTP statuses dlockd answers with; anything else counts as "other". */
static const unsigned statuses[] = { 200, 400, 401, 403, 404, 405, 409, 413, 500, 503 };
static atomic_ullong by_status[ARRAY_SIZE(statuses) + 1];

void metrics_inc(enum metric m)
{
	atomic_fetch_add_explicit(&counters[m], 1, memory_order_relaxed);
}

void metrics_request(unsigned status)
{
	size_t i = 0;

	while (i < ARRAY_SIZE(statuses) && statuses[i] != status)
		i++;
	atomic_fetch_add_explicit(&by_status[i], 1, memory_order_relaxed);
}

char *metrics_render(unsigned waiters, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *out = xmalloc(cap);

#define EMIT(...) do { \
		int k_ = snprintf(out + n, cap - n, __VA_ARGS__); \
		if (k_ < 0) abort(); \
		if ((size_t)k_ >= cap - n) { \
			cap = cap * 2 + (size_t)k_; out = xrealloc(out, cap); \
			k_ = snprintf(out + n, cap - n, __VA_ARGS__); \
		} \
		n += (size_t)k_; \
	} while (0)

	for (int i = 0; i < METRIC_COUNT; i++) {
		EMIT("# HELP %s %s\n# TYPE %s counter\n%s %llu\n", metric_rows[i].name,
		     metric_rows[i].help, metric_rows[i].name, metric_rows[i].name,
		     (unsigned long long)atomic_load_explicit(&counters[i], memory_order_relaxed));
	}
	EMIT("# HELP dlockd_http_requests_total HTTP requests answered, by status.\n"
	     "# TYPE dlockd_http_requests_total counter\n");
	for (size_t i = 0; i <= ARRAY_SIZE(statuses); i++) {
		unsigned long long v = atomic_load_explicit(&by_status[i], memory_order_relaxed);

		if (i < ARRAY_SIZE(statuses))
			EMIT("dlockd_http_requests_total{code=\"%u\"} %llu\n", statuses[i], v);
		else
			EMIT("dlockd_http_requests_total{code=\"other\"} %llu\n", v);
	}
	EMIT("# HELP dlockd_waiters Requests waiting for a lock.\n"
	     "# TYPE dlockd_waiters gauge\ndlockd_waiters %u\n", waiters);
#undef EMIT
	*len = n;
	return out;
}
