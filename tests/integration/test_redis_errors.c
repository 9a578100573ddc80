/* test_redis_errors.c -- Redis answering with an error instead of a
 * result: busy running another client's script while dlockd loads its
 * own, a read-only replica, an ACL that refuses dlockd's commands (its
 * writes, or the reads that tell a lock from other data), out of
 * memory; and foreign data under a lock's keys, which the scripts refuse
 * before they write. dlockd stays up, answers 503 with Retry-After and
 * Redis' reason (409 wrong_kind for foreign data, never "cannot be
 * reached"), changes nothing, and works again once Redis does. A script
 * that fails in Redis is a 500 (tests/unit/test_locks.c). Each test runs
 * its own redis-server and dlockd. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reply_str_cmp(const void *a, const void *b)
{
	const redisReply *x = *(redisReply *const *)a, *y = *(redisReply *const *)b;

	return strcmp(x->str, y->str);
}

/* Every key of rs and its DUMP (TTLs aside), in key order, as one
 * buffer (free it): two equal snapshots mean nothing was written. */
static char *redis_snapshot(const struct redis_srv *rs, size_t *len)
{
	redisContext *c = redis_client(rs);
	redisReply *keys = c ? redisCommand(c, "KEYS *") : NULL;
	char *buf = NULL;
	size_t n = 0;

	*len = 0;
	if (keys && keys->type == REDIS_REPLY_ARRAY) {
		qsort(keys->element, keys->elements, sizeof(*keys->element), reply_str_cmp);
		for (size_t i = 0; i < keys->elements; i++) {
			redisReply *d = redisCommand(c, "DUMP %b", keys->element[i]->str,
						     keys->element[i]->len);
			size_t add = keys->element[i]->len + 1 + (d ? d->len : 0) + 1;

			buf = realloc(buf, n + add);
			memcpy(buf + n, keys->element[i]->str, keys->element[i]->len);
			n += keys->element[i]->len;
			buf[n++] = '=';
			if (d && d->type == REDIS_REPLY_STRING) {
				memcpy(buf + n, d->str, d->len);
				n += d->len;
			}
			buf[n++] = '\n';
			if (d)
				freeReplyObject(d);
		}
	}
	if (keys)
		freeReplyObject(keys);
	redisFree(c);
	*len = n;
	return buf;
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

	CHECK(rcmd_ok_on(&rs, "SCRIPT KILL"), "SCRIPT KILL");
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
	/* a free lock's grant writes its holders' entry first, its own type
	 * check: Redis' refusal of that write is still a 503, for every kind */
	static const char *const more[] = { "/rwlocks/ro3/write?owner=a", "/rwlocks/ro4/read?owner=a",
					    "/semaphores/ro5?owner=a&limit=2" };
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
		http_on(d.base, "PUT", more[i], NULL, &r);
		CHECK_ERROR(r, 503, "backend_unavailable", more[i]);
		CHECK(message_has(&r, "read-only replica"), "saying why: %s", r.body);
		http_free(&r);
	}
	CHECK(rcmd_int_on(&master, "EXISTS ro") == 0 && rcmd_int_on(&replica, "EXISTS ro") == 0 &&
	      rcmd_int_on(&master, "EXISTS ro2") == 0, "no lock anywhere");
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
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER noeval on >pw ~* &* +@all -eval -evalsha -script "
			      "-fcall -function"),
	      "a user without scripts");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER nowrite on >pw ~* &* +@all -hincrby -hset"),
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
	CHECK(rcmd_int_on(&rs, "EXISTS acl") == 0, "no lock");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	CHECK(dlockd_stop(&d2, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A Redis user refused a read the scripts use to tell a lock from other
 * data (HGETALL, GET, LRANGE, ZSCORE, ZRANGEBYSCORE): the call is a 503
 * that says NOPERM, not a 409 wrong_kind that blames the data, and the
 * held lock, queue or permits are left exactly as they were. */
TEST(redis_acl_refused_read_is_a_503_not_wrong_kind)
{
	static const struct {
		const char *hold, *try;	/* as admin (NULL: nothing); as the refused user */
	} cases[] = {
		{ "/locks/aclr1?owner=x&ttl_ms=60000", "/locks/aclr1?owner=a" },
		{ NULL, "/locks/aclr2?owner=a" },
		{ "/fairlocks/aclr3?owner=x&ttl_ms=60000", "/fairlocks/aclr3?owner=a&wait_ms=2000" },
		{ "/rwlocks/aclr4/write?owner=x&ttl_ms=60000", "/rwlocks/aclr4/read?owner=a" },
		{ "/semaphores/aclr5?owner=x&limit=1&ttl_ms=60000",
		  "/semaphores/aclr5?owner=a&limit=1" },
	};
	struct redis_srv rs = { 0 };
	struct dlockd_srv admin, d;
	struct http_resp r;
	char url[160], *before, *after;
	size_t nb, na;
	bool ok;

	start_pair(&rs, &admin, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER noread on >pw ~* &* +@all -hgetall -get -lrange "
		       "-zscore -zrangebyscore -zmscore"), "a user refused the scripts' reads");
	snprintf(url, sizeof(url), "redis://noread:pw@127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd as noread (see %s)", d.log);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].hold) {
			http_on(admin.base, "PUT", cases[i].hold, NULL, &r);
			CHECK(r.status == 200, "%s as admin: %ld %s", cases[i].hold, r.status,
			      r.body);
			http_free(&r);
		}
		before = redis_snapshot(&rs, &nb);
		http_on(d.base, "PUT", cases[i].try, NULL, &r);
		CHECK(r.status == 503 && message_has(&r, "no permission (NOPERM)"),
		      "PUT %s by a user refused reads: %ld %s", cases[i].try, r.status, r.body);
		http_free(&r);
		after = redis_snapshot(&rs, &na);
		ok = nb == na && (!nb || !memcmp(before, after, nb));
		free(before);
		free(after);
		CHECK(ok, "%s: every key as it was", cases[i].try);
	}
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	CHECK(dlockd_stop(&admin, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* rs over its maxmemory, evicting nothing. */
static bool no_memory_left(const struct redis_srv *rs)
{
	return rcmd_ok_on(rs, "CONFIG SET maxmemory-policy noeviction") &&
	       rcmd_ok_on(rs, "CONFIG SET maxmemory 1");
}

TEST(redis_out_of_memory_is_a_503_that_says_so)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(no_memory_left(&rs), "Redis has no memory left");
	http_on(d.base, "PUT", "/locks/oom?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "acquire with Redis out of memory");
	CHECK(r.retry_after[0], "with Retry-After");
	CHECK(message_has(&r, "out of memory"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int_on(&rs, "EXISTS oom") == 0, "no lock");
	/* a session's too (it said "Redis did not answer": a probe) */
	http_on(d.base, "POST", "/sessions?ttl_ms=10000", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a session with Redis out of memory");
	CHECK(message_has(&r, "out of memory"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(rcmd_ok_on(&rs, "CONFIG SET maxmemory 0"), "memory again");
	http_on(d.base, "PUT", "/locks/oom?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "acquire works again");
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* Over its maxmemory Redis still takes what gives memory back or keeps
 * what is held: the release of one hold of two, a read lock's heartbeat
 * and a lock's, the last release (the scripts that do these are functions
 * flagged allow-oom; a script without flags was refused at its first write
 * that could add memory). A new acquire and a re-entry are refused whole:
 * 503 out of memory, nothing written. */
TEST(redis_out_of_memory_still_takes_releases_and_heartbeats)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	for (int i = 0; i < 3; i++)	/* the library loaded: FCALLs from now on */
		CHECK(lock_hold(&d, "oomw", "a", 1000) && lock_release(&d, "oomw", "a") == 200,
		      "warm-up cycle");
	CHECK(status_of(&d, "PUT", "/locks/oomr?owner=a&ttl_ms=60000") == 200, "a holds oomr");
	CHECK(status_of(&d, "PUT", "/locks/oomr?owner=a&ttl_ms=60000&reentrant=true") == 200,
	      "a re-enters oomr");
	CHECK(status_of(&d, "PUT", "/rwlocks/oomrw/read?owner=a&ttl_ms=60000") == 200,
	      "a reads oomrw");
	CHECK(no_memory_left(&rs), "Redis has no memory left");

	http_on(d.base, "PUT", "/locks/oomnew?owner=b", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a new acquire");
	CHECK(message_has(&r, "out of memory"), "saying why: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int_on(&rs, "EXISTS oomnew") == 0, "no lock written");
	http_on(d.base, "PUT", "/locks/oomr?owner=a&reentrant=true", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "a re-entry");
	http_free(&r);

	http_on(d.base, "DELETE", "/locks/oomr?owner=a", NULL, &r);
	CHECK_STATUS(r, 200, "one hold of two given back");
	CHECK(strstr(r.body, "\"holds\":1"), "one hold left: %s", r.body);
	http_free(&r);
	CHECK(status_of(&d, "POST", "/rwlocks/oomrw/read/heartbeat?owner=a") == 200,
	      "the read lock's heartbeat");
	CHECK(status_of(&d, "POST", "/locks/oomr/heartbeat?owner=a") == 200,
	      "the lock's heartbeat");
	CHECK(status_of(&d, "DELETE", "/locks/oomr?owner=a") == 200, "the last hold given back");
	CHECK(rcmd_int_on(&rs, "EXISTS oomr") == 0, "oomr is free");
	CHECK(rcmd_ok_on(&rs, "CONFIG SET maxmemory 0"), "memory again");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A Redis that refuses writes (min-replicas-to-write not met: NOREPLICAS)
 * still answers the reads that are functions flagged no-writes: a lock's
 * and a semaphore's status and the listing; an acquire is 503 and takes
 * nothing. (A read-write lock's status may purge expired read holds: it
 * is refused with the writes.) */
TEST(redis_refusing_writes_still_answers_status_reads)
{
	static const char *const reads[] = { "/locks/nr", "/locks/nr?owner=a", "/semaphores/nrs",
					     "/locks?limit=10" };
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(lock_hold(&d, "nr", "a", 60000), "a holds nr");
	http_on(d.base, "PUT", "/semaphores/nrs?owner=a&limit=2", NULL, &r);
	CHECK_STATUS(r, 200, "a takes a permit");
	http_free(&r);
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {	/* loaded */
		http_on(d.base, "GET", reads[i], NULL, &r);
		http_free(&r);
	}
	CHECK(rcmd_ok_on(&rs, "CONFIG SET min-replicas-to-write 1"), "writes need a replica");
	http_on(d.base, "PUT", "/locks/nr2?owner=b", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "an acquire while Redis refuses writes");
	http_free(&r);
	CHECK(rcmd_int_on(&rs, "EXISTS nr2") == 0, "nothing taken");
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		http_on(d.base, "GET", reads[i], NULL, &r);
		CHECK(r.status == 200, "GET %s while Redis refuses writes: %ld %s", reads[i],
		      r.status, r.body ? r.body : "");
		http_free(&r);
	}
	CHECK(rcmd_ok_on(&rs, "CONFIG SET min-replicas-to-write 0"), "writes again");
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
		CHECK(rcmd_ok_on(&rs, cases[i].setup, cases[i].key), "set up %s", cases[i].key);
		http_on(d.base, "PUT", cases[i].path, NULL, &r);
		CHECK_ERROR(r, 409, "wrong_kind", cases[i].path);
		CHECK(!message_has(&r, "cannot be reached"), "not that Redis cannot be reached");
		http_free(&r);
		CHECK(rcmd_int_on(&rs, "EXISTS %s", cases[i].lock) == 0, "%s: no half-written lock",
		      cases[i].path);
		CHECK(rcmd_int_on(&rs, "EXISTS %s", cases[i].key) == 1, "%s: the data is left", cases[i].key);
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* What key holds, in a form to compare: its DUMP (the value, not its TTL)
 * in hex, or "-" when it does not exist. The caller frees it. */
static char *dump_of(const struct redis_srv *rs, const char *key)
{
	redisContext *c = redis_client(rs);
	redisReply *rep = c ? redisCommand(c, "DUMP %s", key) : NULL;
	char *s = NULL;

	if (rep && rep->type == REDIS_REPLY_STRING) {
		s = malloc(rep->len * 2 + 1);
		for (size_t i = 0; s && i < rep->len; i++)
			sprintf(s + 2 * i, "%02x", (unsigned char)rep->str[i]);
		if (s && !rep->len)
			s[0] = '\0';
	} else if (rep && rep->type == REDIS_REPLY_NIL) {
		s = strdup("-");
	}
	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return s;
}

/* Redis refusing the SUBSCRIBE itself (no channels for the user): the
 * refusal was ignored without a word, and the channel kept waiting for a
 * confirmation that never came. Now it is logged, waiters are still
 * served at the holder's lease end, and once channels are allowed the
 * subscriber is back within REFUSED_RETRY_MS (5 s): a release wakes a
 * waiter at once again. */
TEST(redis_refusing_subscribe_is_logged_and_waiters_still_served)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w;
	int64_t t0;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER default resetchannels"), "no channels for dlockd");
	http_on(d.base, "PUT", "/locks/sub1?owner=h&ttl_ms=1500", NULL, &r);
	CHECK_STATUS(r, 200, "h holds sub1 for 1.5 s");
	http_free(&r);
	t0 = mono_ms();
	bg_start_on(&w, d.base, "PUT", "/locks/sub1?owner=w&wait_ms=20000", NULL);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiter is served");
	CHECK(w.done_ms - t0 < 4000 * slow_factor(), "at h's lease end, not its 20 s wait: %lld ms",
	      (long long)(w.done_ms - t0));
	http_free(&w.r);
	CHECK(WAIT_FOR(file_contains(d.log, "redis refused a subscription"), 3000),
	      "the refusal is in the log");

	CHECK(rcmd_ok_on(&rs, "ACL SETUSER default allchannels"), "channels allowed again");
	/* the subscriber is back within 5 s: until then a waiter on a 60 s
	 * lock gets no message and gives up after its 3 s */
	ok = false;
	for (int i = 0; i < 8 && !ok; i++) {
		char put[64], del[64];

		snprintf(put, sizeof(put), "/locks/sub2-%d?owner=h&ttl_ms=60000", i);
		http_on(d.base, "PUT", put, NULL, &r);
		CHECK_STATUS(r, 200, "h holds a lock for 60 s");
		http_free(&r);
		snprintf(put, sizeof(put), "/locks/sub2-%d?owner=w&wait_ms=3000", i);
		bg_start_on(&w, d.base, "PUT", put, NULL);
		/* waiting, and subscribed if channels work again; else the
		 * release below wakes nobody and w gives up */
		WAIT_FOR(waiters_of(&d) >= 1 &&
			 channel_subscribers(&rs, "redisson_lock__channel:{sub2-%d}", i) >= 1, 2000);
		snprintf(del, sizeof(del), "/locks/sub2-%d?owner=h", i);
		http_on(d.base, "DELETE", del, NULL, &r);
		http_free(&r);
		bg_join(&w);
		ok = w.r.status == 200;
		http_free(&w.r);
	}
	CHECK(ok, "a release wakes a waiter again once channels are allowed");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* Put owner at the tail of fair lock name's queue, live for 10 minutes. */
#define QUEUE_WAITER "EVAL %s 2 redisson_lock_queue:{%s} redisson_lock_timeout:{%s} %s"
static const char queue_waiter_lua[] =
	"local t = redis.call('time') "
	"redis.call('rpush', KEYS[1], ARGV[1]) "
	"return redis.call('zadd', KEYS[2], t[1] * 1000 + 600000, ARGV[1])";

/* Redis 7 refuses PUBLISH to a user without channels (ACL SETUSER
 * resetchannels; acl-pubsub-default makes every new user so), and inside
 * a script the refusal comes after the writes before it, which Redis does
 * not undo: every script publishes before its first write. So each call
 * whose script publishes is a 503 that says why and leaves every key of
 * the lock as it was; once channels are allowed again it works. */
TEST(redis_refusing_publish_is_a_503_that_changes_nothing)
{
	static const struct {
		const char *what;
		const char *setup[3];		/* PUTs that must answer 200 */
		const char *queue[2];		/* fair-queue waiters: {lock, owner} */
		const char *method, *path, *body;
		const char *keys[4];		/* left exactly as they were */
		const char *lease_key;		/* whose lease must stay long */
	} cases[] = {
		{ "plain release", { "/locks/c1?owner=h&ttl_ms=60000" }, { NULL },
		  "DELETE", "/locks/c1?owner=h", NULL, { "c1" }, "c1" },
		{ "forced release", { "/locks/c2?owner=h&ttl_ms=60000" }, { NULL },
		  "DELETE", "/locks/c2?force=true", NULL, { "c2" }, "c2" },
		{ "heartbeat that shortens the lease", { "/locks/c3?owner=h&ttl_ms=60000" }, { NULL },
		  "POST", "/locks/c3/heartbeat", "{\"owner\":\"h\",\"ttl_ms\":5000}", { "c3" }, "c3" },
		{ "fair release with a queued waiter", { "/fairlocks/f1?owner=h&ttl_ms=60000" },
		  { "f1", "w" }, "DELETE", "/fairlocks/f1?owner=h", NULL,
		  { "f1", "redisson_lock_queue:{f1}", "redisson_lock_timeout:{f1}" }, "f1" },
		{ "forced fair release with a queued waiter", { "/fairlocks/f2?owner=h&ttl_ms=60000" },
		  { "f2", "w" }, "DELETE", "/fairlocks/f2?force=true", NULL,
		  { "f2", "redisson_lock_queue:{f2}", "redisson_lock_timeout:{f2}" }, "f2" },
		{ "fair acquire by the queue head with a waiter behind", { NULL }, { "f3", "h" },
		  "PUT", "/fairlocks/f3?owner=h", NULL,
		  { "f3", "redisson_lock_queue:{f3}", "redisson_lock_timeout:{f3}",
		    "redisson_lock_token:{f3}" }, NULL },
		{ "write release", { "/rwlocks/r1/write?owner=h&ttl_ms=60000" }, { NULL },
		  "DELETE", "/rwlocks/r1/write?owner=h", NULL, { "r1" }, "r1" },
		{ "read release that frees the lock", { "/rwlocks/r2/read?owner=h&ttl_ms=60000" },
		  { NULL }, "DELETE", "/rwlocks/r2/read?owner=h", NULL,
		  { "r2", "{r2}:h:rwlock_timeout:1" }, "r2" },
		{ "read release that leaves one reader",
		  { "/rwlocks/r3/read?owner=a&ttl_ms=60000", "/rwlocks/r3/read?owner=b&ttl_ms=60000" },
		  { NULL }, "DELETE", "/rwlocks/r3/read?owner=a", NULL,
		  { "r3", "{r3}:a:rwlock_timeout:1", "{r3}:b:rwlock_timeout:1" }, "r3" },
		{ "write release that downgrades to a read",
		  { "/rwlocks/r4/write?owner=h&ttl_ms=60000", "/rwlocks/r4/read?owner=h&ttl_ms=60000" },
		  { NULL }, "DELETE", "/rwlocks/r4/write?owner=h", NULL,
		  { "r4", "{r4}:h:rwlock_timeout:1" }, "r4" },
		{ "forced write release", { "/rwlocks/r5/write?owner=h&ttl_ms=60000" }, { NULL },
		  "DELETE", "/rwlocks/r5/write?force=true", NULL, { "r5" }, "r5" },
		{ "forced read release", { "/rwlocks/r6/read?owner=h&ttl_ms=60000" }, { NULL },
		  "DELETE", "/rwlocks/r6/read?force=true", NULL,
		  { "r6", "{r6}:h:rwlock_timeout:1" }, "r6" },
	};
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *before[4] = { NULL }, *after;
		const char *what = cases[i].what;

		for (size_t s = 0; s < 3 && cases[i].setup[s]; s++) {
			http_on(d.base, "PUT", cases[i].setup[s], NULL, &r);
			CHECK_STATUS(r, 200, cases[i].setup[s]);
			http_free(&r);
		}
		if (cases[i].queue[0]) {
			CHECK(rcmd_ok_on(&rs, QUEUE_WAITER, queue_waiter_lua, cases[i].queue[0],
				       cases[i].queue[0], cases[i].queue[1]) &&
			      rcmd_ok_on(&rs, QUEUE_WAITER, queue_waiter_lua, cases[i].queue[0],
				       cases[i].queue[0], "w2"), "%s: queue waiters", what);
		}
		for (size_t k = 0; k < 4 && cases[i].keys[k]; k++)
			CHECK((before[k] = dump_of(&rs, cases[i].keys[k])), "%s: DUMP", what);
		CHECK(rcmd_ok_on(&rs, "ACL SETUSER default resetchannels"), "refuse every channel");

		http_on(d.base, cases[i].method, cases[i].path, cases[i].body, &r);
		CHECK_ERROR(r, 503, "backend_unavailable", what);
		CHECK(atoi(r.retry_after) >= 1, "%s: Retry-After, got '%s'", what, r.retry_after);
		CHECK(message_has(&r, "NOPERM"), "%s: saying why: %s", what, r.body);
		http_free(&r);
		for (size_t k = 0; k < 4 && cases[i].keys[k]; k++) {
			CHECK((after = dump_of(&rs, cases[i].keys[k])), "%s: DUMP", what);
			ok = !strcmp(after, before[k]);
			CHECK(ok, "%s: %s changed (%s, was %s)", what, cases[i].keys[k], after,
			      before[k]);
			free(after);
			free(before[k]);
		}
		if (cases[i].lease_key)
			CHECK(rcmd_int_on(&rs, "PTTL %s", cases[i].lease_key) > 30000, "%s: the lease is kept (%lld)",
			      what, rcmd_int_on(&rs, "PTTL %s", cases[i].lease_key));

		CHECK(rcmd_ok_on(&rs, "ACL SETUSER default allchannels"), "allow channels again");
		http_on(d.base, cases[i].method, cases[i].path, cases[i].body, &r);
		CHECK_STATUS(r, 200, what);
		http_free(&r);
	}
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A waiter that gives up (its deadline) while Redis refuses the channel:
 * leaving the queue would tell the next waiter, which Redis refuses, so
 * the leaving changes nothing either; the place it keeps expires with
 * its lifetime (--queue-ttl-ms), as a dead instance's does. The client
 * hears its acquire's own answer. */
TEST(redis_refusing_publish_leaves_a_given_up_place_to_expire)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg b;
	char *before, *after;
	bool ok;

	start_pair(&rs, &d, NULL, &ok);
	CHECK(ok, "start Redis and dlockd");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER default resetchannels"), "refuse every channel");

	/* a fair queue's head, with another waiter behind it */
	http_on(d.base, "PUT", "/fairlocks/g1?owner=h&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "h takes g1");
	http_free(&r);
	bg_start_on(&b, d.base, "PUT", "/fairlocks/g1?owner=q&wait_ms=1500", NULL);
	CHECK(WAIT_FOR(rcmd_int_on(&rs, "EXISTS redisson_lock_queue:{g1}") == 1, 5000), "q queues");
	CHECK(rcmd_ok_on(&rs, QUEUE_WAITER, queue_waiter_lua, "g1", "g1", "w2"), "w2 behind q");
	CHECK((before = dump_of(&rs, "redisson_lock_queue:{g1}")), "DUMP");
	bg_join(&b);
	CHECK_ERROR(b.r, 409, "locked", "q gives up");
	http_free(&b.r);
	after = dump_of(&rs, "redisson_lock_queue:{g1}");
	ok = after && !strcmp(after, before);
	free(after);
	free(before);
	CHECK(ok, "the queue is as it was: q first, then w2");

	/* a waiting writer, which holds new readers back */
	http_on(d.base, "PUT", "/rwlocks/g2/read?owner=h&ttl_ms=60000", NULL, &r);
	CHECK_STATUS(r, 200, "h reads g2");
	http_free(&r);
	bg_start_on(&b, d.base, "PUT", "/rwlocks/g2/write?owner=w&wait_ms=1500", NULL);
	bg_join(&b);
	CHECK_ERROR(b.r, 409, "locked", "the writer gives up");
	http_free(&b.r);
	CHECK(rcmd_ok_on(&rs, "ZSCORE dlockd_rwlock_writers:{g2} w") &&
	      rcmd_int_on(&rs, "EXISTS dlockd_rwlock_writers:{g2}") == 1,
	      "the writer is still registered");

	CHECK(rcmd_ok_on(&rs, "ACL SETUSER default allchannels"), "allow channels again");
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}
