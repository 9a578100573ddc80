/* test_locks.c -- the /locks contract of docs/reference/http-api.md and openapi.yaml
 * against real dlockd and Redis: acquire, re-entry, fencing tokens, release, force release,
 * heartbeat, status, and the Redis layout Redisson expects. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char path[512];

static const char *P(const char *fmt, const char *name, const char *rest)
{
	snprintf(path, sizeof(path), fmt, name, rest ? rest : "");
	return path;
}

TEST(acquire_generates_owner_and_token)
{
	const char *n = lockname("gen");
	struct http_resp r;
	const char *owner;

	http("PUT", P("/locks/%s%s", n, NULL), NULL, &r);
	CHECK_STATUS(r, 200, "free lock is granted");
	owner = json_str(&r, "owner");
	CHECK(owner && strlen(owner) == 32 && strspn(owner, "0123456789ABCDEF") == 32,
	      "generated owner is 128 random bits in capital hex (never a session id's "
	      "shape), got %s", owner ? owner : "(none)");
	CHECK(json_int(&r, "fencing_token") >= 1, "a fencing token comes with the grant");
	/* the lease left, counted from when dlockd sent the command to Redis */
	CHECK(json_int(&r, "ttl_ms") <= 30000 && json_int(&r, "ttl_ms") > 29000,
	      "default lease is 30000 ms, got %lld", json_int(&r, "ttl_ms"));
	CHECK(json_int(&r, "holds") == 1, "one hold");
	CHECK(!strcmp(json_str(&r, "name"), n), "name echoed");
	CHECK(strstr(r.content_type, "application/json"), "JSON content type, got %s", r.content_type);
	http_free(&r);

	http("PUT", P("/locks/%s%s", n, NULL), NULL, &r);
	CHECK_ERROR(r, 409, "locked", "a second acquire without the owner is another owner");
	http_free(&r);
}

/* reentrant=true counts holds, as Redisson's RLock does; the token is the
 * holding's, the same for every re-entry. */
