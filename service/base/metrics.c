/* metrics.c -- counters and histograms kept in relaxed atomics, and their
 * rendering in the Prometheus text exposition format (version 0.0.4).
 * Series that never moved are left out, except the totals operators
 * alert on, which are always present. The labels of the lock series and
 * of the routes are given at start-up (by main.c and api/server.c): this
 * module counts indices and knows neither locks nor HTTP routes. */
#include "service/base/metrics.h"

#include "service/base/util.h"
#include "service/base/version.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	const char *help;
} metric_rows[METRIC_COUNT] = {
	[METRIC_REDIS_ERRORS] = { "dlockd_redis_errors_total",
		"Requests answered 503 because Redis could not be used, or 500 because a lock script failed in it." },
	[METRIC_REDIS_RECONNECTS] = { "dlockd_redis_reconnects_total",
		"Times the subscriber connection to Redis was lost and reopened." },
	[METRIC_PUBSUB_MESSAGES] = { "dlockd_pubsub_messages_total",
		"Messages received on lock channels." },
	[METRIC_REPLICATION_WAITS] = { "dlockd_replication_waits_total",
		"WAITs sent to Redis after lock changes (--redis-sync-replicas)." },
	[METRIC_REPLICATION_UNCONFIRMED] = { "dlockd_replication_unconfirmed_total",
		"Grants answered 503 replication_unconfirmed: too few replicas acknowledged them (taken back unless a later call changed the holding)." },
	[METRIC_REPLICATION_UNCONFIRMED_KEPT] = { "dlockd_replication_unconfirmed_kept_total",
		"Releases, renewals and force releases too few replicas acknowledged (they stand; only counted)." },
};

static const char *const op_labels[MOP_COUNT] = { "acquire", "release", "force_release",
						  "heartbeat" };
/* The lock series' labels, by index (metrics_set_lock_labels). */
#define MAX_KINDS 8
#define MAX_RESULTS 16
static const char *const *kind_labels;
static unsigned nkinds;
static const char *const *result_labels;
static unsigned nresults;

/* HTTP statuses dlockd answers with; anything else counts as "other". */
static const unsigned statuses[] = { 200, 400, 401, 403, 404, 405, 409, 413, 500, 503 };
#define NSTATUS (ARRAY_SIZE(statuses) + 1)
#define MAX_ROUTES 32

/* Upper bounds in seconds, shared by every histogram. */
static const double buckets[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
				  0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };
#define NBUCKETS (ARRAY_SIZE(buckets) + 1)	/* the last is +Inf */

struct histogram {
	atomic_ullong count[NBUCKETS];	/* per bucket, not cumulative */
	atomic_ullong sum_us;
};

static atomic_ullong counters[METRIC_COUNT];
static atomic_ullong lock_ops[MAX_KINDS][MOP_COUNT][MAX_RESULTS];
static atomic_ullong expirations[MAX_KINDS];
static struct histogram waits[MAX_KINDS][2];	/* [kind][granted] */
static const char *const *route_labels;
static unsigned nroutes;
static atomic_ullong requests[MAX_ROUTES + 1][NSTATUS];
static struct histogram latency[MAX_ROUTES + 1];

/* ----- Counting ----- */

