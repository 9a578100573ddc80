/* test_redis_errors.c -- Redis answering with an error instead of a
 * result: busy running another client's script while dlockd loads its
 * own, a read-only replica, an ACL that refuses dlockd's commands, out of
 * memory, a script failing on data it cannot read. dlockd stays up,
 * answers 503 with Retry-After and Redis' reason (or 500 for a failing
 * script, never "cannot be reached"), changes nothing, and works again
 * once Redis does. Each test runs its own redis-server and dlockd. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A command on rs; true when the reply is not an error. */
static bool on_redis(const struct redis_srv *rs, const char *fmt, ...)
{
	redisContext *c = redis_client(rs);
	redisReply *rep = NULL;
	va_list ap;
	bool ok;

	if (c) {
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	ok = rep && rep->type != REDIS_REPLY_ERROR;
	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return ok;
}

static long long exists_on(const struct redis_srv *rs, const char *key)
{
	redisContext *c = redis_client(rs);
	redisReply *rep = c ? redisCommand(c, "EXISTS %s", key) : NULL;
	long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;

	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return n;
}

/* PING on rs answers BUSY (a script runs past busy-reply-threshold). */
static bool redis_busy(const struct redis_srv *rs)
{
	redisContext *c = redis_client(rs);
	redisReply *rep = c ? redisCommand(c, "PING") : NULL;
	bool busy = rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "BUSY", 4);

	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return busy;
}

static bool message_has(const struct http_resp *r, const char *s)
{
	const char *m = json_str(r, "message");

	return m && strstr(m, s);
}

static void start_pair(struct redis_srv *rs, struct dlockd_srv *d, const char *userinfo,
		       bool *ok)
{
	char url[160];

	*ok = false;
	if (redis_start(rs) != 0)
		return;
	snprintf(url, sizeof(url), "redis://%s127.0.0.1:%d/0", userinfo ? userinfo : "", rs->port);
	*ok = dlockd_start(d, url, NULL) == 0;
}

/* Another client's script runs past busy-reply-threshold just when a
 * fresh dlockd loads its first script: SCRIPT LOAD and the EVAL behind it
 * get BUSY. dlockd used to abort() on the refused SCRIPT LOAD. */
