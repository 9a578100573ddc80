/* metrics.c -- counters and histograms kept in relaxed atomics, and their
 * rendering in the Prometheus text exposition format (version 0.0.4),
 * with the process_* figures (process_stats.c). Series that never moved
 * are left out, except the totals operators alert on, which are always
 * present. The labels of the lock series, of the Redis errors and of the
 * routes and methods are given at start-up (by main.c and api/server.c):
 * this module counts indices and knows neither locks nor HTTP routes. */
#include "service/base/metrics.h"

#include "service/base/process_stats.h"
#include "service/base/util.h"
#include "service/base/version.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	const char *help;
} metric_rows[METRIC_COUNT] = {
	[METRIC_PUBSUB_MESSAGES] = { "dlockd_pubsub_messages_total",
		"Messages received on lock channels." },
	[METRIC_REPLICATION_WAITS] = { "dlockd_replication_waits_total",
		"WAITs sent to Redis after lock changes (--redis-sync-replicas)." },
	[METRIC_REPLICATION_UNCONFIRMED] = { "dlockd_replication_unconfirmed_total",
		"Grants answered 503 replication_unconfirmed: too few replicas acknowledged them (taken back unless a later call changed the holding)." },
	[METRIC_REPLICATION_UNCONFIRMED_KEPT] = { "dlockd_replication_unconfirmed_kept_total",
		"Releases, renewals and force releases too few replicas acknowledged (they stand; only counted)." },
	[METRIC_SESSIONS_CREATED] = { "dlockd_sessions_created_total",
		"Sessions made through this instance (POST /sessions)." },
	[METRIC_SESSIONS_ENDED] = { "dlockd_sessions_ended_total",
		"Sessions ended through this instance by DELETE /sessions/{id}." },
	[METRIC_SESSIONS_EXPIRED] = { "dlockd_sessions_expired_total",
		"Session heartbeats through this instance that found the session ended by its lease running out (or ended elsewhere): the client had stopped heartbeating in time." },
};

static const char *const op_labels[MOP_COUNT] = { "acquire", "release", "force_release",
						  "heartbeat" };
static const char *const conn_labels[MCONN_COUNT] = { "command", "subscriber", "sentinel" };
/* The lock series' labels, by index (metrics_set_lock_labels). */
#define MAX_KINDS 8
#define MAX_RESULTS 16
static const char *const *kind_labels;
static const char *const *mode_labels;	/* NULL, or per kind (NULL: none) */
static unsigned nkinds;
static const char *const *result_labels;
static unsigned nresults;

/* HTTP statuses dlockd answers with; anything else counts as "other". */
static const unsigned statuses[] = { 200, 400, 401, 403, 404, 405, 409, 413, 500, 503 };
#define NSTATUS (ARRAY_SIZE(statuses) + 1)
#define MAX_ROUTES 32
#define MAX_METHODS 8
#define MAX_REASONS 32
#define MAX_NODES 64

/* Upper bounds in seconds, shared by every histogram. */
static const double buckets[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
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
static const char *const *method_labels;
static unsigned nmethods;
static atomic_ullong requests[MAX_ROUTES + 1][MAX_METHODS + 1][NSTATUS];
static struct histogram latency[MAX_ROUTES + 1][MAX_METHODS + 1];
static const unsigned *http_open;
static unsigned http_limit;

static atomic_ullong reconnects[MCONN_COUNT];
static const char *const *reason_labels;
static unsigned nreasons;
static atomic_ullong redis_errors[MAX_REASONS];
static struct histogram redis_rtt;

/* Redis nodes: rows are added (under nodes_lock), never removed. */
static pthread_mutex_t nodes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct node_row {
	char addr[128];
	atomic_int conns, ready;
} nodes[MAX_NODES];
static atomic_uint nnodes;

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

void metrics_reconnect(enum metric_conn k)
{
	add(&reconnects[k]);
}

void metrics_set_redis_error_labels(const char *const *labels, unsigned n)
{
	reason_labels = labels;
	nreasons = n < MAX_REASONS ? n : MAX_REASONS;
}

void metrics_redis_error(unsigned r)
{
	if (r < nreasons)
		add(&redis_errors[r]);
}

void metrics_redis_round_trip(int64_t us)
{
	observe(&redis_rtt, us);
}

int metrics_redis_node(const char *addr)
{
	unsigned n = atomic_load(&nnodes);
	int found = -1;

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(nodes[i].addr, addr))
			return (int)i;
	pthread_mutex_lock(&nodes_lock);
	n = atomic_load(&nnodes);
	for (unsigned i = 0; i < n && found < 0; i++)
		if (!strcmp(nodes[i].addr, addr))
			found = (int)i;
	if (found < 0 && n < MAX_NODES) {
		snprintf(nodes[n].addr, sizeof(nodes[n].addr), "%s", addr);
		atomic_store(&nnodes, n + 1);	/* after the address is in */
		found = (int)n;
	}
	pthread_mutex_unlock(&nodes_lock);
	return found;
}

void metrics_redis_node_conns(int node, int delta)
{
	if (node >= 0 && node < MAX_NODES)
		atomic_fetch_add(&nodes[node].conns, delta);
}