TEST(reentrant_acquire_counts_holds_under_one_token)
{
	const char *n = lockname("re");
	struct http_resp r;
	long long t1, t2, t3;

	http("PUT", P("/locks/%s%s", n, "?owner=w1&ttl_ms=60000"), NULL, &r);
	CHECK_STATUS(r, 200, "first acquire");
	t1 = json_int(&r, "fencing_token");
	http_free(&r);
	http("PUT", P("/locks/%s%s", n, NULL), "{\"owner\":\"w1\",\"ttl_ms\":1000,\"reentrant\":true}",
	     &r);
	CHECK_STATUS(r, 200, "re-entry by the same owner");
	CHECK(json_int(&r, "holds") == 2, "two holds, got %lld", json_int(&r, "holds"));
	CHECK(json_int(&r, "ttl_ms") > 59000, "re-entry with a shorter ttl keeps the longer lease, got %lld",
	      json_int(&r, "ttl_ms"));
	t2 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(t2 == t1, "a re-entry keeps the holding's token: %lld then %lld", t1, t2);

	http("DELETE", P("/locks/%s%s", n, "?owner=w1"), NULL, &r);
	CHECK_STATUS(r, 200, "partial release");
	CHECK(json_bool(&r, "released") == 0 && json_int(&r, "holds") == 1,
	      "partial release leaves one hold: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("PTTL %s", n) > 58000, "a partial release keeps the remaining lease");

	http("DELETE", P("/locks/%s%s", n, "?owner=w1"), NULL, &r);
	CHECK(json_bool(&r, "released") == 1 && json_int(&r, "holds") == 0, "full release: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "the lock hash is gone once free");

	http("PUT", P("/locks/%s%s", n, "?owner=w2"), NULL, &r);
	t3 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(t3 > t2, "next holder's token is larger: %lld after %lld", t3, t2);
}

TEST(redis_layout_is_redissons)
{
	const char *n = lockname("layout");
	struct http_resp r;
	redisReply *rep;
	char key[300];

	http("PUT", P("/locks/%s%s", n, "?owner=app-1:42&ttl_ms=20000"), NULL, &r);
	CHECK_STATUS(r, 200, "acquire");
	http_free(&r);
	rep = rcmd("TYPE %s", n);
	CHECK(rep && rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "hash"),
	      "lock is a hash named exactly as the lock");
	freeReplyObject(rep);
	CHECK(rcmd_int("HGET %s %s", n, "app-1:42") == 1, "owner field holds the count");
	CHECK(rcmd_int("HLEN %s", n) == 1, "no other fields");
	CHECK(rcmd_int("PTTL %s", n) > 19000, "lease is a PEXPIRE on the hash");
	snprintf(key, sizeof(key), "redisson_lock_token:{%s}", n);
	CHECK(rcmd_int("GET %s", key) >= 1, "token counter under redisson_lock_token:{N}");
	CHECK(rcmd_int("PTTL %s", key) > 19000, "token counter lives as long as the lease");
	{
		long long mine = rcmd_int("GET %s", key), theirs = rcmd_int("INCR %s", key);

		/* a Redisson RFencedLock INCRs the same counter */
		CHECK(theirs == mine + 1, "Redisson's INCR continues the sequence: %lld after %lld",
		      theirs, mine);
		CHECK(lock_release(NULL, n, "app-1:42") == 200, "released");
		http("PUT", P("/locks/%s%s", n, "?owner=app-2:7"), NULL, &r);
		CHECK(json_int(&r, "fencing_token") > theirs,
		      "and dlockd continues above it: %s", r.body);
		http_free(&r);
	}
}

/* A name nobody holds leaves nothing in Redis: the token counter goes with
 * the longest lease it granted, and the next token starts from Redis'
 * clock, still above every earlier one. */
TEST(token_counter_expires_with_the_lease_and_tokens_still_increase)
{
	const char *n = lockname("tokexp");
	struct http_resp r;
	long long t1, t2, t3;

	http("PUT", P("/locks/%s%s", n, "?owner=a&ttl_ms=300"), NULL, &r);
	CHECK_STATUS(r, 200, "acquire");
	t1 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(lock_release(NULL, n, "a") == 200, "a releases");
	http("PUT", P("/locks/%s%s", n, "?owner=a2&ttl_ms=300"), NULL, &r);
	t2 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(t2 > t1, "tokens rise while the counter lives: %lld then %lld", t1, t2);
	CHECK(lock_release(NULL, n, "a2") == 200, "a2 releases");
	CHECK(WAIT_FOR(rcmd_int("EXISTS redisson_lock_token:{%s}", n) == 0, 3000),
	      "the counter is gone once the lease it granted is over");
	CHECK(rcmd_int("EXISTS %s", n) == 0, "and so is the lock");
	http("PUT", P("/locks/%s%s", n, "?owner=b&ttl_ms=300"), NULL, &r);
	CHECK_STATUS(r, 200, "acquire again");
	t3 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(t3 > t2, "the next token is still larger: %lld after %lld", t3, t2);
}

TEST(release_distinguishes_not_held_and_not_owner)
{
	const char *n = lockname("rel");
	struct http_resp r;

	http("DELETE", P("/locks/%s%s", n, "?owner=a"), NULL, &r);
	CHECK_ERROR(r, 409, "not_held", "release of a free lock");
	http_free(&r);
	http("PUT", P("/locks/%s%s", n, "?owner=a"), NULL, &r);
	http_free(&r);
	http("DELETE", P("/locks/%s%s", n, "?owner=b"), NULL, &r);
	CHECK_ERROR(r, 409, "not_owner", "release by another owner");
	http_free(&r);
	CHECK(rcmd_int("HGET %s a", n) == 1, "the holder still holds it after a foreign release");
	http("DELETE", P("/locks/%s%s", n, NULL), NULL, &r);
	CHECK_ERROR(r, 400, "invalid_argument", "release without owner or force");
	http_free(&r);
}

/* The commands a request on a Redis of its own ran (FCALL and those in
 * it); minus the status it answered when that is not status. */
static long long commands_of(struct redis_srv *rs, struct dlockd_srv *d, const char *method,
			     const char *path, int status)
{
	struct http_resp r;
	int got;

	freeReplyObject(rcmd_on(rs, "CONFIG RESETSTAT"));
	http_on(d->base, method, path, NULL, &r);
	got = (int)r.status;
	http_free(&r);
	return got == status ? redis_commands_run(rs) : -got;
}

/* What an uncontended cycle of each kind costs Redis, counted on a Redis
 * of its own: each call's FCALL and the commands in it
 * (docs/internals/architecture.md lists what each command pays for). A
 * release asks the lock's PTTL before it reads its hash: a hash without a
 * TTL is refused at once, however big (its HGETALL would hold Redis up). */
TEST(a_lock_cycle_of_each_kind_costs_redis_the_commands_the_docs_list)
{
	static const struct {
		const char *path;
		long long acquire, release;
	} kinds[] = {
		{ "/locks/%s", 10, 7 },
		{ "/fairlocks/%s", 11, 8 },
		{ "/rwlocks/%s/write", 11, 7 },
		{ "/rwlocks/%s/read", 12, 8 },
	};
	struct redis_srv rs;
	struct dlockd_srv d;
	const char *n = lockname("cost");
	char p[300], q[300], base[200];
	long long acquire, release;

	memset(&rs, 0, sizeof(rs));
	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "a Redis and a dlockd of the test's own");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		snprintf(base, sizeof(base), kinds[k].path, n);
		snprintf(p, sizeof(p), "%s?owner=o&ttl_ms=30000", base);
		snprintf(q, sizeof(q), "%s?owner=o", base);
		/* the first calls load the library */
		CHECK(commands_of(&rs, &d, "PUT", p, 200) > 0 &&
		      commands_of(&rs, &d, "DELETE", q, 200) > 0, "%s: a first cycle", base);
		acquire = commands_of(&rs, &d, "PUT", p, 200);
		release = commands_of(&rs, &d, "DELETE", q, 200);
		CHECK(acquire == kinds[k].acquire, "%s: %lld commands for the acquire; want %lld",
		      base, acquire, kinds[k].acquire);
		CHECK(release == kinds[k].release, "%s: %lld commands for the release; want %lld",
		      base, release, kinds[k].release);
	}
	/* an application's big hash, without a TTL, with the owner's field */
	freeReplyObject(rcmd_on(&rs, "EVAL %s 1 %s", "for i = 1, 2000 do "
				"redis.call('hset', KEYS[1], 'f' .. i, i) end "
				"redis.call('hset', KEYS[1], 'o', 1)", n));
	snprintf(p, sizeof(p), "/locks/%s?owner=o", n);
	CHECK(commands_of(&rs, &d, "DELETE", p, 409) > 0, "its release is refused");
	CHECK(redis_cmdstat(&rs, "hgetall", "calls") == 0, "without reading the hash");
	CHECK(rcmd_int_on(&rs, "HLEN %s", n) == 2001, "which is left whole");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

