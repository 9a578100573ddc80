/* test_metrics.c -- /metrics in the Prometheus text format: the counters
 * and histograms move as requests are made. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPS "dlockd_lock_operations_total"

static double m(const char *series)
{
	return metric_value(&H_dlockd, series);
}

TEST(metrics_count_requests_operations_and_waits)
{
	const char *n = lockname("m");
	char p[512];
	struct http_resp r;
	double req0 = m("dlockd_http_requests_total{route=\"/locks/{name}\",code=\"200\"}");
	double req409 = m("dlockd_http_requests_total{route=\"/locks/{name}\",code=\"409\"}");
	double acq[4], exp0 = m("dlockd_lease_expirations_seen_total{kind=\"lock\"}");
	double hb_nh = m(OPS "{kind=\"lock\",op=\"heartbeat\",result=\"not_held\"}");
	double locked = m(OPS "{kind=\"lock\",op=\"acquire\",result=\"locked\"}");
	double w_granted = m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"granted\"}");
	double w_timeout = m("dlockd_wait_seconds_count{kind=\"lock\",outcome=\"timeout\"}");
	double lat = m("dlockd_http_request_duration_seconds_count{route=\"/locks/{name}\"}");
	double notfound = m("dlockd_http_requests_total{route=\"other\",code=\"404\"}");
	static const char *const kinds[4] = { "lock", "fairlock", "read", "write" };
	char series[200];

	for (int k = 0; k < 4; k++) {
		snprintf(series, sizeof(series), OPS "{kind=\"%s\",op=\"acquire\",result=\"ok\"}",
			 kinds[k]);
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

	CHECK(m("dlockd_http_requests_total{route=\"/locks/{name}\",code=\"200\"}") == req0 + 3,
	      "three 200s on /locks/{name}");
	CHECK(m("dlockd_http_requests_total{route=\"/locks/{name}\",code=\"409\"}") == req409 + 1,
	      "one 409 on /locks/{name}");
	CHECK(m("dlockd_http_requests_total{route=\"other\",code=\"404\"}") == notfound + 1,
	      "unknown paths count under route=\"other\"");
	CHECK(m(OPS "{kind=\"lock\",op=\"acquire\",result=\"ok\"}") == acq[0] + 2, "lock acquisitions");
	for (int k = 1; k < 4; k++) {
		snprintf(series, sizeof(series), OPS "{kind=\"%s\",op=\"acquire\",result=\"ok\"}",
			 kinds[k]);
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
	CHECK(m("dlockd_http_request_duration_seconds_count{route=\"/locks/{name}\"}") >= lat + 4,
	      "request latency observed per route");
	http("GET", "/metrics", NULL, &r);
	CHECK(strstr(r.content_type, "text/plain"), "Prometheus text content type: %s",
	      r.content_type);
	CHECK(strstr(r.body, "# TYPE dlockd_wait_seconds histogram") &&
	      strstr(r.body, "# TYPE dlockd_waiters gauge") &&
	      strstr(r.body, "dlockd_redis_reconnects_total ") &&
	      strstr(r.body, "dlockd_pubsub_messages_total ") &&
	      strstr(r.body, "dlockd_redis_errors_total "), "every family is listed");
	http_free(&r);
}
