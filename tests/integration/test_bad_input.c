/* test_bad_input.c -- every malformed, out-of-range or oversized request
 * gets the JSON error of the contract (docs/reference/errors.md), and none of them changes
 * the state of a lock held by someone else. Cases are data (Taler style). */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V "@V@"		/* replaced by the victim lock's name */

struct bad_case {
	const char *what;
	const char *method;
	const char *path;
	const char *body;
	int status;
	const char *code;
};

static const struct bad_case cases[] = {
	{ "space in name", "PUT", "/locks/a%20b", NULL, 400, "invalid_name" },
	{ "slash in name", "PUT", "/locks/a%2Fb", NULL, 400, "invalid_name" },
	{ "NUL in name", "PUT", "/locks/a%00b", NULL, 400, "invalid_name" },
	{ "non-ASCII bytes in name", "PUT", "/locks/%ff%fe", NULL, 400, "invalid_name" },
	{ "UTF-8 in name", "GET", "/locks/caf%C3%A9", NULL, 400, "invalid_name" },
	{ "brace in name", "PUT", "/locks/%7Bx%7D", NULL, 400, "invalid_name" },
	{ "empty name", "PUT", "/locks/", NULL, 400, "invalid_name" },
	{ "empty name, heartbeat", "POST", "/locks//heartbeat?owner=a", NULL, 400, "invalid_name" },
	{ "owner with space", "PUT", "/locks/" V "?owner=a%20b", NULL, 400, "invalid_argument" },
	{ "owner ending in :write", "PUT", "/locks/" V "?owner=k:write", NULL, 400, "invalid_argument" },
	{ "empty owner", "PUT", "/locks/" V "?owner=", NULL, 400, "invalid_argument" },
	{ "owner of 129 chars", "PUT", "/locks/" V "?owner="
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	  NULL, 400, "invalid_argument" },
	{ "ttl 0", "PUT", "/locks/" V "?ttl_ms=0", NULL, 400, "invalid_argument" },
	{ "ttl over the max", "PUT", "/locks/" V "?ttl_ms=86400001", NULL, 400, "invalid_argument" },
	{ "negative ttl", "PUT", "/locks/" V "?ttl_ms=-5", NULL, 400, "invalid_argument" },
	{ "ttl not a number", "PUT", "/locks/" V "?ttl_ms=abc", NULL, 400, "invalid_argument" },
	{ "fractional ttl", "PUT", "/locks/" V "?ttl_ms=1.5", NULL, 400, "invalid_argument" },
	{ "ttl with a plus", "PUT", "/locks/" V "?ttl_ms=%2B5", NULL, 400, "invalid_argument" },
	{ "ttl with a space", "PUT", "/locks/" V "?ttl_ms=%205", NULL, 400, "invalid_argument" },
	{ "huge ttl", "PUT", "/locks/" V "?ttl_ms=99999999999999999999999", NULL, 400, "invalid_argument" },
	{ "wait over the max", "PUT", "/locks/" V "?wait_ms=300001", NULL, 400, "invalid_argument" },
	{ "negative wait", "PUT", "/locks/" V "?wait_ms=-1", NULL, 400, "invalid_argument" },
	{ "ttl as a JSON string", "PUT", "/locks/" V, "{\"ttl_ms\":\"100\"}", 400, "invalid_argument" },
	{ "ttl as a JSON real", "PUT", "/locks/" V, "{\"ttl_ms\":1.5}", 400, "invalid_argument" },
	{ "owner as a JSON number", "PUT", "/locks/" V, "{\"owner\":5}", 400, "invalid_argument" },
	{ "owner null", "PUT", "/locks/" V, "{\"owner\":null}", 400, "invalid_argument" },
	{ "wait as a boolean", "PUT", "/locks/" V, "{\"wait_ms\":true}", 400, "invalid_argument" },
	{ "unknown JSON key", "PUT", "/locks/" V, "{\"color\":\"red\"}", 400, "invalid_argument" },
	{ "unknown query key", "PUT", "/locks/" V "?color=red", NULL, 400, "invalid_argument" },
	{ "query key twice", "PUT", "/locks/" V "?owner=a&owner=b", NULL, 400, "invalid_argument" },
	{ "body and query", "PUT", "/locks/" V "?owner=keeper", "{\"ttl_ms\":100}", 400, "invalid_argument" },
	{ "broken JSON", "PUT", "/locks/" V, "{bad", 400, "invalid_json" },
	{ "JSON array", "PUT", "/locks/" V, "[1]", 400, "invalid_json" },
	{ "JSON string", "PUT", "/locks/" V, "\"owner\"", 400, "invalid_json" },
	{ "duplicate JSON key", "PUT", "/locks/" V, "{\"owner\":\"a\",\"owner\":\"b\"}", 400, "invalid_json" },
	{ "trailing garbage", "PUT", "/locks/" V, "{\"owner\":\"a\"} x", 400, "invalid_json" },
	{ "release with owner and force", "DELETE", "/locks/" V "?owner=keeper&force=true", NULL, 400, "invalid_argument" },
	{ "force not a boolean", "DELETE", "/locks/" V "?force=maybe", NULL, 400, "invalid_argument" },
	{ "ttl on release", "DELETE", "/locks/" V "?owner=keeper&ttl_ms=5", NULL, 400, "invalid_argument" },
	{ "heartbeat with ttl 0", "POST", "/locks/" V "/heartbeat?owner=keeper&ttl_ms=0", NULL, 400, "invalid_argument" },
	{ "heartbeat with wait", "POST", "/locks/" V "/heartbeat?owner=keeper&wait_ms=5", NULL, 400, "invalid_argument" },
	{ "status with ttl", "GET", "/locks/" V "?ttl_ms=5", NULL, 400, "invalid_argument" },
	{ "PATCH a lock", "PATCH", "/locks/" V, NULL, 405, "method_not_allowed" },
	{ "POST a lock", "POST", "/locks/" V, NULL, 405, "method_not_allowed" },
	{ "GET a heartbeat", "GET", "/locks/" V "/heartbeat", NULL, 405, "method_not_allowed" },
	{ "PUT healthz", "PUT", "/healthz", NULL, 405, "method_not_allowed" },
	{ "unknown route", "GET", "/nope", NULL, 404, "not_found" },
	{ "fair locks' collection (GET /locks lists them)", "GET", "/fairlocks", NULL, 404,
	  "not_found" },
	{ "PUT the collection", "PUT", "/locks", NULL, 405, "method_not_allowed" },
	{ "prefix lookalike", "GET", "/locksx/a", NULL, 404, "not_found" },
	{ "deep path", "PUT", "/locks/" V "/heartbeat/x", NULL, 400, "invalid_name" },
};