TEST(force_release_frees_any_holder_and_wakes_a_waiter)
{
	const char *n = lockname("force");
	struct http_resp r;
	struct bg w;
	char p2[512];

	http("PUT", P("/locks/%s%s", n, "?owner=a&ttl_ms=60000"), NULL, &r);
	http_free(&r);
	snprintf(p2, sizeof(p2), "/locks/%s?owner=b&wait_ms=20000", n);
	bg_start(&w, "PUT", p2, NULL);
	CHECK(wait_waiters(NULL, 1, 5000), "waiter registered");
	http("DELETE", P("/locks/%s%s", n, "?force=true"), NULL, &r);
	CHECK_STATUS(r, 200, "force release");
	CHECK(json_bool(&r, "released") == 1, "it was held: %s", r.body);
	http_free(&r);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiter gets the lock after a force release");
	CHECK(!strcmp(json_str(&w.r, "owner"), "b"), "owner b");
	http_free(&w.r);
	http("DELETE", P("/locks/%s%s", n, "?force=true"), NULL, &r);
	CHECK(json_bool(&r, "released") == 1, "b's hold is forced too");
	http_free(&r);
	http("DELETE", P("/locks/%s%s", n, "?force=true"), NULL, &r);
	CHECK_STATUS(r, 200, "force release of a free lock");
	CHECK(json_bool(&r, "released") == 0, "nothing was held: %s", r.body);
	http_free(&r);
}

TEST(heartbeat_renews_only_while_held)
{
	const char *n = lockname("hb");
	struct http_resp r;

	http("PUT", P("/locks/%s%s", n, "?owner=a&ttl_ms=1000"), NULL, &r);
	http_free(&r);
	http("POST", P("/locks/%s/heartbeat%s", n, NULL), "{\"owner\":\"a\",\"ttl_ms\":60000}", &r);
	CHECK_STATUS(r, 200, "heartbeat by the holder");
	CHECK(json_int(&r, "ttl_ms") <= 60000 && json_int(&r, "ttl_ms") > 59000,
	      "new lease echoed: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("PTTL %s", n) > 59000, "lease renewed in Redis");
	http("POST", P("/locks/%s/heartbeat%s", n, "?owner=b"), NULL, &r);
	CHECK_ERROR(r, 409, "not_owner", "heartbeat by another owner");
	http_free(&r);
	http("POST", P("/locks/%s/heartbeat%s", n, NULL), NULL, &r);
	CHECK_ERROR(r, 400, "invalid_argument", "heartbeat without owner");
	http_free(&r);

	/* lose the lease */
	http("PUT", P("/locks/%s%s", n, "?owner=a&ttl_ms=200"), NULL, &r);
	http_free(&r);
	CHECK(rcmd_int("PEXPIRE %s 150", n) == 1, "shorten the lease");
	CHECK(WAIT_FOR(rcmd_int("EXISTS %s", n) == 0, 3000), "the lease runs out");
	http("POST", P("/locks/%s/heartbeat%s", n, "?owner=a"), NULL, &r);
	CHECK_ERROR(r, 409, "not_held", "heartbeat after the lease ran out");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "a heartbeat never re-creates a lock");
}