TEST(redis_busy_with_a_script_is_a_503_and_dlockd_lives)
{
	struct redis_srv rs = { .extra = "--busy-reply-threshold 100" };
	struct dlockd_srv d;
	struct http_resp r;
	redisContext *hog;
	int done = 0;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	http_on(d.base, "GET", "/readyz", NULL, &r);
	CHECK_STATUS(r, 200, "dlockd is connected (but has loaded no script)");
	http_free(&r);
	/* the busy loop, sent and never read: the hog's reply is SCRIPT
	 * KILL's error, read by nobody */
	hog = redis_client(&rs);
	CHECK(hog, "connect the hog");
	redisAppendCommand(hog, "EVAL %s 0", "while true do end");
	while (!done)
		CHECK(redisBufferWrite(hog, &done) == REDIS_OK, "send the busy loop");
	CHECK(WAIT_FOR(redis_busy(&rs), 5000), "Redis answers BUSY");

	http_on(d.base, "PUT", "/fairlocks/busy1?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire while Redis runs a script");
	CHECK(atoi(r.retry_after) >= 1, "with Retry-After, got '%s'", r.retry_after);
	CHECK(message_has(&r, "busy running a script"), "saying why: %s", r.body);
	http_free(&r);
	http_on(d.base, "GET", "/readyz", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "not ready while Redis is busy");
	CHECK(message_has(&r, "busy running a script"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");

	CHECK(on_redis(&rs, "SCRIPT KILL"), "SCRIPT KILL");
	redisFree(hog);
	CHECK(WAIT_FOR(!redis_busy(&rs), 5000), "Redis is free again");
	http_on(d.base, "PUT", "/fairlocks/busy1?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "the same acquire works once the script is killed");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* dlockd pointed at a replica: writes are refused with READONLY. */
TEST(redis_replica_is_a_503_that_says_read_only)
{
	struct redis_srv master = { 0 }, replica = { 0 };
	struct dlockd_srv d;
	char url[128];
	struct http_resp r;

	CHECK(redis_start(&master) == 0, "start the master");
	snprintf(replica.extra, sizeof(replica.extra), "--replicaof 127.0.0.1 %d", master.port);
	CHECK(redis_start(&replica) == 0, "start the replica");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", replica.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd on the replica");

	http_on(d.base, "PUT", "/locks/ro?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire on a replica");
	CHECK(r.retry_after[0], "with Retry-After");
	CHECK(message_has(&r, "read-only replica"), "saying why: %s", r.body);
	http_free(&r);
	http_on(d.base, "PUT", "/fairlocks/ro2?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "fair acquire on a replica");
	CHECK(message_has(&r, "read-only replica"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(exists_on(&master, "ro") == 0 && exists_on(&replica, "ro") == 0 &&
	      exists_on(&master, "ro2") == 0, "no lock anywhere");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&replica, false);
	redis_stop(&master, false);
}

/* An ACL user that may not run scripts at all (dlockd used to abort on
 * the refused SCRIPT LOAD), and one whose scripts may not write. */
TEST(redis_acl_refusal_is_a_503_that_says_no_permission)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d, d2;
	char url[160];
	struct http_resp r;

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(on_redis(&rs, "ACL SETUSER noeval on >pw ~* &* +@all -eval -evalsha -script"),
	      "a user without scripts");
	CHECK(on_redis(&rs, "ACL SETUSER nowrite on >pw ~* &* +@all -hincrby -hset"),
	      "a user whose scripts cannot write a hash");
	snprintf(url, sizeof(url), "redis://noeval:pw@127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd as noeval");
	snprintf(url, sizeof(url), "redis://nowrite:pw@127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d2, url, NULL) == 0, "start dlockd as nowrite");

	http_on(d.base, "PUT", "/locks/acl?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire without EVAL");
	CHECK(r.retry_after[0], "with Retry-After");
	CHECK(message_has(&r, "no permission (NOPERM)"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");
	http_on(d2.base, "PUT", "/locks/acl?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire whose script may not write");
	CHECK(message_has(&r, "no permission (NOPERM)"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(exists_on(&rs, "acl") == 0, "no lock");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	CHECK(dlockd_stop(&d2, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

TEST(redis_out_of_memory_is_a_503_that_says_so)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(on_redis(&rs, "CONFIG SET maxmemory-policy noeviction") &&
	      on_redis(&rs, "CONFIG SET maxmemory 1"), "Redis has no memory left");
	http_on(d.base, "PUT", "/locks/oom?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire with Redis out of memory");
	CHECK(r.retry_after[0], "with Retry-After");
	CHECK(message_has(&r, "out of memory"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(exists_on(&rs, "oom") == 0, "no lock");
	CHECK(on_redis(&rs, "CONFIG SET maxmemory 0"), "memory again");
	http_on(d.base, "PUT", "/locks/oom?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "acquire works again");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A fair lock whose queue key holds a string: the script fails on the
 * data (WRONGTYPE). That is no unreachable Redis: a 500 that says the
 * script failed, nothing changed, and the metric counts it. */
TEST(a_script_that_fails_in_redis_is_a_500_not_unreachable)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	double errors;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(on_redis(&rs, "SET %s x", "redisson_lock_queue:{bad}"), "a queue that is a string");
	http_on(d.base, "PUT", "/fairlocks/bad?owner=a", NULL, &r);
	CHECK_ERROR(r, 500, "internal", "acquire on a corrupt queue");
	CHECK(!r.retry_after[0], "no Retry-After: retrying will not help");
	CHECK(message_has(&r, "script failed"), "saying the script failed: %s", r.body);
	CHECK(!message_has(&r, "cannot be reached"), "not that Redis cannot be reached");
	http_free(&r);
	CHECK(exists_on(&rs, "bad") == 0, "no lock");
	errors = metric_value(&d, "dlockd_redis_errors_total");
	CHECK(errors >= 1, "counted as a Redis error (%g)", errors);
	CHECK(metric_value(&d, "dlockd_lock_operations_total{kind=\"fairlock\",op=\"acquire\","
			       "result=\"script_error\"}") == 1, "and as a script error");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A fencing counter that is not an integer used to fail the acquire
 * script after it had written the lock (Redis does not roll a script
 * back): a 503 that had taken effect. It now counts as lost: the grant
 * goes through with a token from Redis' clock, above any before it. */
TEST(a_corrupt_fencing_counter_leaves_no_half_written_lock)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(on_redis(&rs, "SET %s abc", "redisson_lock_token:{ctr}"), "a counter of letters");
	CHECK(on_redis(&rs, "HSET %s a 1", "redisson_lock_token:{ctr2}"), "a counter that is a hash");
	http_on(d.base, "PUT", "/locks/ctr?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "acquire over a corrupt counter");
	CHECK(json_int(&r, "fencing_token") > 1000000000000000LL,
	      "a token from Redis' clock in microseconds: %lld", json_int(&r, "fencing_token"));
	http_free(&r);
	http_on(d.base, "PUT", "/fairlocks/ctr2?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "fair acquire over a counter that is a hash");
	http_free(&r);
	http_on(d.base, "DELETE", "/locks/ctr?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "release");
	http_free(&r);
	http_on(d.base, "PUT", "/locks/ctr?owner=b", NULL, &r);
	CHECK_STATUS(r, 200, "and the next acquire counts on from there");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}
