/* test_metrics.c -- /metrics in the Prometheus text format: the counters
 * and histograms move as requests are made, the process, connection and
 * Redis series are there and move, and promtool finds nothing wrong. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OPS "dlockd_lock_operations_total"
#define REQ "dlockd_http_requests_total"
#define DUR "dlockd_http_request_duration_seconds"

static double m(const char *series)
{
	return metric_value(&H_dlockd, series);
}

TEST(metrics_count_requests_operations_and_waits)
{
	const char *n = lockname("m");
	char p[512];
	struct http_resp r;
	double req0 = m(REQ "{route=\"/locks/{name}\",method=\"PUT\",code=\"200\"}");
	double del0 = m(REQ "{route=\"/locks/{name}\",method=\"DELETE\",code=\"200\"}");
	double req409 = m(REQ "{route=\"/locks/{name}\",method=\"PUT\",code=\"409\"}");
	double acq[4], exp0 = m("dlockd_lease_expirations_seen_total{kind=\"lock\"}");
	double hb_nh = m(OPS "{kind=\"lock\",op=\"heartbeat\",result=\"not_held\"}");
	double locked = m(OPS "{kind=\"lock\",op=\"acquire\",result=\"locked\"}");
	double w_granted = m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"granted\"}");
	double w_timeout = m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"timeout\"}");
	double lat = m(DUR "_count{route=\"/locks/{name}\",method=\"PUT\"}");
	double notfound = m(REQ "{route=\"other\",method=\"GET\",code=\"404\"}");
	static const char *const kinds[4] = { "kind=\"lock\"", "kind=\"fairlock\"",
					      "kind=\"rwlock\",mode=\"read\"",
					      "kind=\"rwlock\",mode=\"write\"" };
	char series[200];

	for (int k = 0; k < 4; k++) {
		snprintf(series, sizeof(series), OPS "{%s,op=\"acquire\",result=\"ok\"}", kinds[k]);
		acq[k] = m(series);
	}
	CHECK(req0 >= 0, "/metrics answers");

	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	req("PUT", p, NULL);
	snprintf(p, sizeof(p), "/locks/%s?owner=b&wait_ms=100", n);
	req("PUT", p, NULL);		/* waits, times out: 409 */
	snprintf(p, sizeof(p), "/fairlocks/%s-f?owner=a", n);
	req("PUT", p, NULL);
	snprintf(p, sizeof(p), "/rwlocks/%s-r/read?owner=a", n);
	req("PUT", p, NULL);
	snprintf(p, sizeof(p), "/rwlocks/%s-w/write?owner=a", n);
	req("PUT", p, NULL);
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	http("DELETE", p, NULL, &r);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=c&wait_ms=1000", n);
	req("PUT", p, NULL);		/* free: granted at once */
	snprintf(p, sizeof(p), "/locks/%s/heartbeat?owner=gone", n);
	rcmd_int("DEL %s", n);			/* c's lease "runs out" */
	http("POST", p, NULL, &r);
	http_free(&r);
	http("GET", "/no/such/thing", NULL, &r);
	http_free(&r);

	CHECK(m(REQ "{route=\"/locks/{name}\",method=\"PUT\",code=\"200\"}") == req0 + 2,
	      "two PUT 200s on /locks/{name}");
	CHECK(m(REQ "{route=\"/locks/{name}\",method=\"DELETE\",code=\"200\"}") == del0 + 1,
	      "one DELETE 200 on /locks/{name}");
	CHECK(m(REQ "{route=\"/locks/{name}\",method=\"PUT\",code=\"409\"}") == req409 + 1,
	      "one 409 on /locks/{name}");
	CHECK(m(REQ "{route=\"other\",method=\"GET\",code=\"404\"}") == notfound + 1,
	      "unknown paths count under route=\"other\"");
	CHECK(m(OPS "{kind=\"lock\",op=\"acquire\",result=\"ok\"}") == acq[0] + 2, "lock acquisitions");
	for (int k = 1; k < 4; k++) {
		snprintf(series, sizeof(series), OPS "{%s,op=\"acquire\",result=\"ok\"}", kinds[k]);
		CHECK(m(series) == acq[k] + 1, "one %s acquisition counted", kinds[k]);
	}
	CHECK(m(OPS "{kind=\"lock\",op=\"acquire\",result=\"locked\"}") == locked + 1,
	      "the timed-out acquire counts as locked");
	CHECK(m(OPS "{kind=\"lock\",op=\"heartbeat\",result=\"not_held\"}") == hb_nh + 1 &&
	      m("dlockd_lease_expirations_seen_total{kind=\"lock\"}") == exp0 + 1,
	      "a heartbeat that finds the lease gone counts as an expiration seen");
	CHECK(m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"granted\"}") == w_granted + 1 &&
	      m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"timeout\"}") == w_timeout + 1,
	      "the wait histogram saw one grant and one timeout");
	CHECK(m("dlockd_wait_seconds_bucket{kind=\"lock\",outcome=\"timeout\",le=\"0.05\"}") <
	      m("dlockd_wait_seconds_bucket{kind=\"lock\",outcome=\"timeout\",le=\"0.25\"}"),
	      "the 100 ms timeout fell between the 0.05 s and 0.25 s buckets");
	CHECK(m(DUR "_count{route=\"/locks/{name}\",method=\"PUT\"}") >= lat + 3,
	      "request latency observed per route and method");
	http("GET", "/metrics", NULL, &r);
	CHECK(!strcmp(r.content_type, "text/plain; version=0.0.4; charset=utf-8"),
	      "Prometheus text content type: %s", r.content_type);
	CHECK(strstr(r.body, "# TYPE dlockd_wait_seconds histogram") &&
	      strstr(r.body, "# TYPE dlockd_waiters gauge") &&
	      strstr(r.body, "dlockd_redis_reconnects_total ") &&
	      strstr(r.body, "dlockd_pubsub_messages_total ") &&
	      strstr(r.body, "dlockd_redis_errors_total "), "every family is listed");
	http_free(&r);
}