TEST(status_with_and_without_owner)
{
	const char *n = lockname("st");
	struct http_resp r;

	http("GET", P("/locks/%s%s", n, NULL), NULL, &r);
	CHECK_STATUS(r, 200, "status of a free lock");
	CHECK(json_bool(&r, "locked") == 0 && json_int(&r, "ttl_ms") == 0, "free: %s", r.body);
	CHECK(!json_object_get(r.json, "holds") && !json_object_get(r.json, "held"),
	      "no holds/held without owner: %s", r.body);
	http_free(&r);
	http("PUT", P("/locks/%s%s", n, "?owner=a&ttl_ms=5000"), NULL, &r);
	http_free(&r);
	http("GET", P("/locks/%s%s", n, NULL), NULL, &r);
	CHECK(json_bool(&r, "locked") == 1 && json_int(&r, "ttl_ms") > 4000 &&
	      json_int(&r, "ttl_ms") <= 5000, "held: %s", r.body);
	http_free(&r);
	http("GET", P("/locks/%s%s", n, "?owner=a"), NULL, &r);
	CHECK(json_bool(&r, "held") == 1 && json_int(&r, "holds") == 1, "held by a: %s", r.body);
	http_free(&r);
	http("GET", P("/locks/%s%s", n, "?owner=b"), NULL, &r);
	CHECK(json_bool(&r, "held") == 0 && json_int(&r, "holds") == 0 &&
	      json_bool(&r, "locked") == 1, "not held by b: %s", r.body);
	http_free(&r);
}

TEST(health_and_readiness)
{
	struct http_resp r;

	http("GET", "/healthz", NULL, &r);
	CHECK_STATUS(r, 200, "healthz");
	http_free(&r);
	http("GET", "/readyz", NULL, &r);
	CHECK_STATUS(r, 200, "readyz with Redis up");
	http_free(&r);
	http("GET", "/metrics", NULL, &r);
	CHECK_STATUS(r, 200, "metrics");
	CHECK(strstr(r.body, "dlockd_lock_operations_total"), "metrics lists lock operations");
	http_free(&r);
}

/* Redis' clock in microseconds. */
static long long redis_now_us(void)
{
	redisReply *t = rcmd("TIME");
	long long us = atoll(t->element[0]->str) * 1000000 + atoll(t->element[1]->str);

	freeReplyObject(t);
	return us;
}

/* A fresh holding of a free lock SETs the fencing counter with its own
 * lease (the longer life it had was of holdings that are over: no PTTL is
 * read for it). Tokens still only rise: after a long holding, a short one,
 * and the counter gone with it, the next token is above both and not
 * below Redis' clock, for every kind. */
TEST(fencing_tokens_rise_when_a_short_holding_shortens_the_counter)
{
	static const char *const kinds[][3] = {
		{ "locks", "", "" }, { "fairlocks", "", "" }, { "rwlocks", "/write", "" },
		{ "rwlocks", "/read", "" }, { "semaphores", "", "&limit=2" },
	};
	struct http_resp r;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *n = lockname("short"), *res = kinds[i][0], *side = kinds[i][1];
		const char *extra = kinds[i][2];
		long long prev = 0, clock_us = 0;
		char p[512];

		for (int k = 0; k < 3; k++) {
			/* 10 min, then 300 ms, then after the counter is gone */
			snprintf(p, sizeof(p), "/%s/%s%s?owner=o%d&ttl_ms=%d%s", res, n, side, k,
				 k == 0 ? 600000 : 300, extra);
			if (k == 2) {
				CHECK(WAIT_FOR(rcmd_int("EXISTS redisson_lock_token:{%s}", n) == 0, 5000),
				      "%s%s: the counter went with the short holding", res, side);
				clock_us = redis_now_us();
			}
			http("PUT", p, NULL, &r);
			CHECK_STATUS(r, 200, p);
			CHECK(json_int(&r, "fencing_token") > prev && json_int(&r, "fencing_token") >= clock_us,
			      "%s: token %lld after %lld (Redis' clock %lld)", p,
			      json_int(&r, "fencing_token"), prev, clock_us);
			prev = json_int(&r, "fencing_token");
			http_free(&r);
			if (k == 1)
				CHECK(rcmd_int("PTTL redisson_lock_token:{%s}", n) <= 300,
				      "%s%s: the counter lives as long as the one holding", res, side);
			snprintf(p, sizeof(p), "/%s/%s%s?owner=o%d", res, n, side, k);
			CHECK(status_of(NULL, "DELETE", "%s", p) == 200, "%s: released", p);
		}
	}
}
