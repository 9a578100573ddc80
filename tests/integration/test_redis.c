/* test_redis.c -- Redis failures: down at start, killed while requests
 * wait, restarted (data lost) in the middle of a wait, script cache
 * flushed; a password and a database other than 0. dlockd answers 503
 * with Retry-After meanwhile, never leaves a waiter past its deadline, and
 * recovers without a restart. Each test runs its own redis-server and
 * dlockd. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool status_is(const struct dlockd_srv *d, const char *path, long want)
{
	struct http_resp r;
	bool ok = http_on(d->base, "GET", path, NULL, &r) == 0 && r.status == want;

	http_free(&r);
	return ok;
}

TEST(redis_down_at_start_gives_503_then_recovers)
{
	struct redis_srv rs = { .port = free_port() };
	struct dlockd_srv d;
	char url[128];
	struct http_resp r;

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "dlockd starts without Redis");
	http_on(d.base, "GET", "/readyz", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "not ready without Redis");
	http_free(&r);
	http_on(d.base, "PUT", "/locks/x?wait_ms=5000", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire without Redis");
	CHECK(atoi(r.retry_after) >= 1, "503 carries Retry-After, got '%s'", r.retry_after);
	CHECK(r.ms < 1000, "answered at once, not after the wait (%.0f ms)", r.ms);
	http_free(&r);

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(WAIT_FOR(status_is(&d, "/readyz", 200), 10000), "ready once Redis is up");
	http_on(d.base, "PUT", "/locks/x?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "acquire works after recovery");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

TEST(redis_restart_in_the_middle_of_a_wait)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char url[128];
	struct http_resp r;
	struct bg w;
	int64_t restarted;
	long long token_before;

	CHECK(redis_start(&rs) == 0, "start Redis");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd");
	CHECK(WAIT_FOR(status_is(&d, "/readyz", 200), 5000), "ready");
	http_on(d.base, "PUT", "/locks/job?owner=holder&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "holder");
	token_before = json_int(&r, "fencing_token");
	http_free(&r);
	bg_start_on(&w, d.base, "PUT", "/locks/job?owner=waiter&wait_ms=30000", NULL);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_waiters") == 1, 5000), "waiter waiting");

	redis_stop(&rs, true);		/* the lock and its 60 s lease die with it */
	sleep_ms(500);
	CHECK(redis_start(&rs) == 0, "restart Redis on the same port");
	restarted = mono_ms();
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiter gets the lock once Redis is back");
	/* Redis lost the token counter with everything else */
	CHECK(json_int(&w.r, "fencing_token") > token_before,
	      "the fencing token still goes up across the data loss: %lld after %lld",
	      json_int(&w.r, "fencing_token"), token_before);
	CHECK(w.done_ms - restarted < 5000 * slow_factor(),
	      "within %lld ms of the restart: resubscribe and retry, not the old lease",
	      (long long)(w.done_ms - restarted));
	http_free(&w.r);
	CHECK(WAIT_FOR(status_is(&d, "/readyz", 200), 5000), "ready again");
	{
		redisContext *c = redis_client(&rs);
		redisReply *rep = c ? redisCommand(c, "HGET job waiter") : NULL;

		CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "1"),
		      "the new Redis holds the waiter's lock");
		freeReplyObject(rep);
		redisFree(c);
	}
	http_on(d.base, "PUT", "/locks/job?owner=holder", NULL, &r);
	CHECK_ERROR(r, 409, "locked", "and excludes the old holder");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

TEST(redis_gone_waiters_are_answered_by_their_deadline)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char url[128];
	struct http_resp r;
	struct bg w;
	int64_t t0;

	CHECK(redis_start(&rs) == 0, "start Redis");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd");
	http_on(d.base, "PUT", "/locks/j?owner=holder&ttl_ms=60000", NULL, &r);
	http_free(&r);
	t0 = mono_ms();
	bg_start_on(&w, d.base, "PUT", "/locks/j?owner=waiter&wait_ms=1500", NULL);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_waiters") == 1, 5000), "waiter waiting");
	redis_stop(&rs, true);
	bg_join(&w);
	CHECK_ERROR(w.r, 503, "backend_unavailable", "the waiter is answered while Redis is gone");
	CHECK(w.done_ms - t0 < 3000 * slow_factor(), "by its deadline (%lld ms for a 1500 ms wait)",
	      (long long)(w.done_ms - t0));
	http_free(&w.r);
	http_on(d.base, "DELETE", "/locks/j?owner=holder", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "release while Redis is gone");
	CHECK(r.retry_after[0], "with Retry-After");
	http_free(&r);
	CHECK(WAIT_FOR(status_is(&d, "/readyz", 503), 3000), "not ready");

	CHECK(metric_value(&d, "dlockd_redis_errors_total") >= 2, "503s counted as Redis errors");
	CHECK(metric_value(&d, "dlockd_redis_reconnects_total") >= 1,
	      "the lost subscriber connection is counted");
	CHECK(redis_start(&rs) == 0, "Redis back");
	CHECK(WAIT_FOR(status_is(&d, "/readyz", 200), 10000), "ready again without a restart");
	http_on(d.base, "PUT", "/locks/j?owner=holder", NULL, &r);
	CHECK_STATUS(r, 200, "locks work again");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

