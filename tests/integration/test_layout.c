/* test_layout.c -- dlockd and what else lives in its Redis database: owner
 * ids that would collide with the layout's own fields are refused, data
 * that is not a lock (a hash without TTL, a counter that is not a number)
 * is refused untouched and never half-written, expired read holds are gone
 * for every operation, 409 "locked" says what is in the way, and
 * --key-prefix puts every key under a prefix a Redisson NameMapper can
 * share. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char pbuf[512];

/* "/<res>/<name>[/<side>][?<query>]" */
static const char *P(const char *res, const char *name, const char *side, const char *query)
{
	snprintf(pbuf, sizeof(pbuf), "/%s/%s%s%s%s%s", res, name, side[0] ? "/" : "", side,
		 query[0] ? "?" : "", query);
	return pbuf;
}

static bool has(const struct http_resp *r, const char *text)
{
	const char *m = json_str(r, "message");

	return m && strstr(m, text);
}

/* Each of n calls (method, resource, side, query) on name is refused with
 * status and error code, and its message holds text (and text2 unless
 * NULL). */
static void each_refused(const char *const calls[][4], size_t n, const char *name, int status,
			 const char *code, const char *text, const char *text2)
{
	struct http_resp r;

	for (size_t i = 0; i < n; i++) {
		req(calls[i][0], P(calls[i][1], name, calls[i][2], calls[i][3]), &r);
		CHECK_ERROR(r, status, code, pbuf);
		CHECK(has(&r, text) && (!text2 || has(&r, text2)),
		      "%s %s: the message says why: %s", calls[i][0], pbuf, r.body);
		http_free(&r);
	}
}

/* ----- D2: owner ids of the layout's own fields ----- */

TEST(owner_mode_is_refused_for_every_kind_and_takes_no_effect)
{
	const char *n = lockname("m");
	static const char *const calls[][4] = {
		{ "PUT", "locks", "", "owner=mode" },
		{ "DELETE", "locks", "", "owner=mode" },
		{ "POST", "locks", "heartbeat", "owner=mode" },
		{ "GET", "locks", "", "owner=mode" },
		{ "PUT", "fairlocks", "", "owner=mode" },
		{ "PUT", "rwlocks", "read", "owner=mode" },
		{ "PUT", "rwlocks", "write", "owner=mode" },
		{ "DELETE", "rwlocks", "read", "owner=mode" },
		{ "POST", "rwlocks", "read/heartbeat", "owner=mode" },
	};
	struct http_resp r;

	each_refused(calls, sizeof(calls) / sizeof(calls[0]), n, 400, "invalid_argument", "'mode'",
		     "read-write");
	http("PUT", "/locks/x", "{\"owner\":\"mode\"}", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "owner mode in a JSON body");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "nothing was written");
	/* the two holders of issue 14: now the read side is simply free */
	CHECK(req("PUT", P("rwlocks", n, "read", "owner=r1"), NULL) == 200, "a reader may take it");
	CHECK(req("DELETE", P("rwlocks", n, "read", "owner=r1"), NULL) == 200, "and release it");
	/* other ids close to the layout's words are ordinary owners */
	CHECK(req("PUT", P("locks", n, "", "owner=modes"), NULL) == 200, "'modes' is an owner");
	CHECK(req("DELETE", P("locks", n, "", "owner=modes"), NULL) == 200, "and can release");
}

/* A fencing counter that is not a number makes INCR fail: before the fix
 * the lock hash was written first and stayed held behind a 503. */