/* The text of GET /metrics on d (NULL: H_dlockd); the caller frees it. */
static char *metrics_text(const struct dlockd_srv *d)
{
	struct http_resp r;
	char *text;

	http_on((d ? d : &H_dlockd)->base, "GET", "/metrics", NULL, &r);
	text = strdup(r.status == 200 && r.body ? r.body : "");
	http_free(&r);
	return text;
}

TEST(metrics_pass_promtool_check_metrics)
{
	char path[512], cmd[1200], out[4096] = "";
	char *text = metrics_text(NULL);
	size_t n;
	FILE *f;
	int rc;

	CHECK(system("command -v promtool >/dev/null") == 0,
	      "promtool is installed (Debian's prometheus package; make deps installs it)");
	snprintf(path, sizeof(path), "%s/metrics.txt", test_tmpdir());
	f = fopen(path, "w");
	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
	snprintf(cmd, sizeof(cmd), "promtool check metrics <%s 2>&1", path);
	f = popen(cmd, "r");
	CHECK(f, "run promtool");
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	rc = pclose(f);
	CHECK(rc == 0 && n == 0, "promtool check metrics says nothing (exit %d):\n%s", rc, out);
	free(text);
}

TEST(metrics_process_series_read_proc_self)
{
	double start = m("process_start_time_seconds");
	double now = (double)time(NULL);

	struct http_resp r;

	/* counted in clock ticks: a dlockd that has just started may not have
	 * used one yet, so the series is asked to be there, not above 0 */
	CHECK(http_on(H_dlockd.base, "GET", "/metrics", NULL, &r) == 0 &&
	      strstr(r.body, "\nprocess_cpu_seconds_total ") && m("process_cpu_seconds_total") >= 0,
	      "CPU seconds listed");
	http_free(&r);
	CHECK(m("process_resident_memory_bytes") > 1 << 20, "resident memory over 1 MB: %.0f",
	      m("process_resident_memory_bytes"));
	CHECK(m("process_open_fds") >= 4, "open fds: %.0f", m("process_open_fds"));
	CHECK(m("process_max_fds") >= m("process_open_fds"), "max fds: %.0f", m("process_max_fds"));
	CHECK(start > now - 86400 && start <= now + 5,
	      "start time %.0f within the last day (now %.0f)", start, now);
}