TEST(flushed_script_cache_is_reloaded)
{
	const char *n = lockname("flush");
	char p[512];
	struct http_resp r;
	redisReply *rep = rcmd("SCRIPT FLUSH");

	CHECK(rep && rep->type == REDIS_REPLY_STATUS, "SCRIPT FLUSH");
	freeReplyObject(rep);
	snprintf(p, sizeof(p), "/locks/%s?owner=a", n);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "acquire after the script cache was emptied (NOSCRIPT, reload)");
	http_free(&r);
	http("DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "release too");
	http_free(&r);
}

/* A release that reaches Redis only after dlockd gave up on it (Redis was
 * stalled) must not run: the client was told 503 and may have taken the
 * lock again since, which a late release would free behind its back. */
TEST(a_call_redis_gets_after_dlockd_gave_up_does_nothing)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char url[128];
	struct http_resp r;
	redisContext *c;
	redisReply *rep;

	CHECK(redis_start(&rs) == 0, "start Redis");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd");
	/* scripts load on first use: release once, so the stalled call is the
	 * release itself and not its SCRIPT LOAD */
	http_on(d.base, "PUT", "/locks/warm?owner=a", NULL, &r);
	http_free(&r);
	http_on(d.base, "DELETE", "/locks/warm?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "release once");
	http_free(&r);
	http_on(d.base, "PUT", "/locks/late?owner=a&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "acquire");
	http_free(&r);
	kill(rs.pid, SIGSTOP);
	http_on(d.base, "DELETE", "/locks/late?owner=a", NULL, &r);
	kill(rs.pid, SIGCONT);
	CHECK_ERROR(r, 503, "backend_unavailable", "release while Redis is stalled");
	http_free(&r);
	sleep_ms(300);		/* Redis runs what was queued */
	c = redis_client(&rs);
	rep = c ? redisCommand(c, "HGET late a") : NULL;
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "1"),
	      "the lock is still held: the late release did nothing");
	freeReplyObject(rep);
	redisFree(c);
	http_on(d.base, "DELETE", "/locks/late?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "the client's retry releases it");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A connection to rs that has given the password and chosen db. */
static redisContext *client_auth(const struct redis_srv *rs, const char *pw, int db)
{
	redisContext *c = redis_client(rs);
	redisReply *a = c ? redisCommand(c, "AUTH %s", pw) : NULL;
	redisReply *s = a ? redisCommand(c, "SELECT %d", db) : NULL;
	bool ok = a && a->type == REDIS_REPLY_STATUS && s && s->type == REDIS_REPLY_STATUS;

	if (a)
		freeReplyObject(a);
	if (s)
		freeReplyObject(s);
	if (!ok && c) {
		redisFree(c);
		c = NULL;
	}
	return c;
}

/* A password and a database other than 0 in the URL: every connection
 * dlockd makes (the pipelined ones and the subscriber) authenticates and
 * selects, and a wrong password is a clear 503, not a hang. */
TEST(redis_with_password_and_database)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d, bad;
	char url[160];
	struct http_resp r;
	struct bg w;
	redisContext *c;
	redisReply *rep;
	int64_t released;

	CHECK(redis_start(&rs) == 0, "start Redis");
	c = redis_client(&rs);
	rep = c ? redisCommand(c, "CONFIG SET requirepass s3cret") : NULL;
	CHECK(rep && rep->type == REDIS_REPLY_STATUS, "Redis now wants a password");
	freeReplyObject(rep);
	redisFree(c);

	snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d/3", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd");
	CHECK(WAIT_FOR(status_is(&d, "/readyz", 200), 5000), "ready with the password");
	http_on(d.base, "PUT", "/locks/pw?owner=a&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "acquire");
	http_free(&r);
	bg_start_on(&w, d.base, "PUT", "/locks/pw?owner=b&wait_ms=30000", NULL);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_waiters") == 1, 5000), "waiter waiting");
	http_on(d.base, "DELETE", "/locks/pw?owner=a", NULL, &r);
	released = mono_ms();
	CHECK_STATUS(r, 200, "release");
	http_free(&r);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiter gets the lock");
	CHECK(w.done_ms - released < 3000 * slow_factor(),
	      "woken by the authenticated subscriber, %lld ms after the release",
	      (long long)(w.done_ms - released));
	http_free(&w.r);

	c = client_auth(&rs, "s3cret", 3);
	rep = c ? redisCommand(c, "HGET pw b") : NULL;
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "1"),
	      "the lock lives in database 3");
	freeReplyObject(rep);
	redisFree(c);
	c = client_auth(&rs, "s3cret", 0);
	rep = c ? redisCommand(c, "EXISTS pw") : NULL;
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
	      "and not in database 0");
	freeReplyObject(rep);
	redisFree(c);

	snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d/3", rs.port);
	CHECK(dlockd_start(&bad, url, NULL) == 0, "start dlockd with a wrong password");
	http_on(bad.base, "PUT", "/locks/pw?owner=c", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a wrong password is a 503");
	CHECK(r.retry_after[0], "with Retry-After");
	http_free(&r);
	CHECK(status_is(&bad, "/readyz", 503), "and not ready");
	CHECK(dlockd_stop(&bad, 5000) == 0, "clean exit");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}