static void add(atomic_ullong *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static unsigned long long get(atomic_ullong *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void observe(struct histogram *h, int64_t us)
{
	size_t i = 0;

	if (us < 0)
		us = 0;
	while (i < ARRAY_SIZE(buckets) && (double)us / 1e6 > buckets[i])
		i++;
	add(&h->count[i]);
	atomic_fetch_add_explicit(&h->sum_us, (unsigned long long)us, memory_order_relaxed);
}

void metrics_inc(enum metric m)
{
	add(&counters[m]);
}

void metrics_set_lock_labels(const char *const *kinds, unsigned nk,
			     const char *const *results, unsigned nr)
{
	kind_labels = kinds;
	nkinds = nk < MAX_KINDS ? nk : MAX_KINDS;
	result_labels = results;
	nresults = nr < MAX_RESULTS ? nr : MAX_RESULTS;
}

void metrics_lock(unsigned kind, enum metric_op op, unsigned res)
{
	if (kind >= nkinds || res >= nresults)
		return;
	add(&lock_ops[kind][op][res]);
}

void metrics_expiration(unsigned kind)
{
	if (kind < nkinds)
		add(&expirations[kind]);
}

void metrics_wait(unsigned kind, bool granted, int64_t waited_us)
{
	if (kind < nkinds)
		observe(&waits[kind][granted], waited_us);
}

void metrics_set_routes(const char *const *labels, unsigned n)
{
	route_labels = labels;
	nroutes = n < MAX_ROUTES ? n : MAX_ROUTES;
}

void metrics_request(unsigned route, unsigned status, int64_t duration_us)
{
	size_t i = 0;

	if (route > nroutes)
		route = nroutes;
	while (i < ARRAY_SIZE(statuses) && statuses[i] != status)
		i++;
	add(&requests[route][i]);
	observe(&latency[route], duration_us);
}

/* ----- Rendering ----- */

struct out {
	char *p;
	size_t n, cap;
};

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int k;

	for (;;) {
		va_start(ap, fmt);
		k = vsnprintf(o->p + o->n, o->cap - o->n, fmt, ap);
		va_end(ap);
		if (k < 0)
			abort();
		if ((size_t)k < o->cap - o->n)
			break;
		o->cap = o->cap * 2 + (size_t)k;
		o->p = xrealloc(o->p, o->cap);
	}
	o->n += (size_t)k;
}

static void header(struct out *o, const char *name, const char *type, const char *help)
{
	emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series; labels is "" or 'a="b",' (with the comma). */
static void emit_histogram(struct out *o, const char *name, const char *labels,
			   struct histogram *h)
{
	unsigned long long cum = 0;

	for (size_t i = 0; i < NBUCKETS; i++) {
		cum += get(&h->count[i]);
		if (i < ARRAY_SIZE(buckets))
			emit(o, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, buckets[i], cum);
		else
			emit(o, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, cum);
	}
	emit(o, "%s_sum{%.*s} %.6f\n", name, labels[0] ? (int)strlen(labels) - 1 : 0, labels,
	     (double)get(&h->sum_us) / 1e6);
	emit(o, "%s_count{%.*s} %llu\n", name, labels[0] ? (int)strlen(labels) - 1 : 0, labels,
	     cum);
}

static const char *route_label(unsigned r)
{
	return route_labels && r <= nroutes ? route_labels[r] : "other";
}

char *metrics_render(unsigned waiters, unsigned watches, size_t *len)
{
	struct out o = { .p = xmalloc(8192), .cap = 8192 };
	char labels[128];

	header(&o, "dlockd_build_info", "gauge",
	       "Always 1; the version (semantic) and revision (commit) labels say which dlockd this is.");
	emit(&o, "dlockd_build_info{version=\"%s\",revision=\"%s\"} 1\n", dlockd_release,
	     dlockd_revision);
	for (int i = 0; i < METRIC_COUNT; i++) {
		header(&o, metric_rows[i].name, "counter", metric_rows[i].help);
		emit(&o, "%s %llu\n", metric_rows[i].name, get(&counters[i]));
	}

	header(&o, "dlockd_lock_operations_total", "counter",
	       "Lock operations by kind, operation and result.");
	for (unsigned k = 0; k < nkinds; k++)
		for (int op = 0; op < MOP_COUNT; op++)
			for (unsigned res = 0; res < nresults; res++) {
				unsigned long long v = get(&lock_ops[k][op][res]);

				if (v || res == 0)	/* the success: always shown */
					emit(&o, "dlockd_lock_operations_total{kind=\"%s\",op=\"%s\","
					     "result=\"%s\"} %llu\n", kind_labels[k], op_labels[op],
					     result_labels[res], v);
			}
	header(&o, "dlockd_lease_expirations_seen_total", "counter",
	       "Releases and heartbeats that found the lease had already run out.");
	for (unsigned k = 0; k < nkinds; k++)
		emit(&o, "dlockd_lease_expirations_seen_total{kind=\"%s\"} %llu\n", kind_labels[k],
		     get(&expirations[k]));

	header(&o, "dlockd_waiters", "gauge", "Requests waiting for a lock now.");
	emit(&o, "dlockd_waiters %u\n", waiters);
	header(&o, "dlockd_watches", "gauge",
	       "Status requests waiting for a lock to change now (GET with wait_ms).");
	emit(&o, "dlockd_watches %u\n", watches);

	header(&o, "dlockd_wait_seconds", "histogram",
	       "How long waiting acquires (wait_ms > 0) waited, by kind and outcome.");
	for (unsigned k = 0; k < nkinds; k++)
		for (int g = 1; g >= 0; g--) {
			snprintf(labels, sizeof(labels), "kind=\"%s\",outcome=\"%s\",",
				 kind_labels[k], g ? "granted" : "timeout");
			emit_histogram(&o, "dlockd_wait_seconds", labels, &waits[k][g]);
		}

	header(&o, "dlockd_http_requests_total", "counter",
	       "HTTP requests answered, by route and status.");
	for (unsigned r = 0; r <= nroutes; r++)
		for (size_t i = 0; i < NSTATUS; i++) {
			unsigned long long v = get(&requests[r][i]);
			char code[8];

			if (!v)
				continue;
			if (i < ARRAY_SIZE(statuses))
				snprintf(code, sizeof(code), "%u", statuses[i]);
			else
				snprintf(code, sizeof(code), "other");
			emit(&o, "dlockd_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
			     route_label(r), code, v);
		}
	header(&o, "dlockd_http_request_duration_seconds", "histogram",
	       "Time from a request's arrival to its answer being queued, by route.");
	for (unsigned r = 0; r <= nroutes; r++) {
		unsigned long long seen = 0;

		for (size_t i = 0; i < NBUCKETS; i++)
			seen += get(&latency[r].count[i]);
		if (!seen)
			continue;
		snprintf(labels, sizeof(labels), "route=\"%s\",", route_label(r));
		emit_histogram(&o, "dlockd_http_request_duration_seconds", labels, &latency[r]);
	}
	*len = o.n;
	return o.p;
}