TEST(metrics_open_connections_and_their_limit)
{
	double limit = m("dlockd_http_connections_limit");
	double before = m("dlockd_http_connections");
	int fds[5];

	CHECK(limit > 0, "the limit is shown: %.0f", limit);
	for (int i = 0; i < 5; i++)
		fds[i] = raw_connect(H_dlockd.port);
	CHECK(WAIT_FOR(m("dlockd_http_connections") >= before + 5, 5000),
	      "five more connections open: %.0f after %.0f", m("dlockd_http_connections"), before);
	for (int i = 0; i < 5; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	CHECK(WAIT_FOR(m("dlockd_http_connections") <= before, 5000),
	      "and gone once closed: %.0f (before %.0f)", m("dlockd_http_connections"),
	      before);
}

TEST(metrics_request_duration_leaves_out_waiting)
{
	const char *n = lockname("mwait");
	char p[512];
	double c0 = m(DUR "_count{route=\"/locks/{name}\",method=\"PUT\"}");
	double fast0 = m(DUR "_bucket{route=\"/locks/{name}\",method=\"PUT\",le=\"0.5\"}");
	double w0 = m("dlockd_wait_seconds_bucket{kind=\"lock\",outcome=\"timeout\",le=\"1\"}");
	double wc0 = m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"timeout\"}");
	double rtt0 = m("dlockd_redis_round_trip_seconds_count");

	snprintf(p, sizeof(p), "/locks/%s?owner=a&ttl_ms=20000", n);
	CHECK(req("PUT", p, NULL) == 200, "a holds the lock");
	snprintf(p, sizeof(p), "/locks/%s?owner=b&wait_ms=1500", n);
	CHECK(req("PUT", p, NULL) == 409, "b waits 1.5 s and is refused");
	CHECK(m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"timeout\"}") == wc0 + 1 &&
	      m("dlockd_wait_seconds_bucket{kind=\"lock\",outcome=\"timeout\",le=\"1\"}") == w0,
	      "the wait histogram has b's 1.5 s wait");
	CHECK(m(DUR "_count{route=\"/locks/{name}\",method=\"PUT\"}") == c0 + 2,
	      "both requests observed");
	CHECK(m(DUR "_bucket{route=\"/locks/{name}\",method=\"PUT\",le=\"0.5\"}") == fast0 + 2,
	      "both took under 0.5 s of work: the wait is left out");
	CHECK(m("dlockd_redis_round_trip_seconds_count") >= rtt0 + 3,
	      "Redis round trips observed: %.0f after %.0f",
	      m("dlockd_redis_round_trip_seconds_count"), rtt0);
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	CHECK(req("DELETE", p, NULL) == 200, "released");
}

TEST(metrics_redis_up_errors_and_reconnects_are_listed)
{
	char *text = metrics_text(NULL);
	char up[96];

	snprintf(up, sizeof(up), "dlockd_redis_up{node=\"127.0.0.1:%d\"} 1\n", H_redis.port);
	CHECK(strstr(text, up), "the shared Redis is up: %s", up);
	CHECK(strstr(text, "dlockd_redis_errors_total{reason=\"no_reply\"} ") &&
	      strstr(text, "dlockd_redis_errors_total{reason=\"loading\"} ") &&
	      strstr(text, "dlockd_redis_errors_total{reason=\"error\"} "),
	      "Redis errors by reason, listed at 0");
	CHECK(strstr(text, "dlockd_redis_reconnects_total{connection=\"command\"} ") &&
	      strstr(text, "dlockd_redis_reconnects_total{connection=\"subscriber\"} ") &&
	      strstr(text, "dlockd_redis_reconnects_total{connection=\"sentinel\"} "),
	      "reconnects of every kind of connection");
	free(text);
}