static char *expand(const char *tmpl, const char *victim)
{
	static char out[1024];
	const char *at = strstr(tmpl, V);

	if (!at)
		snprintf(out, sizeof(out), "%s", tmpl);
	else
		snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - tmpl), tmpl, victim,
			 at + strlen(V));
	return out;
}

TEST(bad_requests_get_json_errors_and_change_nothing)
{
	const char *victim = lockname("victim");
	char tok[300], p[512];
	long long token0, pttl0;
	struct http_resp r;
	redisReply *rep;

	snprintf(p, sizeof(p), "/locks/%s?owner=keeper&ttl_ms=60000", victim);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "victim lock taken");
	http_free(&r);
	snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", victim);
	token0 = rcmd_int("GET %s", tok);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *c = &cases[i];

		CHECK(http(c->method, expand(c->path, victim), c->body, &r) == 0, "%s: no answer", c->what);
		CHECK_ERROR(r, c->status, c->code, c->what);
		CHECK(strstr(r.content_type, "application/json"), "%s: JSON content type", c->what);
		if (c->status == 405)
			CHECK(r.allow[0], "%s: 405 carries Allow", c->what);
		http_free(&r);
	}

	pttl0 = rcmd_int("PTTL %s", victim);
	rep = rcmd("HGETALL %s", victim);
	CHECK(rep && rep->elements == 2 && !strcmp(rep->element[0]->str, "keeper") &&
	      !strcmp(rep->element[1]->str, "1"), "the victim is still held once by keeper");
	freeReplyObject(rep);
	CHECK(rcmd_int("GET %s", tok) == token0, "no fencing token was handed out");
	CHECK(pttl0 > 50000 && pttl0 <= 60000, "its lease was neither renewed nor cut: %lld", pttl0);
}

TEST(oversized_body_is_refused_with_413)
{
	const char *n = lockname("big");
	char p[512];
	size_t len = 20000;
	char *body = malloc(len + 1);
	struct http_resp r;

	memset(body, ' ', len);
	memcpy(body, "{\"owner\":\"a\"", 12);
	body[len - 1] = '}';
	body[len] = '\0';
	snprintf(p, sizeof(p), "/locks/%s", n);
	http("PUT", p, body, &r);
	free(body);
	CHECK_ERROR(r, 413, "body_too_large", "20000-byte body over the 16384 default");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "nothing was locked");

	/* just under the limit is parsed */
	body = malloc(16384 + 1);
	memset(body, ' ', 16384);
	memcpy(body, "{\"owner\":\"a\"}", 13);
	body[16384] = '\0';
	http("PUT", p, body, &r);
	free(body);
	CHECK_STATUS(r, 200, "a 16384-byte body is accepted");
	http_free(&r);
}
