/* test_logs.c -- the access line of each request: its level follows the
 * answer (heartbeats at debug unless --log-heartbeats on, 4xx at info,
 * 5xx at warn), it names the peer and a request id, which is the
 * client's X-Request-Id or traceparent's trace id or a new one, and is
 * echoed as X-Request-Id; the start-up line has structured fields. */
#include "../harness/harness.h"

#include <stdio.h>
#include <string.h>

/* PUT/POST/GET path on d, returning the response's X-Request-Id in id. */
static long call(const struct dlockd_srv *d, const char *method, const char *path,
		 const char *header, char *id, size_t len)
{
	struct http_resp r;
	long st;

	http_extra_header(header);
	st = http_on(d->base, method, path, NULL, &r) == 0 ? r.status : 0;
	http_extra_header(NULL);
	snprintf(id, len, "%s", r.request_id);
	http_free(&r);
	return st;
}

TEST(logs_request_ids_are_honoured_generated_and_echoed)
{
	struct dlockd_srv d;
	const char *n = lockname("rid");
	char p[256], id[136], gen[136], want[200];

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start");
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	CHECK(call(&d, "PUT", p, "X-Request-Id: job-42.retry:1", id, sizeof(id)) == 200 &&
	      !strcmp(id, "job-42.retry:1"), "the client's X-Request-Id is echoed: '%s'", id);
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	CHECK(call(&d, "GET", p,
		   "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", id,
		   sizeof(id)) == 200 && !strcmp(id, "4bf92f3577b34da6a3ce929d0e0e4736"),
	      "a traceparent gives its trace id: '%s'", id);
	CHECK(call(&d, "GET", p, "X-Request-Id: has space", gen, sizeof(gen)) == 200 &&
	      strlen(gen) == 32 && strspn(gen, "0123456789abcdef") == 32,
	      "an id that cannot be echoed safely is replaced by a new one: '%s'", gen);
	CHECK(call(&d, "GET", "/no/such", NULL, id, sizeof(id)) == 404 && strlen(id) == 32 &&
	      strcmp(id, gen), "every request gets an id of its own: '%s'", id);
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	CHECK(call(&d, "DELETE", p, NULL, id, sizeof(id)) == 200, "released");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");

	CHECK(file_lines_with(d.log, "\"msg\":\"request\"", "\"request_id\":\"job-42.retry:1\"",
			      "\"method\":\"PUT\"", "\"peer\":\"127.0.0.1:", NULL) == 1,
	      "the access line carries the client's id and the peer");
	CHECK(file_lines_with(d.log, "\"request_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\"", NULL) ==
	      1, "and the trace id");
	snprintf(want, sizeof(want), "\"request_id\":\"%s\"", gen);
	CHECK(file_lines_with(d.log, want, NULL) == 1, "and the generated one");
	CHECK(file_lines_with(d.log, "\"msg\":\"request\"", "\"level\":\"info\"",
			      "\"status\":404", NULL) == 1, "a 404 at info");
	CHECK(file_lines_with(d.log, "\"msg\":\"dlockd ", " listening on ", "\"version\":\"",
			      "\"listen\":\"127.0.0.1:", "\"port\":", "\"redis\":\"redis://127.0.0.1:",
			      "\"topology\":\"standalone\"", "\"pubsub\":\"classic\"", "\"threads\":",
			      "\"pid\":", NULL) == 1, "the start-up line has its fields");
}

TEST(logs_heartbeats_at_debug_and_redis_trouble_at_warn)
{
	static const char *const debug[] = { "--log-level", "debug", NULL };
	static const char *const hb[] = { "--log-heartbeats", "on", NULL };
	const char *n = lockname("hb");
	struct dlockd_srv d;
	char p[256], id[136], dead[64];

	snprintf(p, sizeof(p), "/locks/%s/heartbeat?owner=a", n);
	for (int round = 0; round < 3; round++) {
		const char *const *flags = round == 0 ? NULL : round == 1 ? debug : hb;
		char put[256];

		CHECK(dlockd_start(&d, NULL, flags) == 0, "start (round %d)", round);
		snprintf(put, sizeof(put), "/locks/%s?owner=a", n);
		CHECK(call(&d, "PUT", put, NULL, id, sizeof(id)) == 200, "taken");
		CHECK(call(&d, "POST", p, NULL, id, sizeof(id)) == 200, "renewed");
		CHECK(call(&d, "DELETE", put, NULL, id, sizeof(id)) == 200, "released");
		CHECK(call(&d, "POST", p, NULL, id, sizeof(id)) == 409, "not held any more");
		CHECK(dlockd_stop(&d, 5000) == 0, "stop");
		CHECK(file_lines_with(d.log, "\"path\":\"/locks/", "/heartbeat\"", "\"status\":200",
				      round == 0 ? "\"level\"" : round == 1 ? "\"level\":\"debug\""
								: "\"level\":\"info\"",
				      NULL) == (round == 0 ? 0 : 1),
		      "a heartbeat's success: %s", round == 0 ? "not at info" :
		      round == 1 ? "at debug" : "at info with --log-heartbeats on");
		CHECK(file_lines_with(d.log, "/heartbeat\"", "\"status\":409", "\"level\":\"info\"",
				      "\"error\":\"not_held\"", NULL) == 1,
		      "a heartbeat's 409 at info (round %d)", round);
	}

	snprintf(dead, sizeof(dead), "redis://127.0.0.1:%d/0", free_port());
	CHECK(dlockd_start(&d, dead, NULL) == 0, "start with Redis unreachable");
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	CHECK(call(&d, "PUT", p, "X-Request-Id: down-1", id, sizeof(id)) == 503, "503");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	CHECK(file_lines_with(d.log, "\"msg\":\"request\"", "\"level\":\"warn\"", "\"status\":503",
			      "\"error\":\"backend_unavailable\"", "\"request_id\":\"down-1\"", NULL) ==
	      1, "a 503 for Redis at warn, with its request id");
}
