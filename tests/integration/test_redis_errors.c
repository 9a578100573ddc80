/* test_redis_errors.c -- Redis answering with an error instead of a
 * result: busy running another client's script while dlockd loads its
 * own, a read-only replica, an ACL that refuses dlockd's commands, out of
 * memory; and foreign data under a lock's keys, which the scripts refuse
 * before they write. dlockd stays up, answers 503 with Retry-After and
 * Redis' reason (409 wrong_kind for foreign data, never "cannot be
 * reached"), changes nothing, and works again once Redis does. A script
 * that fails in Redis is a 500 (tests/unit/test_locks.c). Each test runs its own redis-server and dlockd. */
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

/* A database Redis does not have (SELECT refused at set-up): the calls
 * held behind the set-up hear a 503 that says so, not a 500 of a failing
 * script. */
TEST(redis_refusing_the_database_is_a_503_that_says_so)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char url[128];
	struct http_resp r;

	CHECK(redis_start(&rs) == 0, "start Redis");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/100", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd on database 100 of 16");
	http_on(d.base, "PUT", "/locks/db100?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire on a database Redis refuses");
	CHECK(r.retry_after[0], "with Retry-After");
	CHECK(message_has(&r, "SELECT"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
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

/* Keys of a lock's layout that hold something else (a fair lock's queue
 * that is a string, a fencing counter of letters or a hash): each script
 * checks before its first write (Redis does not roll a failing script
 * back), so the answer is 409 wrong_kind -- never 503 "cannot be reached",
 * never a half-written lock -- and the foreign data is left as it was. */
TEST(data_of_another_kind_under_a_locks_keys_is_wrong_kind_and_left_alone)
{
	static const struct {
		const char *setup, *key, *lock, *path;
	} cases[] = {
		{ "SET %s x", "redisson_lock_queue:{bad}", "bad", "/fairlocks/bad?owner=a" },
		{ "SET %s abc", "redisson_lock_token:{ctr}", "ctr", "/locks/ctr?owner=a" },
		{ "HSET %s a 1", "redisson_lock_token:{ctr2}", "ctr2", "/fairlocks/ctr2?owner=a" },
	};
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(on_redis(&rs, cases[i].setup, cases[i].key), "set up %s", cases[i].key);
		http_on(d.base, "PUT", cases[i].path, NULL, &r);
		CHECK_ERROR(r, 409, "wrong_kind", cases[i].path);
		CHECK(!message_has(&r, "cannot be reached"), "not that Redis cannot be reached");
		http_free(&r);
		CHECK(exists_on(&rs, cases[i].lock) == 0, "%s: no half-written lock", cases[i].path);
		CHECK(exists_on(&rs, cases[i].key) == 1, "%s: the data is left", cases[i].key);
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}