void metrics_redis_node_ready(int node, int delta)
{
	if (node >= 0 && node < MAX_NODES)
		atomic_fetch_add(&nodes[node].ready, delta);
}

void metrics_set_http_connections(const unsigned *open, unsigned limit)
{
	http_open = open;
	http_limit = limit;
}

void metrics_set_lock_labels(const char *const *kinds, unsigned nk,
			     const char *const *results, unsigned nr)
{
	kind_labels = kinds;
	nkinds = nk < MAX_KINDS ? nk : MAX_KINDS;
	result_labels = results;
	nresults = nr < MAX_RESULTS ? nr : MAX_RESULTS;
}

void metrics_set_lock_modes(const char *const *modes)
{
	mode_labels = modes;
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

void metrics_set_methods(const char *const *labels, unsigned n)
{
	method_labels = labels;
	nmethods = n < MAX_METHODS ? n : MAX_METHODS;
}

void metrics_request(unsigned route, unsigned method, unsigned status, int64_t duration_us)
{
	size_t i = 0;

	if (route > nroutes)
		route = nroutes;
	if (method > nmethods)
		method = nmethods;
	while (i < ARRAY_SIZE(statuses) && statuses[i] != status)
		i++;
	add(&requests[route][method][i]);
	observe(&latency[route][method], duration_us);
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
	if (!labels[0]) {
		emit(o, "%s_sum %.6f\n%s_count %llu\n", name, (double)get(&h->sum_us) / 1e6, name,
		     cum);
		return;
	}
	emit(o, "%s_sum{%.*s} %.6f\n", name, (int)strlen(labels) - 1, labels,
	     (double)get(&h->sum_us) / 1e6);
	emit(o, "%s_count{%.*s} %llu\n", name, (int)strlen(labels) - 1, labels, cum);
}

static const char *route_label(unsigned r)
{
	return route_labels && r <= nroutes ? route_labels[r] : "other";
}

static const char *method_label(unsigned m)
{
	return method_labels && m <= nmethods ? method_labels[m] : "other";
}

/* The labels of lock kind k, with a trailing comma: kind="..."[,mode="..."], */
static void kind_set(char *buf, size_t len, unsigned k)
{
	if (mode_labels && mode_labels[k])
		snprintf(buf, len, "kind=\"%s\",mode=\"%s\",", kind_labels[k], mode_labels[k]);
	else
		snprintf(buf, len, "kind=\"%s\",", kind_labels[k]);
}

static void gauge(struct out *o, const char *name, const char *help, double v)
{
	header(o, name, "gauge", help);
	emit(o, "%s %.17g\n", name, v);
}

static void render_process(struct out *o)
{
	struct process_stats st;

	process_stats_read(&st);
	if (st.have_stat) {
		header(o, "process_cpu_seconds_total", "counter",
		       "Total user and system CPU time spent in seconds.");
		emit(o, "process_cpu_seconds_total %.17g\n", st.cpu_seconds);
		gauge(o, "process_resident_memory_bytes", "Resident memory size in bytes.",
		      st.resident_bytes);
		gauge(o, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
		      st.virtual_bytes);
		gauge(o, "process_start_time_seconds",
		      "Start time of the process since unix epoch in seconds.",
		      st.start_time_seconds);
	}
	if (st.have_fds)
		gauge(o, "process_open_fds", "Number of open file descriptors.", st.open_fds);
	gauge(o, "process_max_fds", "Maximum number of open file descriptors.", st.max_fds);
}

static void render_redis(struct out *o)
{
	unsigned n = atomic_load(&nnodes);

	header(o, "dlockd_redis_up", "gauge",
	       "1 while a connection of dlockd's to the Redis node is ready, 0 while none is, by node.");
	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&nodes[i].conns) > 0)
			emit(o, "dlockd_redis_up{node=\"%s\"} %d\n", nodes[i].addr,
			     atomic_load(&nodes[i].ready) > 0);
	header(o, "dlockd_redis_errors_total", "counter",
	       "Redis commands that failed, by reason: no reply (unreachable, timed out), or the error Redis answered.");
	for (unsigned r = 0; r < nreasons; r++)
		emit(o, "dlockd_redis_errors_total{reason=\"%s\"} %llu\n", reason_labels[r],
		     get(&redis_errors[r]));
	header(o, "dlockd_redis_reconnects_total", "counter",
	       "Connections to Redis lost (and opened again), by kind of connection.");
	for (int k = 0; k < MCONN_COUNT; k++)
		emit(o, "dlockd_redis_reconnects_total{connection=\"%s\"} %llu\n", conn_labels[k],
		     get(&reconnects[k]));
	header(o, "dlockd_redis_round_trip_seconds", "histogram",
	       "Time from a command's send to Redis to its reply.");
	emit_histogram(o, "dlockd_redis_round_trip_seconds", "", &redis_rtt);
}

