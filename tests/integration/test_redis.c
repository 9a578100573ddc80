/* test_redis.c -- Redis failures: down at start, killed while requests
 * wait, restarted (data lost) in the middle of a wait, script cache
 * flushed; a stall while the clock offset is measured; a password and a
 * database other than 0, and a password with '@' '/' ':' percent-encoded,
 * over TCP and a unix socket. dlockd answers 503
 * with Retry-After meanwhile, never leaves a waiter past its deadline, and
 * recovers without a restart. Each test runs its own redis-server and
 * dlockd. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* One event loop: a stalled call holds up everything behind it. */
static const char *const one_thread[] = { "--threads", "1", NULL };

/* Is lock name held by owner in rs? */
static bool held_by(const struct redis_srv *rs, const char *name, const char *owner)
{
	redisContext *c = redis_client(rs);
	redisReply *rep = c ? redisCommand(c, "HGET %s %s", name, owner) : NULL;
	bool held = rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "1");

	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return held;
}

/* The reply of a command on rs, on a connection of its own that has given
 * the password pw and chosen database db (the caller frees it); NULL when
 * there is none. */
static redisReply *rcmd_auth(const struct redis_srv *rs, const char *pw, int db,
			     const char *fmt, ...)
{
	redisContext *c = redis_client(rs);
	redisReply *a = c ? redisCommand(c, "AUTH %s", pw) : NULL;
	redisReply *s = a ? redisCommand(c, "SELECT %d", db) : NULL;
	redisReply *rep = NULL;
	va_list ap;

	if (a && a->type == REDIS_REPLY_STATUS && s && s->type == REDIS_REPLY_STATUS) {
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (a)
		freeReplyObject(a);
	if (s)
		freeReplyObject(s);
	redisFree(c);
	return rep;
}

TEST(redis_down_at_start_gives_503_then_recovers)
{
	struct redis_srv rs = { .port = free_port() };
	struct dlockd_srv d;
	struct http_resp r;

	CHECK(dlockd_start_on(&d, &rs, NULL) == 0, "dlockd starts without Redis");
	http_on(d.base, "GET", "/readyz", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "not ready without Redis");
	http_free(&r);
	http_on(d.base, "PUT", "/locks/x?wait_ms=5000", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire without Redis");
	CHECK(atoi(r.retry_after) >= 1, "503 carries Retry-After, got '%s'", r.retry_after);
	CHECK(r.ms < 1000, "answered at once, not after the wait (%.0f ms)", r.ms);
	CHECK(json_bool(&r, "undone") == -1 && json_str(&r, "message") &&
	      strstr(json_str(&r, "message"), "not sent"), "not sent, nothing changed: %s",
	      r.body);
	http_free(&r);
	for (int i = 0; i < 4; i++) {	/* connects tried and refused meanwhile */
		sleep_ms(300);
		status_of(&d, "PUT", "/locks/x?owner=b");
	}
	/* nothing ever reached a Redis: no call counts as sent (the set-up and
	 * TIME queued on a connect that failed were counted no_reply: 6) */
	CHECK(metric_value(&d, "dlockd_redis_errors_total{reason=\"no_reply\"}") == 0 &&
	      metric_value(&d, "dlockd_redis_errors_total{reason=\"unsent\"}") >= 5,
	      "no_reply %.0f, unsent %.0f",
	      metric_value(&d, "dlockd_redis_errors_total{reason=\"no_reply\"}"),
	      metric_value(&d, "dlockd_redis_errors_total{reason=\"unsent\"}"));

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 10000), "ready once Redis is up");
	http_on(d.base, "PUT", "/locks/x?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "acquire works after recovery");
	http_free(&r);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

TEST(redis_restart_in_the_middle_of_a_wait)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w;
	int64_t restarted;
	long long token_before;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "start Redis and dlockd");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready");
	http_on(d.base, "PUT", "/locks/job?owner=holder&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "holder");
	token_before = json_int(&r, "fencing_token");
	http_free(&r);
	bg_start_on(&w, d.base, "PUT", "/locks/job?owner=waiter&wait_ms=30000", NULL);
	CHECK(WAIT_FOR(waiters_of(&d) == 1, 5000), "waiter waiting");

	redis_stop(&rs, true);		/* the lock and its 60 s lease die with it */
	sleep_ms(500);			/* down for a while, the waiter retrying */
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
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready again");
	CHECK(held_by(&rs, "job", "waiter"), "the new Redis holds the waiter's lock");
	http_on(d.base, "PUT", "/locks/job?owner=holder", NULL, &r);
	CHECK_ERROR(r, 409, "locked", "and excludes the old holder");
	http_free(&r);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

TEST(redis_gone_waiters_are_answered_by_their_deadline)
{
	struct redis_srv rs = { 0 };
	char up[96];
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w;
	int64_t t0;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "start Redis and dlockd");
	http_on(d.base, "PUT", "/locks/j?owner=holder&ttl_ms=60000", NULL, &r);
	http_free(&r);
	t0 = mono_ms();
	bg_start_on(&w, d.base, "PUT", "/locks/j?owner=waiter&wait_ms=1500", NULL);
	CHECK(WAIT_FOR(waiters_of(&d) == 1, 5000), "waiter waiting");
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
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 503, 3000), "not ready");

	snprintf(up, sizeof(up), "dlockd_redis_up{node=\"127.0.0.1:%d\"}", rs.port);
	CHECK(metric_value(&d, "dlockd_redis_errors_total{reason=\"unsent\"}") >= 2,
	      "commands not sent for want of Redis counted as Redis errors");
	CHECK(metric_value(&d, "dlockd_redis_reconnects_total{connection=\"subscriber\"}") >= 1,
	      "the lost subscriber connection is counted");
	CHECK(metric_value(&d, "dlockd_redis_reconnects_total{connection=\"command\"}") >= 1,
	      "the lost command connection is counted");
	CHECK(metric_value(&d, up) == 0, "%s is 0 while Redis is gone", up);
	CHECK(redis_start(&rs) == 0, "Redis back");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 10000), "ready again without a restart");
	CHECK(metric_value(&d, up) == 1, "%s is 1 again", up);
	http_on(d.base, "PUT", "/locks/j?owner=holder", NULL, &r);
	CHECK_STATUS(r, 200, "locks work again");
	http_free(&r);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
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
	struct http_resp r;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "start Redis and dlockd");
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
	sleep_ms(300);		/* Redis runs what was queued (nothing to see if it does not) */
	CHECK(held_by(&rs, "late", "a"), "the lock is still held: the late release did nothing");
	http_on(d.base, "DELETE", "/locks/late?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "the client's retry releases it");
	http_free(&r);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
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
	redisReply *rep;
	int64_t released;

	CHECK(redis_start(&rs) == 0, "start Redis");
	rep = rcmd_on(&rs, "CONFIG SET requirepass s3cret");
	CHECK(rep && rep->type == REDIS_REPLY_STATUS, "Redis now wants a password");
	freeReplyObject(rep);

	snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d/3", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready with the password");
	http_on(d.base, "PUT", "/locks/pw?owner=a&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "acquire");
	http_free(&r);
	bg_start_on(&w, d.base, "PUT", "/locks/pw?owner=b&wait_ms=30000", NULL);
	CHECK(WAIT_FOR(waiters_of(&d) == 1, 5000), "waiter waiting");
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

	rep = rcmd_auth(&rs, "s3cret", 3, "HGET pw b");
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "1"),
	      "the lock lives in database 3");
	freeReplyObject(rep);
	rep = rcmd_auth(&rs, "s3cret", 0, "EXISTS pw");
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
	      "and not in database 0");
	freeReplyObject(rep);

	snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d/3", rs.port);
	CHECK(dlockd_start(&bad, url, NULL) == 0, "start dlockd with a wrong password");
	http_on(bad.base, "PUT", "/locks/pw?owner=c", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a wrong password is a 503");
	CHECK(r.retry_after[0], "with Retry-After");
	CHECK(strstr(json_str(&r, "message"), "WRONGPASS"), "that says so: %s", r.body);
	http_free(&r);
	CHECK(status_of(&bad, "GET", "/readyz") == 503, "and not ready");
	CHECK(dlockd_stop(&bad, 5000) == 0, "clean exit");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* The deadline a call carries into Redis is dlockd's clock converted to
 * Redis' clock with an offset learnt from a TIME round trip when a
 * connection opens. If Redis stalls while that TIME is in flight, a
 * midpoint estimate is off by half the stall and makes every later
 * deadline too late: a call dlockd gave up on (503) then still runs.
 * Here: a stall makes dlockd drop its connection (2 s command timeout);
 * the reconnect's TIME is held for 1.7 s; then, on that connection, a
 * release and an acquire are stalled until dlockd answers 503, and must
 * leave Redis as it was.
 *
 * Timing, against dlockd's 2000 ms command timeout: the TIME stall must
 * stay under it (or the connection is dropped and measured again), so
 * Redis resumes 1700 ms after the probe went out -- 300 ms for this
 * thread to be late on a loaded machine. A midpoint offset is then
 * ~850 ms too large, so the old deadline (sent + 1500 ms + 850 ms) lies
 * ~350 ms after dlockd's 503 at 2000 ms; Redis resumes as soon as both
 * 503s are in. Later calls must work again (a stalled probe must not
 * leave the deadline too early either): retried until they do, for a
 * few seconds. */
TEST(a_stall_during_the_clock_probe_does_not_let_a_503_take_effect)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg stalled, probe, rel, put;
	int64_t t0;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	/* load lock_acquire and lock_release, so the stalled calls are
	 * EVALSHA and not SCRIPT LOAD */
	http_on(d.base, "PUT", "/locks/warm?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "warm-up acquire");
	http_free(&r);
	http_on(d.base, "DELETE", "/locks/warm?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "warm-up release");
	http_free(&r);

	/* 1. a stall drops the connection */
	kill(rs.pid, SIGSTOP);
	bg_start_on(&stalled, d.base, "PUT", "/locks/skew?owner=x", NULL);
	bg_join(&stalled);
	CHECK_ERROR(stalled.r, 503, "backend_unavailable", "acquire while Redis is stalled");
	http_free(&stalled.r);
	/* 2. the reconnect's TIME waits 1.7 s for Redis */
	t0 = mono_ms();
	bg_start_on(&probe, d.base, "GET", "/readyz", NULL);
	sleep_ms(1700 - (int)(mono_ms() - t0));
	kill(rs.pid, SIGCONT);
	bg_join(&probe);
	if (probe.r.status != 200)	/* this thread was late: TIME timed out */
		fprintf(stderr, "# note: the probe was not stalled but timed out (%ld); "
			"the stall below is still checked\n", probe.r.status);
	http_free(&probe.r);
	/* 3. calls on the connection work (retried: a probe re-measured
	 * right after the stall may still be in flight) */
	CHECK(WAIT_FOR((http_on(d.base, "PUT", "/locks/rel?owner=holder&ttl_ms=60000", NULL, &r),
			http_free(&r), r.status == 200), 3000),
	      "the holder gets the lock after the stall (last status %ld)", r.status);
	/* 4. a release and an acquire stalled past dlockd's timeout */
	kill(rs.pid, SIGSTOP);
	bg_start_on(&rel, d.base, "DELETE", "/locks/rel?owner=holder", NULL);
	bg_start_on(&put, d.base, "PUT", "/locks/put503?ttl_ms=60000", NULL);
	bg_join(&rel);
	bg_join(&put);
	kill(rs.pid, SIGCONT);
	CHECK_ERROR(rel.r, 503, "backend_unavailable", "release while Redis is stalled");
	CHECK_ERROR(put.r, 503, "backend_unavailable", "acquire while Redis is stalled");
	http_free(&rel.r);
	http_free(&put.r);
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready again");
	CHECK(held_by(&rs, "rel", "holder"), "the release answered 503 did not take effect");
	CHECK(rcmd_int_on(&rs, "EXISTS put503") == 0, "the acquire answered 503 left no lock");
	CHECK(WAIT_FOR((http_on(d.base, "DELETE", "/locks/rel?owner=holder", NULL, &r),
			http_free(&r), r.status == 200), 3000),
	      "the holder's retry releases it (last status %ld)", r.status);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* An answer and the state must agree for every call made while Redis
 * stalls: 503 means it did nothing, 200 that it took effect. The oldest
 * call times out 2 s into the stall; younger ones (sent 1.6-1.95 s in)
 * used to be answered 503 with it, although their deadlines were still
 * ahead: Redis, resumed at 2.3 s, ran the releases, the lease-cutting
 * heartbeat and the acquire they carried (found by hostile probing). Each
 * is now told at its own give-up, or gets its real answer once Redis
 * runs it. Redis resumes at resume_ms: at 2.3 s the younger calls run in
 * time and answer 200; at 4.2 s all are past their give-up and answer 503.
 * On a slow machine a call may land on either side; the check is that
 * answer and state agree, whichever it is. With tls, dlockd reaches Redis
 * on its TLS port (the test on its plaintext one), where the younger
 * calls wait behind the oldest's record instead of in the socket. */
static void stall_with_calls(int resume_ms, bool tls)
{
	static const struct {
		int at_ms;
		const char *method, *path;
	} calls[] = {
		{ 0, "PUT", "/locks/s0?owner=x" },
		{ 1600, "DELETE", "/locks/s1?owner=h" },
		{ 1800, "POST", "/locks/s3/heartbeat?owner=h&ttl_ms=5000" },
		{ 1900, "DELETE", "/locks/s2?owner=h" },
		{ 1950, "PUT", "/locks/s4?owner=y" },
	};
	enum { NCALLS = sizeof(calls) / sizeof(calls[0]) };
	const char *tls_flags[] = { "--threads", "1", "--redis-ca", NULL, NULL };
	struct redis_srv rs = { .tls_port = tls ? -1 : 0 };
	struct dlockd_srv d;
	char path[64], url[64];
	struct http_resp r;
	struct bg b[NCALLS];
	long long pttl;
	int64_t t0;

	if (tls) {
		CHECK(redis_start(&rs) == 0, "start Redis with a TLS port");
		tls_flags[3] = pki_path("ca.pem");
		snprintf(url, sizeof(url), "rediss://127.0.0.1:%d/0", rs.tls_port);
		CHECK(dlockd_start(&d, url, tls_flags) == 0, "start dlockd over TLS (see %s)", d.log);
	} else {
		CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	}
	for (int i = 1; i <= 3; i++) {	/* also loads acquire, release, renew */
		snprintf(path, sizeof(path), "/locks/s%d?owner=h&ttl_ms=60000", i);
		http_on(d.base, "PUT", path, NULL, &r);
		CHECK_STATUS(r, 200, "h takes a lock");
		http_free(&r);
	}
	http_on(d.base, "POST", "/locks/s3/heartbeat?owner=h&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "warm-up heartbeat");
	http_free(&r);
	http_on(d.base, "DELETE", "/locks/s9?owner=h", NULL, &r);
	http_free(&r);

	kill(rs.pid, SIGSTOP);
	t0 = mono_ms();
	for (int i = 0; i < NCALLS; i++) {
		int64_t wait = calls[i].at_ms - (mono_ms() - t0);

		if (wait > 0)
			sleep_ms((int)wait);
		bg_start_on(&b[i], d.base, calls[i].method, calls[i].path, NULL);
	}
	sleep_ms((int)(resume_ms - (mono_ms() - t0) > 0 ? resume_ms - (mono_ms() - t0) : 0));
	kill(rs.pid, SIGCONT);
	for (int i = 0; i < NCALLS; i++)
		bg_join(&b[i]);
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready again");

	CHECK_ERROR(b[0].r, 503, "backend_unavailable", "the call that timed out");
	CHECK(rcmd_int_on(&rs, "EXISTS s0") == 0, "the acquire answered 503 left no lock");
	for (int i = 1; i < NCALLS; i++) {
		CHECK(b[i].r.status == 200 || b[i].r.status == 503, "%s %s: status %ld",
		      calls[i].method, calls[i].path, b[i].r.status);
		printf("# Redis resumed at %d ms; %s %s sent at %d ms: %ld\n", resume_ms,
		       calls[i].method, calls[i].path, calls[i].at_ms, b[i].r.status);
	}
	CHECK(held_by(&rs, "s1", "h") == (b[1].r.status == 503),
	      "s1: release answered %ld, lock %s", b[1].r.status,
	      held_by(&rs, "s1", "h") ? "still held" : "gone");
	pttl = rcmd_int_on(&rs, "PTTL s3");
	CHECK((pttl > 30000) == (b[2].r.status == 503),
	      "s3: heartbeat to 5 s answered %ld, lease left %lld ms", b[2].r.status, pttl);
	CHECK(held_by(&rs, "s2", "h") == (b[3].r.status == 503),
	      "s2: release answered %ld, lock %s", b[3].r.status,
	      held_by(&rs, "s2", "h") ? "still held" : "gone");
	CHECK(held_by(&rs, "s4", "y") == (b[4].r.status == 200),
	      "s4: acquire answered %ld, lock %s", b[4].r.status,
	      held_by(&rs, "s4", "y") ? "held by y" : "not held by y");
	for (int i = 0; i < NCALLS; i++)
		http_free(&b[i].r);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

TEST(calls_sent_later_in_a_stall_never_take_effect_after_a_503)
{
	stall_with_calls(2300, false);
	if (!test_failed())
		stall_with_calls(4200, false);
}

TEST(calls_sent_later_in_a_stall_over_tls_never_take_effect_after_a_503)
{
	stall_with_calls(2300, true);
	if (!test_failed())
		stall_with_calls(4200, true);
}

/* Send a busy loop of seconds s on c without waiting for its answer. */
static void busy_send(redisContext *c, const char *s)
{
	int done = 0;

	redisAppendCommand(c, "EVAL %s 0 %s",
			   "local t = redis.call('time') local t0 = t[1] + t[2] / 1e6 "
			   "repeat t = redis.call('time') until t[1] + t[2] / 1e6 - t0 > "
			   "tonumber(ARGV[1]) return 1", s);
	while (!done && redisBufferWrite(c, &done) == REDIS_OK)
		;
}

/* Redis runs dlockd's release in time, 1 s into the turn that another
 * client's 1 s script began, but writes its answer only after a second
 * client's 1.5 s script has run too: 2.5 s after the send. dlockd used to
 * answer 503 at 2 s, and the release had taken effect (found by hostile
 * probing). A call already sent now waits for its reply (up to 10 s), so
 * the answer says what happened. */
TEST(a_call_redis_ran_but_answered_late_is_not_a_503)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	redisContext *a = NULL, *b = NULL;
	redisReply *rep;
	struct http_resp r;
	struct bg rel;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	http_on(d.base, "PUT", "/locks/late?owner=h&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "h takes the lock (and loads the scripts)");
	http_free(&r);
	http_on(d.base, "DELETE", "/locks/warm?owner=h", NULL, &r);
	http_free(&r);
	a = redis_client(&rs);
	b = redis_client(&rs);
	CHECK(a && b, "two more clients of Redis, connected before the stall");

	/* the timeline under test: a's script runs, the release arrives during
	 * it, b's script is queued behind the release */
	busy_send(a, "1.0");
	sleep_ms(100);
	bg_start_on(&rel, d.base, "DELETE", "/locks/late?owner=h", NULL);
	sleep_ms(150);
	busy_send(b, "1.5");
	bg_join(&rel);
	CHECK(rcmd_int_on(&rs, "EXISTS late") == (rel.r.status == 503),
	      "the release answered %ld and the lock is %s", rel.r.status,
	      rcmd_int_on(&rs, "EXISTS late") ? "still there" : "gone");
	CHECK_STATUS(rel.r, 200, "the release ran in time: its answer, late, says so");
	http_free(&rel.r);
	if (redisGetReply(a, (void **)&rep) == REDIS_OK)
		freeReplyObject(rep);
	if (redisGetReply(b, (void **)&rep) == REDIS_OK)
		freeReplyObject(rep);
	redisFree(a);
	redisFree(b);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* A reconnect whose socket gets the number of the one just closed (the
 * lowest free fd): the loop took it for the old socket, asked epoll to
 * MODify a registration the close had removed, and never heard from the
 * new one; calls waited for their timeout (seen in the AOF chaos test
 * under valgrind: a 21 s gap). Redis kills dlockd's connection as a
 * request comes on an HTTP connection accepted before, so the reconnect is
 * the next socket dlockd opens, in the same turn. */
TEST(a_reconnect_that_reuses_the_socket_number_is_heard)
{
	static const char req[] = "PUT /locks/fdreuse?owner=a HTTP/1.1\r\nHost: x\r\n\r\n";
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char buf[2048];
	struct http_resp r;
	int64_t t0;
	ssize_t n = 0;
	int fd;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	http_on(d.base, "GET", "/readyz", NULL, &r);
	CHECK_STATUS(r, 200, "ready");
	http_free(&r);
	fd = raw_connect(d.port);
	CHECK(fd >= 0, "an HTTP connection, accepted before the reconnect");
	sleep_ms(200);		/* dlockd accepts it (nothing to see from here) */
	/* the close and the request reach dlockd's loop in one turn: it drops
	 * the connection and opens a new one before it looks at epoll again */
	t0 = mono_ms();
	CHECK(rcmd_int_on(&rs, "CLIENT KILL TYPE normal SKIPME yes") >= 1,
	      "Redis closes dlockd's connection");
	if (write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
		struct timeval tv = { .tv_sec = 15 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		n = read(fd, buf, sizeof(buf) - 1);
	}
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(!strncmp(buf, "HTTP/1.1 200", 12), "the request after the reconnect: %s", buf);
	CHECK(mono_ms() - t0 < 1500 * slow_factor(), "answered in %lld ms",
	      (long long)(mono_ms() - t0));
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* Redis restarted under a waiting acquire: while it is down the waiter
 * retries every 250 ms, each retry a connect refused, so the loop drops a
 * connection and opens the next in one turn, often on the same socket
 * number; once Redis is back, the waiter must get the (now free) lock
 * within a second or so, not after its wait. */
TEST(a_waiter_gets_the_lock_soon_after_redis_restarts)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w;
	int64_t back;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	http_on(d.base, "PUT", "/locks/rs1?owner=h&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "h holds the lock");
	http_free(&r);
	bg_start_on(&w, d.base, "PUT", "/locks/rs1?owner=w&wait_ms=20000", NULL);
	CHECK(wait_waiters(&d, 1, 5000), "w waits");
	redis_stop(&rs, true);		/* no persistence: the lock goes with it */
	sleep_ms(1200);			/* down: the waiter retries every 250 ms */
	CHECK(redis_start(&rs) == 0, "Redis again, on the same port");
	back = mono_ms();
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiter gets the lock");
	CHECK(w.done_ms - back < 2500 * slow_factor(), "%lld ms after Redis was back",
	      (long long)(w.done_ms - back));
	http_free(&w.r);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* Redis restarted from data older than its last grants (an RDB saved
 * before them, or an AOF that lost its last second): the token counter it
 * gets back is stale, yet the next token must be above every token handed
 * out (found by hostile probing: INCR on the stale counter went back). */
TEST(fencing_tokens_rise_across_a_restart_from_an_older_snapshot)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	long long last = 0, next = 0;
	redisReply *rep;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "start Redis and dlockd");
	for (int i = 0; i < 6; i++) {
		http_on(d.base, "PUT", "/locks/fence?owner=a&ttl_ms=60000", NULL, &r);
		CHECK_STATUS(r, 200, "grant");
		CHECK(json_int(&r, "fencing_token") > last, "tokens rise: %lld after %lld",
		      json_int(&r, "fencing_token"), last);
		last = json_int(&r, "fencing_token");
		http_free(&r);
		http_on(d.base, "DELETE", "/locks/fence?owner=a", NULL, &r);
		CHECK_STATUS(r, 200, "release");
		http_free(&r);
		if (i == 0) {	/* the snapshot Redis will come back with */
			rep = rcmd_on(&rs, "SAVE");
			CHECK(rep && rep->type == REDIS_REPLY_STATUS, "SAVE");
			freeReplyObject(rep);
		}
	}
	redis_stop(&rs, true);
	CHECK(redis_start(&rs) == 0, "restart Redis from the older snapshot");
	CHECK(WAIT_FOR((http_on(d.base, "PUT", "/locks/fence?owner=b", NULL, &r),
			next = json_int(&r, "fencing_token"), http_free(&r), r.status == 200), 5000),
	      "a grant after the restart (last status %ld)", r.status);
	CHECK(next > last, "the token after the restart (%lld) is above the last before it (%lld)",
	      next, last);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* A password with '@', '/' and ':' reaches Redis percent-encoded in the
 * URL (it used to be taken apart at its '@' and '/'), over TCP and over a
 * unix socket with ?db=&password=; the log shows neither form of it. */
TEST(redis_password_with_at_slash_colon_percent_encoded)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d, du;
	char sock[80], url[128];
	struct http_resp r;
	redisReply *rep;

	snprintf(sock, sizeof(sock), "%s/enc-%d.sock", test_tmpdir(), free_port());
	snprintf(rs.extra, sizeof(rs.extra), "--unixsocket %s --unixsocketperm 700", sock);
	CHECK(redis_start(&rs) == 0, "start Redis");
	rep = rcmd_on(&rs, "CONFIG SET requirepass %s", "p@ss/w:rd");
	CHECK(rep && rep->type == REDIS_REPLY_STATUS, "Redis now wants the password p@ss/w:rd");
	freeReplyObject(rep);

	snprintf(url, sizeof(url), "redis://:p%%40ss%%2Fw%%3Ard@127.0.0.1:%d/2", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd over TCP");
	http_on(d.base, "PUT", "/locks/enc?owner=a&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "acquire with the encoded password");
	http_free(&r);
	snprintf(url, sizeof(url), "unix://%s?db=2&password=p%%40ss%%2Fw%%3Ard", sock);
	CHECK(dlockd_start(&du, url, NULL) == 0, "start dlockd over the unix socket");
	http_on(du.base, "PUT", "/locks/enc?owner=b", NULL, &r);
	CHECK_ERROR(r, 409, "locked", "the same lock in the same db, seen over the socket");
	http_free(&r);
	http_on(du.base, "DELETE", "/locks/enc?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "released over the socket");
	http_free(&r);

	rep = rcmd_auth(&rs, "p@ss/w:rd", 2, "EXISTS enc");
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
	      "gone from database 2");
	freeReplyObject(rep);
	CHECK(dlockd_stop(&d, 5000) == 0 && dlockd_stop(&du, 5000) == 0, "clean exit");
	CHECK(file_contains(d.log, "redis://***@127.0.0.1") && file_contains(du.log, "password=***"),
	      "the log shows the URLs with the password hidden");
	CHECK(!file_contains(d.log, "p%40ss") && !file_contains(d.log, "p@ss") &&
	      !file_contains(du.log, "p%40ss") && !file_contains(du.log, "p@ss"),
	      "and never the password");
	redis_stop(&rs, false);
}

/* Found by hostile probing: a script call that reaches Redis after its
 * deadline but finds the script cache empty (Redis restarted, or SCRIPT
 * FLUSH) is answered NOSCRIPT without running; dlockd sends it again as
 * EVAL, and that retry used to carry a new deadline: a release answered
 * 503 ran late and freed the lock. The retry keeps its first deadline. */
TEST(a_script_retried_after_noscript_keeps_its_first_deadline)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct bg rel;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(lock_hold(&d, "ns", "a", 60000), "a takes the lock");
	CHECK(lock_release(&d, "ns", "a") == 200, "a releases it (the SHAs are known)");
	CHECK(lock_hold(&d, "ns", "a", 60000), "a takes it again");
	rcmd_int_on(&rs, "SCRIPT FLUSH");	/* as a restart would */
	kill(rs.pid, SIGSTOP);
	bg_start_on(&rel, d.base, "DELETE", "/locks/ns?owner=a", NULL);
	sleep_ms(2500);		/* the stall the test is about: past the 1.5 s deadline */
	kill(rs.pid, SIGCONT);
	bg_join(&rel);
	CHECK_ERROR(rel.r, 503, "backend_unavailable", "the release that reached Redis late");
	http_free(&rel.r);
	CHECK(held_by(&rs, "ns", "a"), "the release answered 503 did not take effect");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* Whether Redis rs has dlockd's library of functions. */
static bool has_library(const struct redis_srv *rs)
{
	redisReply *r = rcmd_on(rs, "FUNCTION LIST LIBRARYNAME dlockd_*");
	bool has = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1;

	if (r)
		freeReplyObject(r);
	return has;
}

/* n acquire/release cycles of lock name by owner a: all 200? */
static bool cycles(const struct dlockd_srv *d, const char *name, int n)
{
	for (int i = 0; i < n; i++)
		if (!lock_hold(d, name, "a", 60000) || lock_release(d, name, "a") != 200)
			return false;
	return true;
}

/* The scripts run as Redis functions: the first call loads the library
 * (FUNCTION LOAD) and the calls after it are FCALLs, none EVALSHA. A
 * FUNCTION FLUSH (or a Redis restarted without its data) answers the next
 * FCALL "Function not found": that call is sent again with EVAL, after a
 * FUNCTION LOAD, and answered as if nothing happened; the calls after it
 * are FCALLs again. */
TEST(scripts_run_as_functions_and_come_back_after_function_flush)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	long long f0, f1;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(cycles(&d, "fn", 1), "a first cycle");
	CHECK(has_library(&rs), "Redis has dlockd's library");
	f0 = redis_cmdstat(&rs, "fcall", "calls");
	CHECK(cycles(&d, "fn", 10), "ten cycles");
	f1 = redis_cmdstat(&rs, "fcall", "calls");
	CHECK(f1 - f0 == 20, "ten cycles are 20 FCALLs (got %lld)", f1 - f0);
	CHECK(redis_cmdstat(&rs, "evalsha", "calls") == 0, "and no EVALSHA");

	CHECK(rcmd_ok_on(&rs, "FUNCTION FLUSH"), "FUNCTION FLUSH");
	CHECK(!has_library(&rs), "the library is gone");
	CHECK(cycles(&d, "fn", 1), "a cycle after the flush");
	CHECK(has_library(&rs), "the library is loaded again");
	f0 = redis_cmdstat(&rs, "fcall", "calls");
	CHECK(cycles(&d, "fn", 5), "five cycles more");
	CHECK(redis_cmdstat(&rs, "fcall", "calls") - f0 == 10, "FCALLs again");
	CHECK(!held_by(&rs, "fn", "a"), "released");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* The call that finds the library gone keeps its first deadline: a
 * release that reaches Redis after dlockd answered it 503, and is answered
 * "Function not found", is sent again with EVAL, which refuses to run
 * late, so the 503 did not take effect. */
TEST(a_function_call_retried_after_function_not_found_keeps_its_first_deadline)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct bg rel;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(cycles(&d, "fnl", 2), "cycles (the library loaded)");
	CHECK(lock_hold(&d, "fnl", "a", 60000), "a takes the lock");
	CHECK(rcmd_ok_on(&rs, "FUNCTION FLUSH"), "FUNCTION FLUSH");
	kill(rs.pid, SIGSTOP);
	bg_start_on(&rel, d.base, "DELETE", "/locks/fnl?owner=a", NULL);
	sleep_ms(2500);		/* past the 1.5 s deadline */
	kill(rs.pid, SIGCONT);
	bg_join(&rel);
	CHECK_ERROR(rel.r, 503, "backend_unavailable", "the release that reached Redis late");
	http_free(&rel.r);
	CHECK(redis_cmdstat(&rs, "fcall", "failed_calls") >= 1, "its FCALL found no function");
	CHECK(held_by(&rs, "fnl", "a"), "the release answered 503 did not take effect");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* Function names are Redis-wide: a library of someone else's that has a
 * function of one of dlockd's names makes a dlockd that starts on that
 * Redis fail to load its own, and that dlockd never calls the function:
 * it runs its scripts with EVALSHA and says why. So does a library under
 * dlockd's own name without its functions (after two "Function not
 * found"). (A user who may load functions can also replace dlockd's own
 * with a library of the same name and functions: no more a boundary than
 * one who may write the locks' keys.) */
TEST(a_function_of_another_library_under_dlockds_names_is_never_called)
{
	static const char *const squatters[] = { "evil", NULL };	/* NULL: dlockd's name */

	for (size_t i = 0; i < sizeof(squatters) / sizeof(squatters[0]); i++) {
		struct redis_srv rs = { 0 };
		struct dlockd_srv d0, d;
		char lib[64] = "", code[512];
		redisReply *rep;

		CHECK(redis_dlockd_start(&rs, &d0, one_thread) == 0, "start Redis and dlockd");
		CHECK(cycles(&d0, "sq", 2), "cycles (the library loaded)");
		CHECK(dlockd_stop(&d0, 5000) == 0, "clean exit");
		rep = rcmd_on(&rs, "FUNCTION LIST LIBRARYNAME dlockd_*");
		if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
		    rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements >= 2)
			snprintf(lib, sizeof(lib), "%s", rep->element[0]->element[1]->str);
		if (rep)
			freeReplyObject(rep);
		CHECK(!strncmp(lib, "dlockd_", 7), "dlockd's library: %s", lib);
		CHECK(rcmd_ok_on(&rs, "FUNCTION FLUSH"), "FUNCTION FLUSH");
		snprintf(code, sizeof(code),
			 "#!lua name=%s\nredis.register_function('%s%s', function(k, a) "
			 "redis.call('set', 'squatter_ran', '1') return {-9} end)",
			 squatters[i] ? squatters[i] : lib, lib, squatters[i] ? "_lock_acquire" : "_x");
		CHECK(rcmd_ok_on(&rs, "FUNCTION LOAD %s", code), "the squatter's library");
		CHECK(dlockd_start_on(&d, &rs, one_thread) == 0, "start a dlockd");
		CHECK(cycles(&d, "sq", 10), "%s: ten cycles answered",
		      squatters[i] ? "a function of dlockd's name" : "a library of dlockd's name");
		CHECK(rcmd_int_on(&rs, "EXISTS squatter_ran") == 0, "the squatter's function never ran");
		CHECK(WAIT_FOR(file_contains(d.log, "dlockd runs its scripts with EVALSHA"), 2000),
		      "dlockd says why");
		CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
	}
}

/* A Redis without functions (before 7.0; here FUNCTION renamed away: the
 * same "unknown command"), a user refused them, or a user refused FCALL
 * alone (FUNCTION LOAD allowed: the FCALL refused is sent again as EVAL):
 * the scripts run with EVALSHA, every call answered, and dlockd says so
 * once. */
TEST(scripts_run_with_evalsha_where_redis_refuses_functions)
{
	static const struct {
		const char *extra, *refused;	/* redis-server args; ACL rules */
	} cases[] = {
		{ "--rename-command FUNCTION fn-renamed", NULL },
		{ "", "-function" },	/* and -fcall */
		{ "", "+function" },	/* and -fcall */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct redis_srv rs = { 0 };
		struct dlockd_srv d;
		const char *what = cases[i].refused ? cases[i].refused : cases[i].extra;
		char url[160];

		snprintf(rs.extra, sizeof(rs.extra), "%s", cases[i].extra);
		CHECK(redis_start(&rs) == 0, "start Redis");
		if (cases[i].refused) {
			CHECK(rcmd_ok_on(&rs, "ACL SETUSER nofn on >pw ~* &* +@all -fcall %s",
					 cases[i].refused),
			      "a user refused FCALL, %s", cases[i].refused);
			snprintf(url, sizeof(url), "redis://nofn:pw@127.0.0.1:%d/0", rs.port);
		} else {
			snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs.port);
		}
		CHECK(dlockd_start(&d, url, one_thread) == 0, "start dlockd");
		CHECK(cycles(&d, "nofn", 10), "%s: ten cycles answered", what);
		CHECK(!held_by(&rs, "nofn", "a"), "released");
		CHECK(redis_cmdstat(&rs, "evalsha", "calls") >= 16,
		      "%s: the scripts ran with EVALSHA (%lld)", what,
		      redis_cmdstat(&rs, "evalsha", "calls"));
		CHECK(redis_cmdstat(&rs, "fcall", "calls") == 0, "%s: no FCALL ran", what);
		CHECK(WAIT_FOR(file_contains(d.log, "dlockd runs its scripts with EVALSHA"), 2000),
		      "%s: dlockd says why", what);
		CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
		redis_stop(&rs, false);
	}
}

/* Found by hostile probing: SIGTERM while a call waits on a stalled Redis
 * made dlockd abort (libmicrohttpd stops a daemon with a suspended
 * connection only by aborting) and left the request unanswered. The loop
 * now waits for the call's answer, which comes within 10 s of its send
 * (503 if Redis never answers), and exits 0; the answer and the lock's
 * state agree. */
TEST(sigterm_while_a_call_waits_on_a_stalled_redis_exits_cleanly)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct bg rel;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(lock_hold(&d, "st", "a", 60000), "a takes the lock");
	kill(rs.pid, SIGSTOP);
	bg_start_on(&rel, d.base, "DELETE", "/locks/st?owner=a", NULL);
	sleep_ms(300);
	kill(d.pid, SIGTERM);
	sleep_ms(6000);		/* stalled past the old 5 s stop wait */
	kill(rs.pid, SIGCONT);
	bg_join(&rel);
	CHECK(rel.r.status == 200 || rel.r.status == 503,
	      "the release in flight is answered (got %ld)", rel.r.status);
	CHECK(rel.r.status == 200 ? !held_by(&rs, "st", "a") : held_by(&rs, "st", "a"),
	      "its answer (%ld) and the lock's state agree", rel.r.status);
	http_free(&rel.r);
	CHECK(redis_dlockd_stop(&rs, &d, 15000) == 0, "dlockd exits 0");
}

/* Connections Redis took and refused (its INFO stats), on c; -1 if
 * unread. */
static long long connections_received(redisContext *c)
{
	static const char *const stat[] = { "total_connections_received:",
					    "rejected_connections:" };
	redisReply *rep = redisCommand(c, "INFO stats");
	long long n = 0;

	for (size_t i = 0; i < sizeof(stat) / sizeof(stat[0]); i++) {
		const char *at = rep && rep->type == REDIS_REPLY_STRING ?
				 strstr(rep->str, stat[i]) : NULL;

		n = at && n >= 0 ? n + atoll(at + strlen(stat[i])) : -1;
	}
	freeReplyObject(rep);
	return n;
}

static bool admin_ok(redisContext *c, const char *cmd)
{
	redisReply *rep = redisCommand(c, cmd);
	bool ok = rep && rep->type != REDIS_REPLY_ERROR;

	freeReplyObject(rep);
	return ok;
}

/* Found by hostile probing: a Redis at its maxclients takes a connection,
 * answers its first command (TIME) with "ERR max number of clients
 * reached" and closes it. dlockd counted that connection as one that had
 * worked, and since it reconnects at once after losing one, it
 * reconnected in a tight loop: 460,000 log lines and as many connections
 * in a minute and a half; a request whose call was held behind that TIME
 * was answered 500. Now only a connection whose TIME was answered has
 * worked, one lost within a second of that backs off like a failed
 * connect, and a call held behind a refused TIME is a 503. */
TEST(redis_at_its_maxclients_is_a_503_without_a_reconnect_storm)
{
	static const char *const flags[] = { "--threads", "2", NULL };
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	redisContext *admin;
	long long conns0, conns;
	int n503 = 0, other = 0, lines;
	int64_t t0;

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(dlockd_start_on(&d, &rs, flags) == 0, "start dlockd");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready");
	admin = redis_client(&rs);
	CHECK(admin, "connect to Redis");
	CHECK(admin_ok(admin, "CONFIG SET maxclients 1") &&
	      admin_ok(admin, "CLIENT KILL TYPE normal SKIPME yes") &&
	      admin_ok(admin, "CLIENT KILL TYPE pubsub"),
	      "Redis full (this connection is its one client), dlockd's connections closed");
	conns0 = connections_received(admin);
	t0 = mono_ms();
	for (int i = 0; i < 20; i++) {
		struct http_resp r;

		http_on(d.base, "PUT", "/locks/maxc?owner=a&ttl_ms=60000", NULL, &r);
		if (r.status == 503 && r.body && strstr(r.body, "\"backend_unavailable\""))
			n503++;
		else
			other++, printf("# request %d: %ld %s\n", i, r.status, r.body ? r.body : "");
		http_free(&r);
		sleep_ms(150);
	}
	conns = connections_received(admin) - conns0;
	lines = file_lines_with(d.log, "max number of clients", NULL);
	printf("# Redis full for %lld ms: %lld connections tried, %d log lines naming it\n",
	       (long long)(mono_ms() - t0), conns, lines);
	CHECK(n503 == 20 && other == 0, "every acquire is a 503 backend_unavailable: %d of 20",
	      n503);
	CHECK(conns >= 2 && conns < 80, "the tries keep to the backoff: %lld connections", conns);
	CHECK(lines >= 1 && lines <= 6, "Redis' refusal is logged, not once a try: %d lines",
	      lines);

	CHECK(admin_ok(admin, "CONFIG SET maxclients 10000"), "room again");
	CHECK(WAIT_FOR(status_of(&d, "PUT", "/locks/maxc?owner=b&ttl_ms=60000") == 200, 10000),
	      "served again, and none of the 503s took the lock");
	redisFree(admin);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "stop");
}

/* A 503 says whether the call may have taken effect. One sent to Redis
 * whose connection then broke (Redis killed while it held the call
 * unread) may have run: "undone": false, and the message says so and how
 * to learn what stands. One never sent (no Redis to send it to) changed
 * nothing, and says that. Both said "redis cannot be reached; retry
 * shortly" before, and errors.md promised that every such 503 changed
 * nothing. */
TEST(a_503_says_whether_the_call_may_have_taken_effect)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w;
	const char *msg;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(lock_hold(&d, "effect-warm", "a", 60000), "a lock taken: the connection works");
	kill(rs.pid, SIGSTOP);
	bg_start_on(&w, d.base, "PUT", "/locks/effect?owner=b&ttl_ms=60000", NULL);
	sleep_ms(500);		/* sent: Redis holds it unread */
	redis_stop(&rs, true);	/* killed while stopped: the connection breaks */
	bg_join(&w);
	CHECK_ERROR(w.r, 503, "backend_unavailable", "the acquire in flight");
	msg = json_str(&w.r, "message");
	CHECK(json_bool(&w.r, "undone") == 0, "it says it may stand (undone: false): %s",
	      w.r.body ? w.r.body : "");
	CHECK(msg && strstr(msg, "may have taken effect") && strstr(msg, "same owner"),
	      "and how to learn what stands: %s", msg ? msg : "");
	CHECK(w.r.retry_after[0], "with Retry-After");
	http_free(&w.r);

	http_on(d.base, "PUT", "/locks/effect2?owner=c&ttl_ms=60000", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "an acquire with Redis gone");
	msg = json_str(&r, "message");
	CHECK(json_bool(&r, "undone") == -1, "no undone: nothing was sent (%s)", r.body);
	CHECK(msg && strstr(msg, "not sent and changed nothing"), "and it says so: %s",
	      msg ? msg : "");
	http_free(&r);
	http_on(d.base, "GET", "/locks/effect2", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a status with Redis gone");
	CHECK(json_bool(&r, "undone") == -1, "a read has no undone (%s)", r.body);
	http_free(&r);
	/* a multi-lock takes back what it took before a 503: nothing stands
	 * (it said "sent ... may have taken effect", undone false: a probe) */
	http_on(d.base, "PUT", "/sessions/0123456789abcdef0123456789abcdef/locks",
		"{\"locks\":[{\"kind\":\"lock\",\"name\":\"e1\"},"
		"{\"kind\":\"write\",\"name\":\"e2\"}]}", &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a multi-lock with Redis gone");
	msg = json_str(&r, "message");
	CHECK(json_bool(&r, "undone") == -1 && msg &&
	      strstr(msg, "nothing of this request is held"), "nothing of it stands: %s", r.body);
	http_free(&r);
	CHECK(metric_value(&d, "dlockd_redis_errors_total{reason=\"no_reply\"}") >= 1 &&
	      metric_value(&d, "dlockd_redis_errors_total{reason=\"unsent\"}") >= 2,
	      "counted apart: no_reply %.0f, unsent %.0f",
	      metric_value(&d, "dlockd_redis_errors_total{reason=\"no_reply\"}"),
	      metric_value(&d, "dlockd_redis_errors_total{reason=\"unsent\"}"));
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}