TEST(a_script_that_cannot_finish_writes_nothing)
{
	static const char *const kinds[][2] = {
		{ "locks", "" }, { "fairlocks", "" }, { "rwlocks", "read" }, { "rwlocks", "write" },
	};
	struct http_resp r;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *n = lockname("tok");

		rcmd_int("SET redisson_lock_token:{%s} not-a-number", n);
		req("PUT", P(kinds[i][0], n, kinds[i][1], "owner=a&ttl_ms=60000"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", pbuf);
		CHECK(has(&r, "not a lock"), "%s: says what is wrong: %s", pbuf, r.body);
		http_free(&r);
		CHECK(rcmd_int("EXISTS %s", n) == 0, "%s: no lock was left behind", pbuf);
		CHECK(rcmd_int("EXISTS redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n) == 0,
		      "%s: no queue place either", pbuf);
	}
	/* a waiting-writer key of the wrong type: refused before any write */
	const char *n = lockname("wz");

	rcmd_int("SET dlockd_rwlock_writers:{%s} x", n);
	req("PUT", P("rwlocks", n, "write", "owner=a&ttl_ms=60000"), &r);
	CHECK_ERROR(r, 409, "wrong_kind", "writers key of the wrong type");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "no write lock was left behind");
}

/* ----- Also: a hash with no TTL is never a lock ----- */

TEST(a_hash_without_ttl_is_not_a_lock_for_any_operation)
{
	const char *n = lockname("user:42");
	const char *m = lockname("wedge");
	static const char *const calls[][4] = {
		{ "PUT", "locks", "", "owner=a" },
		{ "DELETE", "locks", "", "force=true" },
		{ "DELETE", "locks", "", "owner=a" },
		{ "POST", "locks", "heartbeat", "owner=a" },
		{ "GET", "locks", "", "" },
		{ "PUT", "fairlocks", "", "owner=a" },
		{ "DELETE", "fairlocks", "", "force=true" },
		{ "DELETE", "fairlocks", "", "owner=a" },
		{ "PUT", "rwlocks", "read", "owner=a" },
		{ "PUT", "rwlocks", "write", "owner=a" },
		{ "DELETE", "rwlocks", "read", "force=true" },
		{ "DELETE", "rwlocks", "write", "force=true" },
		{ "DELETE", "rwlocks", "read", "owner=a" },
		{ "DELETE", "rwlocks", "write", "owner=a" },
		{ "POST", "rwlocks", "read/heartbeat", "owner=a" },
		{ "POST", "rwlocks", "write/heartbeat", "owner=a" },
		{ "GET", "rwlocks", "", "" },
	};
	redisReply *rep;

	/* an application's own hash, and what owner=mode used to leave */
	rcmd_int("HSET %s name bob a 1", n);
	rcmd_int("HSET %s mode read", m);
	for (int k = 0; k < 2; k++) {
		const char *name = k ? m : n;

		each_refused(calls, sizeof(calls) / sizeof(calls[0]), name, 409, "wrong_kind",
			     "not a lock", NULL);
		CHECK(rcmd_int("PTTL %s", name) == -1, "%s is left without a TTL", name);
	}
	rep = rcmd("HGETALL %s", n);
	CHECK(rep && rep->elements == 4, "the application's hash is untouched");
	freeReplyObject(rep);
	rep = rcmd("HGETALL %s", m);
	CHECK(rep && rep->elements == 2, "so is the other");
	freeReplyObject(rep);
}

/* A hash without a TTL is no lock even beside a holders' entry of
 * dlockd's for its field: an entry outlives a lock hash someone deleted
 * (it lives to the old lease's end), and the application's hash that
 * takes the name then is its own; a lock whose TTL was removed is no
 * lock either, for any owner. */
TEST(a_hash_without_ttl_is_no_lock_beside_a_holders_entry)
{
	static const char *const kinds[][2] = {
		{ "locks", "" }, { "fairlocks", "" }, { "rwlocks", "write" }, { "rwlocks", "read" },
	};
	struct http_resp r;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const char *res = kinds[k][0], *side = kinds[k][1];
		char n[200];

		snprintf(n, sizeof(n), "%s-%zu", lockname("app"), k);
		req("PUT", P(res, n, side, "owner=w1&ttl_ms=600000"), &r);
		CHECK_STATUS(r, 200, "w1 takes the lock");
		http_free(&r);
		CHECK(rcmd_int("DEL %s", n) == 1, "an operator deletes the lock's hash");
		rcmd_int("HSET %s w1 1 balance 100", n);
		rcmd_int("HSET %s w1:write 1", n);
		req("DELETE", P(res, n, side, "owner=w1"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", pbuf);
		http_free(&r);
		CHECK(rcmd_int("HLEN %s", n) == 3 && rcmd_int("PTTL %s", n) == -1,
		      "%s: the application's hash is left whole", pbuf);
		CHECK(rcmd_int("DEL %s", n) == 1, "it goes");
		req("PUT", P(res, n, side, "owner=w1&ttl_ms=600000"), &r);
		CHECK_STATUS(r, 200, "w1 takes the lock again");
		http_free(&r);
		CHECK(rcmd_int("PERSIST %s", n) == 1, "someone removes its TTL");
		req("DELETE", P(res, n, side, "owner=w1"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", pbuf);
		http_free(&r);
		CHECK(rcmd_int("EXISTS %s", n) == 1, "%s: it is left as it is", pbuf);
	}
}

/* Counts Redis' HINCRBY would refuse (a leading zero, "-0"), a Lua
 * number would not hold exactly (2^53 and past), or no holding has (0 or
 * fewer: Redisson deletes a field whose count falls to 0) are not a
 * lock's: 409 wrong_kind, never the 500 of a failed write or a hold of
 * -3, and left alone. */
TEST(counts_redis_or_lua_would_get_wrong_are_not_a_lock)
{
	static const char *const counts[] = { "02", "-0", "00", "+1", "9007199254740993", "0",
					      "-3" };
	struct http_resp r;

	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		char n[200];

		snprintf(n, sizeof(n), "%s-%zu", lockname("count"), k);
		rcmd_int("HSET %s o %s", n, counts[k]);
		rcmd_int("PEXPIRE %s 60000", n);
		req("DELETE", P("locks", n, "", "owner=o"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", pbuf);
		http_free(&r);
		req("POST", P("locks", n, "heartbeat", "owner=o"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", pbuf);
		http_free(&r);
		CHECK(rcmd_int("HLEN %s", n) == 1, "%s is left alone", counts[k]);
	}
}

/* Numbers a Lua number would not hold exactly (2^53 and past) are no
 * lock's: a fencing counter there is refused (tokens from it would repeat
 * or go back), a holders' entry's token there is none (a new one is
 * given, above the counter). A reader's count no read-write lock has
 * (past --max-read-holds-per-owner's bound) is refused before a call
 * reads a key a hold, which would hold Redis up. */
TEST(numbers_past_what_lua_holds_exactly_are_no_locks)
{
	const char *n = lockname("counter");
	const char *m = lockname("entry");
	const char *k = lockname("readers");
	struct http_resp r;
	long long t;

	rcmd_int("SET redisson_lock_token:{%s} 9007199254740993 PX 60000", n);
	req("PUT", P("locks", n, "", "owner=a&ttl_ms=60000"), &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a counter past 2^53");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "no lock taken");
	rcmd_int("SET redisson_lock_token:{%s} 9007199254740000 PX 60000", n);
	req("PUT", P("locks", n, "", "owner=a&ttl_ms=60000"), &r);
	CHECK_STATUS(r, 200, "a counter under 2^53");
	CHECK(json_int(&r, "fencing_token") == 9007199254740001, "its next token, exactly: %lld",
	      json_int(&r, "fencing_token"));
	http_free(&r);

	req("PUT", P("locks", m, "", "owner=a&ttl_ms=60000"), &r);
	CHECK_STATUS(r, 200, "a takes a lock");
	t = json_int(&r, "fencing_token");
	http_free(&r);
	rcmd_int("HSET dlockd_lock_owners:{%s} a %s", m,
		 "99999999999999999999999999999999999999999999999999");
	req("PUT", P("locks", m, "", "owner=a&ttl_ms=60000"), &r);
	CHECK_STATUS(r, 200, "a repeats its acquire");
	CHECK(json_int(&r, "fencing_token") > t, "a new token above the last: %lld after %lld",
	      json_int(&r, "fencing_token"), t);
	http_free(&r);

	rcmd_int("HSET %s mode read r:1 999999", k);
	rcmd_int("PEXPIRE %s 60000", k);
	req("PUT", P("rwlocks", k, "read", "owner=b&ttl_ms=60000"), &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a reader's count no lock has");
	http_free(&r);
	req("GET", P("rwlocks", k, "", ""), &r);
	CHECK_ERROR(r, 409, "wrong_kind", "its status too");
	http_free(&r);
	CHECK(rcmd_int("HGET %s r:1", k) == 999999, "left alone");
}

/* ----- D5: an expired read hold is gone ----- */

TEST(an_expired_read_hold_is_gone_for_every_operation)
{
	const char *n = lockname("rw1");
	struct http_resp r;

	CHECK(req("PUT", P("rwlocks", n, "read", "owner=r1&ttl_ms=500"), NULL) == 200, "r1 reads");
	CHECK(req("PUT", P("rwlocks", n, "read", "owner=r2&ttl_ms=60000"), NULL) == 200, "r2 reads");
	CHECK(WAIT_FOR(rcmd_int("EXISTS {%s}:r1:rwlock_timeout:1", n) == 0, 5000),
	      "r1's lease ran out");
	req("GET", P("rwlocks", n, "", ""), &r);
	CHECK(json_int(&r, "readers") == 1 && !strcmp(json_str(&r, "mode"), "read"),
	      "status counts r2 only: %s", r.body);
	http_free(&r);
	req("POST", P("rwlocks", n, "read/heartbeat", "owner=r1"), &r);
	CHECK_ERROR(r, 409, "not_held", "r1's heartbeat");
	CHECK(has(&r, "'r1'"), "names the reader: %s", r.body);
	http_free(&r);
	req("DELETE", P("rwlocks", n, "read", "owner=r1"), &r);
	CHECK_ERROR(r, 409, "not_held", "r1's release");
	http_free(&r);
	CHECK(rcmd_int("HEXISTS %s r1", n) == 0, "r1's field is gone");
	req("PUT", P("rwlocks", n, "write", "owner=r2&ttl_ms=60000"), &r);
	CHECK_STATUS(r, 200, "r2, now the only reader, upgrades");
	http_free(&r);
	req("DELETE", P("rwlocks", n, "write", "owner=r2"), NULL);
	req("DELETE", P("rwlocks", n, "read", "owner=r2"), NULL);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "free");

	/* per hold: of two holds the short one goes, the long one stays */
	CHECK(req("PUT", P("rwlocks", n, "read", "owner=r&ttl_ms=500"), NULL) == 200, "hold 1");
	CHECK(req("PUT", P("rwlocks", n, "read", "owner=r&ttl_ms=60000&reentrant=true"), NULL) == 200,
	      "hold 2");
	CHECK(req("PUT", P("rwlocks", n, "read", "owner=o&ttl_ms=60000"), NULL) == 200, "other");
	CHECK(WAIT_FOR(rcmd_int("EXISTS {%s}:r:rwlock_timeout:1", n) == 0, 5000),
	      "hold 1 ran out");
	req("GET", P("rwlocks", n, "", ""), &r);
	CHECK(json_int(&r, "readers") == 2, "both readers still read: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("HGET %s r", n) == 1 && rcmd_int("PTTL {%s}:r:rwlock_timeout:1", n) > 55000 &&
	      rcmd_int("EXISTS {%s}:r:rwlock_timeout:2", n) == 0,
	      "one hold left, its key is hold 1 as Redisson numbers them");
	req("DELETE", P("rwlocks", n, "read", "owner=r"), &r);
	CHECK(r.status == 200 && json_int(&r, "holds") == 0, "its last hold released: %s", r.body);
	http_free(&r);
	req("DELETE", P("rwlocks", n, "read", "owner=r"), &r);
	CHECK_ERROR(r, 409, "not_held", "no hold left");
	http_free(&r);
	req("DELETE", P("rwlocks", n, "read", "owner=o"), NULL);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "free");

	/* a writer that also reads: its expired read hold goes, the write stays */
	CHECK(req("PUT", P("rwlocks", n, "write", "owner=w&ttl_ms=60000"), NULL) == 200, "w writes");
	CHECK(req("PUT", P("rwlocks", n, "read", "owner=w&ttl_ms=300"), NULL) == 200, "and reads");
	CHECK(WAIT_FOR(rcmd_int("EXISTS {%s}:w:rwlock_timeout:1", n) == 0, 5000), "read ran out");
	req("DELETE", P("rwlocks", n, "read", "owner=w"), &r);
	CHECK_ERROR(r, 409, "not_held", "the expired read hold of the writer");
	http_free(&r);
	req("DELETE", P("rwlocks", n, "write", "owner=w"), &r);
	CHECK(r.status == 200 && json_bool(&r, "released") == 1, "the write release frees it: %s",
	      r.body);
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "free");
}

/* ----- Also: 409 locked says what is in the way ----- */

TEST(locked_says_what_is_in_the_way)
{
	const char *f = lockname("fq"), *n = lockname("rwm");
	struct http_resp r;
	struct bg w;

	/* a fair lock nobody holds, with a (Redisson) waiter queued */
	rcmd_int("RPUSH redisson_lock_queue:{%s} java:1", f);
	rcmd_int("ZADD redisson_lock_timeout:{%s} %lld java:1", f, redis_time_ms(NULL) + 60000);
	req("PUT", P("fairlocks", f, "", "owner=b"), &r);
	CHECK_ERROR(r, 409, "locked", "fair lock with a queue");
	CHECK(has(&r, "is free") && has(&r, "1 waiter") && !has(&r, "held by"),
	      "says the queue is in the way: %s", r.body);
	http_free(&r);
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", f, f);
	CHECK(req("PUT", P("fairlocks", f, "", "owner=a"), NULL) == 200, "a holds");
	req("PUT", P("fairlocks", f, "", "owner=b"), &r);
	CHECK_ERROR(r, 409, "locked", "fair lock held");
	CHECK(has(&r, "held by another owner"), "held: %s", r.body);
	http_free(&r);
	req("DELETE", P("fairlocks", f, "", "owner=a"), NULL);

	/* the caller reads, others read too: asks for write */
	req("PUT", P("rwlocks", n, "read", "owner=r1&ttl_ms=60000"), NULL);
	req("PUT", P("rwlocks", n, "read", "owner=r2&ttl_ms=60000"), NULL);
	req("PUT", P("rwlocks", n, "write", "owner=r1"), &r);
	CHECK_ERROR(r, 409, "locked", "upgrade with another reader");
	CHECK(has(&r, "read by 1 other owner") && !has(&r, "held by"), "message: %s", r.body);
	http_free(&r);
	req("PUT", P("rwlocks", n, "write", "owner=w"), &r);
	CHECK_ERROR(r, 409, "locked", "write while two read");
	CHECK(has(&r, "read by 2 owners"), "message: %s", r.body);
	http_free(&r);

	/* a writer waits: a new reader queues behind it */
	bg_start(&w, "PUT", P("rwlocks", n, "write", "owner=w&wait_ms=20000"), NULL);
	CHECK(WAIT_FOR(rcmd_int("EXISTS dlockd_rwlock_writers:{%s}", n) == 1, 5000), "w waits");
	req("PUT", P("rwlocks", n, "read", "owner=r3"), &r);
	CHECK_ERROR(r, 409, "locked", "new reader behind a waiting writer");
	CHECK(has(&r, "a writer is waiting") && !has(&r, "held by"), "message: %s", r.body);
	http_free(&r);
	req("DELETE", P("rwlocks", n, "read", "owner=r1"), NULL);
	req("DELETE", P("rwlocks", n, "read", "owner=r2"), NULL);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the writer gets it");
	http_free(&w.r);

	/* a writer holds: readers and writers are told so */
	req("PUT", P("rwlocks", n, "read", "owner=r3"), &r);
	CHECK_ERROR(r, 409, "locked", "read while written");
	CHECK(has(&r, "written by another owner"), "message: %s", r.body);
	http_free(&r);
	req("PUT", P("rwlocks", n, "write", "owner=w2"), &r);
	CHECK_ERROR(r, 409, "locked", "write while written");
	CHECK(has(&r, "written by another owner"), "message: %s", r.body);
	http_free(&r);
	req("DELETE", P("rwlocks", n, "write", "owner=w"), NULL);
}

/* ----- Also: --key-prefix ----- */

TEST(key_prefix_puts_every_key_under_it_and_redisson_shares_it)
{
	static const char *const flags[] = { "--key-prefix", "app1:", NULL };
	const char *n = lockname("px");
	char p[512], chan[300], mapped[200];
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w;
	redisReply *rep;
	long long scripts0;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --key-prefix");
	snprintf(mapped, sizeof(mapped), "app1:%s", n);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc&ttl_ms=60000", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "acquire");
	CHECK(!strcmp(json_str(&r, "name"), n), "the answer shows the name as given: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0 && rcmd_int("HGET %s svc", mapped) == 1 &&
	      rcmd_int("EXISTS redisson_lock_token:{%s}", mapped) == 1,
	      "the hash and the counter carry the prefix");
	/* the unprefixed dlockd sees another lock */
	snprintf(p, sizeof(p), "/locks/%s?owner=other", n);
	CHECK(req("PUT", p, NULL) == 200, "the same name without the prefix is another lock");
	CHECK(req("DELETE", p, NULL) == 200, "released");

	/* a Redisson client whose NameMapper adds app1: contends on it */
	rep = rcmd("EVAL %s 1 %s 30000 java:1", redisson_acquire, mapped);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 55000,
	      "Redisson sees dlockd's holder");
	freeReplyObject(rep);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http_on(d.base, "DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "release");
	http_free(&r);
	rep = rcmd("EVAL %s 1 %s 30000 java:1", redisson_acquire, mapped);
	CHECK(rep && rep->type == REDIS_REPLY_NIL, "then Redisson acquires");
	freeReplyObject(rep);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc&wait_ms=20000", n);
	scripts0 = redis_scripts_called();
	bg_start_on(&w, d.base, "PUT", p, NULL);
	CHECK(wait_parked(&d, 1, scripts0, 5000, "redisson_lock__channel:{%s}", mapped),
	      "dlockd waits on the prefixed channel");
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", mapped);
	rep = rcmd("EVAL %s 2 %s %s 0 30000 java:1 publish", redisson_unlock, mapped, chan);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1, "Redisson unlocks");
	freeReplyObject(rep);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "its message on the prefixed channel wakes the dlockd waiter");
	http_free(&w.r);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http_on(d.base, "DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "release");
	http_free(&r);

	/* the other kinds' keys too */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=r&ttl_ms=60000", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "read");
	http_free(&r);
	CHECK(rcmd_int("PTTL {%s}:r:rwlock_timeout:1", mapped) > 55000, "read hold key prefixed");
	snprintf(p, sizeof(p), "/rwlocks/%s/read?force=true", n);
	http_on(d.base, "DELETE", p, NULL, &r);
	http_free(&r);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=a&ttl_ms=60000", n);
	http_on(d.base, "PUT", p, NULL, &r);
	http_free(&r);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=b&wait_ms=5000", n);
	bg_start_on(&w, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(rcmd_int("LLEN redisson_lock_queue:{%s}", mapped) == 1, 5000),
	      "the fair queue is prefixed");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=a", n);
	http_on(d.base, "DELETE", p, NULL, &r);
	http_free(&r);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the queued waiter gets it");
	http_free(&w.r);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=b", n);
	http_on(d.base, "DELETE", p, NULL, &r);
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(key_prefix_is_checked)
{
	static const char *const bad[] = { "'a b'", "'{x}'", "x/y" };
	char cmd[600];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s --key-prefix %s >/dev/null 2>&1", dlockd_binary(),
			 bad[i]);
		CHECK(WEXITSTATUS(system(cmd)) == 2, "--key-prefix %s is refused", bad[i]);
	}
	snprintf(cmd, sizeof(cmd), "%s --key-prefix %065d >/dev/null 2>&1", dlockd_binary(), 0);
	CHECK(WEXITSTATUS(system(cmd)) == 2, "a prefix over 64 characters is refused");
	snprintf(cmd, sizeof(cmd), "DLOCKD_KEY_PREFIX='a{' %s >/dev/null 2>&1", dlockd_binary());
	CHECK(WEXITSTATUS(system(cmd)) == 2, "so is a bad DLOCKD_KEY_PREFIX");
	snprintf(cmd, sizeof(cmd), "%s --help | grep -q 'key-prefix STR' && %s --help | "
		 "grep -q DLOCKD_KEY_PREFIX", dlockd_binary(), dlockd_binary());
	CHECK(WEXITSTATUS(system(cmd)) == 0, "--help lists it");
}