static void render_http(struct out *o)
{
	char labels[200];

	header(o, "dlockd_http_connections", "gauge", "HTTP connections open now.");
	emit(o, "dlockd_http_connections %u\n",
	     http_open ? __atomic_load_n(http_open, __ATOMIC_RELAXED) : 0);
	header(o, "dlockd_http_connections_limit", "gauge",
	       "The most HTTP connections dlockd keeps open (--max-connections).");
	emit(o, "dlockd_http_connections_limit %u\n", http_limit);

	header(o, "dlockd_http_requests_total", "counter",
	       "HTTP requests answered, by route, method and status.");
	for (unsigned r = 0; r <= nroutes; r++)
		for (unsigned m = 0; m <= nmethods; m++)
			for (size_t i = 0; i < NSTATUS; i++) {
				unsigned long long v = get(&requests[r][m][i]);
				char code[8];

				if (!v)
					continue;
				if (i < ARRAY_SIZE(statuses))
					snprintf(code, sizeof(code), "%u", statuses[i]);
				else
					snprintf(code, sizeof(code), "other");
				emit(o, "dlockd_http_requests_total{route=\"%s\",method=\"%s\","
				     "code=\"%s\"} %llu\n", route_label(r), method_label(m), code, v);
			}
	header(o, "dlockd_http_request_duration_seconds", "histogram",
	       "Time from a request's arrival to its answer being queued, less the time it waited for a lock or a change (dlockd_wait_seconds), by route and method.");
	for (unsigned r = 0; r <= nroutes; r++)
		for (unsigned m = 0; m <= nmethods; m++) {
			unsigned long long seen = 0;

			for (size_t i = 0; i < NBUCKETS; i++)
				seen += get(&latency[r][m].count[i]);
			if (!seen)
				continue;
			snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\",",
				 route_label(r), method_label(m));
			emit_histogram(o, "dlockd_http_request_duration_seconds", labels,
				       &latency[r][m]);
		}
}

static atomic_llong sessions_open;

void metrics_set_sessions_open(int64_t open)
{
	atomic_store_explicit(&sessions_open, open, memory_order_relaxed);
}

char *metrics_render(unsigned waiters, unsigned watches, size_t *len)
{
	struct out o = { .p = xmalloc(16384), .cap = 16384 };
	char labels[200], kl[120];

	render_process(&o);
	header(&o, "dlockd_build_info", "gauge",
	       "Always 1; the version (semantic) and revision (commit) labels say which dlockd this is.");
	emit(&o, "dlockd_build_info{version=\"%s\",revision=\"%s\"} 1\n", dlockd_release,
	     dlockd_revision);
	for (int i = 0; i < METRIC_COUNT; i++) {
		header(&o, metric_rows[i].name, "counter", metric_rows[i].help);
		emit(&o, "%s %llu\n", metric_rows[i].name, get(&counters[i]));
	}
	render_redis(&o);

	header(&o, "dlockd_lock_operations_total", "counter",
	       "Lock operations by kind (mode for read-write locks), operation and result.");
	for (unsigned k = 0; k < nkinds; k++) {
		kind_set(kl, sizeof(kl), k);
		for (int op = 0; op < MOP_COUNT; op++)
			for (unsigned res = 0; res < nresults; res++) {
				unsigned long long v = get(&lock_ops[k][op][res]);

				if (v || res == 0)	/* the success: always shown */
					emit(&o, "dlockd_lock_operations_total{%sop=\"%s\","
					     "result=\"%s\"} %llu\n", kl, op_labels[op],
					     result_labels[res], v);
			}
	}
	header(&o, "dlockd_lease_expirations_seen_total", "counter",
	       "Releases and heartbeats that found the lease had already run out.");
	for (unsigned k = 0; k < nkinds; k++) {
		kind_set(kl, sizeof(kl), k);
		emit(&o, "dlockd_lease_expirations_seen_total{%.*s} %llu\n",
		     (int)strlen(kl) - 1, kl, get(&expirations[k]));
	}

	header(&o, "dlockd_waiters", "gauge", "Requests waiting for a lock now.");
	emit(&o, "dlockd_waiters %u\n", waiters);
	header(&o, "dlockd_watches", "gauge",
	       "Status requests waiting for a lock to change now (GET with wait_ms).");
	emit(&o, "dlockd_watches %u\n", watches);
	header(&o, "dlockd_sessions", "gauge",
	       "Sessions open in Redis (every dlockd's), as this dlockd's last session call "
	       "counted them.");
	emit(&o, "dlockd_sessions %lld\n",
	     (long long)atomic_load_explicit(&sessions_open, memory_order_relaxed));

	header(&o, "dlockd_wait_seconds", "histogram",
	       "How long waiting acquires (wait_ms > 0) waited, by kind and outcome.");
	for (unsigned k = 0; k < nkinds; k++) {
		kind_set(kl, sizeof(kl), k);
		for (int g = 1; g >= 0; g--) {
			snprintf(labels, sizeof(labels), "%soutcome=\"%s\",", kl,
				 g ? "granted" : "timeout");
			emit_histogram(&o, "dlockd_wait_seconds", labels, &waits[k][g]);
		}
	}
	render_http(&o);
	*len = o.n;
	return o.p;
}
