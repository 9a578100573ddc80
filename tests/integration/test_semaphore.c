/* test_semaphore.c -- /semaphores/{name}: at most `limit` permits at once,
 * one per owner, each expiring at its own lease end, in Redisson's
 * RPermitExpirableSemaphore layout. The Redisson client is played with raw
 * Redis commands and scripts doing what RedissonPermitExpirableSemaphore's
 * do (count N, permits {N}:timeout, channel redisson_sc:{N}). */
#include "../harness/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Redisson's tryAcquire of ids ARGV[6..] (reclaiming expired permits
 * first): KEYS N, {N}:timeout, redisson_sc:{N}; ARGV count, timeoutDate,
 * now, no-expiry score, publish command, ids. "OK", ":<nearest>" or nil. */
static const char rs_acquire[] =
	"local ex = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]) "
	"if #ex > 0 then redis.call('zrem', KEYS[2], unpack(ex)) "
	"  local v = redis.call('incrby', KEYS[1], #ex) "
	"  if tonumber(v) > 0 then redis.call(ARGV[5], KEYS[3], v) end end "
	"local v = redis.call('get', KEYS[1]) "
	"if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then "
	"  redis.call('decrby', KEYS[1], ARGV[1]) "
	"  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end "
	"  local ttl = redis.call('pttl', KEYS[1]) "
	"  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end "
	"  return 'OK' end "
	"local n = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES') "
	"if n[1] ~= nil and n[2] ~= ARGV[4] then return ':' .. tostring(n[2]) end "
	"return nil";

/* Redisson's tryRelease of one id: KEYS N, redisson_sc:{N}, {N}:timeout;
 * ARGV id, 1, now, publish command. 1 released, 0 not. */
static const char rs_release[] =
	"local e = redis.call('zscore', KEYS[3], ARGV[1]) "
	"local removed = redis.call('zrem', KEYS[3], ARGV[1]) "
	"if tonumber(removed) ~= 1 then return 0 end "
	"local v = redis.call('incrby', KEYS[1], ARGV[2]) "
	"redis.call(ARGV[4], KEYS[2], v) "
	"if tonumber(e) <= tonumber(ARGV[3]) then return 0 end "
	"return 1";

#define RS_ID "\x8f\x01\xa2\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\x0f"

static long put_sem(const char *n, const char *owner, const char *extra, struct http_resp *r)
{
	char p[600];

	snprintf(p, sizeof(p), "/semaphores/%s?owner=%s%s", n, owner, extra);
	return http("PUT", p, NULL, r);
}

static long del_sem(const char *n, const char *owner)
{
	char p[600];
	struct http_resp r;
	long s;

	snprintf(p, sizeof(p), "/semaphores/%s?owner=%s", n, owner);
	http("DELETE", p, NULL, &r);
	s = r.status;
	http_free(&r);
	return s;
}

TEST(semaphore_grants_up_to_its_limit_one_permit_per_owner)
{
	const char *n = lockname("sem");
	struct http_resp a, b, c, r;
	char p[600];

	put_sem(n, "w1", "&limit=2&ttl_ms=30000&value=10.0.0.1%3A8080", &a);
	CHECK_STATUS(a, 200, "first permit");
	CHECK(json_int(&a, "limit") == 2 && json_int(&a, "ttl_ms") > 29000 &&
	      json_int(&a, "fencing_token") > 0 && !strcmp(json_str(&a, "owner"), "w1"),
	      "its answer: %s", a.body);
	put_sem(n, "w2", "&limit=2&ttl_ms=30000", &b);
	CHECK_STATUS(b, 200, "second permit");
	CHECK(json_int(&b, "fencing_token") > json_int(&a, "fencing_token"),
	      "tokens grow: %s then %s", a.body, b.body);
	put_sem(n, "w3", "&limit=2&ttl_ms=30000", &c);
	CHECK_ERROR(c, 409, "locked", "a third owner at the limit");
	CHECK(c.retry_after[0] && atoi(c.retry_after) >= 29, "Retry-After '%s'", c.retry_after);
	http_free(&c);

	/* a repeat is the same permit, same token, and may change the value */
	put_sem(n, "w1", "&limit=2&ttl_ms=30000&value=10.0.0.2%3A8080", &r);
	CHECK_STATUS(r, 200, "a holder's repeat");
	CHECK(json_int(&r, "fencing_token") == json_int(&a, "fencing_token"), "same token: %s",
	      r.body);
	http_free(&r);
	CHECK(rcmd_int("GET %s", n) == 0 && rcmd_int("ZCARD {%s}:timeout", n) == 2,
	      "Redisson's layout: N free, one zset member per permit");

	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http("GET", p, NULL, &r);
	CHECK_STATUS(r, 200, "status");
	CHECK(json_int(&r, "limit") == 2 && json_int(&r, "available") == 0 &&
	      json_int(&r, "held") == 2 && json_int(&r, "waiting") == 0, "counts: %s", r.body);
	CHECK(strstr(r.body, "\"value\": \"10.0.0.2:8080\"") ||
	      strstr(r.body, "\"value\":\"10.0.0.2:8080\""), "the new value: %s", r.body);
	http_free(&r);

	CHECK(del_sem(n, "w1") == 200, "release");
	CHECK(del_sem(n, "w1") == 409, "a second release: not held");
	put_sem(n, "w3", "&limit=2&ttl_ms=30000", &c);
	CHECK_STATUS(c, 200, "the freed permit");
	CHECK(json_int(&c, "fencing_token") > json_int(&b, "fencing_token"), "a newer token");
	http_free(&a);
	http_free(&b);
	http_free(&c);
	del_sem(n, "w2");
	del_sem(n, "w3");
}

TEST(semaphore_limit_mismatch_changes_nothing_until_an_admin_changes_it)
{
	const char *n = lockname("semlim");
	double mismatches = metric_value(&H_dlockd, "dlockd_lock_operations_total{kind=\"semaphore\","
					 "op=\"acquire\",result=\"limit_mismatch\"}");
	struct http_resp r;
	char p[600];

	put_sem(n, "w1", "&limit=3&ttl_ms=30000", &r);
	CHECK_STATUS(r, 200, "made with limit 3");
	http_free(&r);
	put_sem(n, "w2", "&limit=4&ttl_ms=30000", &r);
	CHECK_ERROR(r, 409, "limit_mismatch", "another limit");
	CHECK(json_int(&r, "limit") == 3, "names the limit in force: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("GET %s", n) == 2 && rcmd_int("ZCARD {%s}:timeout", n) == 1,
	      "nothing changed in Redis");
	CHECK(metric_value(&H_dlockd, "dlockd_lock_operations_total{kind=\"semaphore\","
			   "op=\"acquire\",result=\"limit_mismatch\"}") == mismatches + 1,
	      "counted under kind semaphore, result limit_mismatch");

	snprintf(p, sizeof(p), "/semaphores/%s/limit?limit=4", n);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "the limit changed");
	CHECK(json_int(&r, "limit") == 4 && json_int(&r, "available") == 3 &&
	      json_int(&r, "previous_limit") == 3, "its answer: %s", r.body);
	http_free(&r);
	put_sem(n, "w2", "&limit=4&ttl_ms=30000", &r);
	CHECK_STATUS(r, 200, "the new limit is in force");
	http_free(&r);
	del_sem(n, "w1");
	del_sem(n, "w2");
}

TEST(semaphore_bad_input_and_other_kinds_change_nothing)
{
	const char *n = lockname("sembad");
	static const char *const bad[] = { "&limit=0", "&limit=10001", "&limit=x", "",
					   "&limit=2&ttl_ms=-1", "&limit=2&ttl_ms=999999999999",
					   "&limit=2&reentrant=true", "&limit=2&value=%FF" };
	struct http_resp r;
	char big[1100], p[1400];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put_sem(n, "w1", bad[i], &r);
		CHECK_ERROR(r, 400, "invalid_argument", bad[i]);
		http_free(&r);
	}
	memset(big, 'v', 1025);
	big[1025] = '\0';
	snprintf(p, sizeof(p), "{\"owner\": \"w1\", \"limit\": 2, \"value\": \"%s\"}", big);
	{
		char path[600];

		snprintf(path, sizeof(path), "/semaphores/%s", n);
		http("PUT", path, p, &r);
	}
	CHECK_ERROR(r, 400, "invalid_argument", "a value over 1 KiB");
	http_free(&r);
	{
		char path[600];

		snprintf(path, sizeof(path), "/semaphores/%s", n);
		http("PUT", path, "{\"owner\": \"w1\", \"limit\": \"3\"}", &r);
	}
	CHECK_ERROR(r, 400, "invalid_argument", "a limit in quotes");
	CHECK(strstr(r.body, "limit must be an integer") && !strstr(r.body, "milliseconds"),
	      "a count, not milliseconds: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s {%s}:timeout", n, n) == 0, "nothing written");

	/* kinds never mix on one name */
	CHECK(lock_hold(NULL, n, "L", 30000), "a lock on the name");
	put_sem(n, "w1", "&limit=2", &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a semaphore on a lock's name");
	http_free(&r);
	lock_release(NULL, n, "L");
	put_sem(n, "w1", "&limit=2", &r);
	CHECK_STATUS(r, 200, "the semaphore");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=L", n);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a lock on a semaphore's name");
	CHECK(strstr(r.body, "a semaphore's count"), "the message names what may be there: %s",
	      r.body);
	http_free(&r);
	del_sem(n, "w1");
}

TEST(semaphore_release_wakes_a_waiter_at_once)
{
	const char *n = lockname("semwake");
	char p[600], chan[300];
	struct http_resp r;
	struct bg w;
	long long s0;
	int64_t at;

	put_sem(n, "h", "&limit=1&ttl_ms=60000", &r);
	CHECK_STATUS(r, 200, "holder");
	http_free(&r);
	snprintf(chan, sizeof(chan), "redisson_sc:{%s}", n);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=w&limit=1&wait_ms=30000", n);
	s0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, s0, 5000, "%s", chan), "waiter parked");
	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http("GET", p, NULL, &r);
	CHECK(json_int(&r, "waiting") == 1, "GET counts the waiter: %s", r.body);
	http_free(&r);
	CHECK(del_sem(n, "h") == 200, "release");
	at = mono_ms();
	CHECK_GRANTED_WITHIN(w, at, 500, "the waiter gets the permit");
	http_free(&w.r);
	del_sem(n, "w");
}

static long long sem_waiting(const char *n)
{
	char p[600];
	struct http_resp r;
	long long w;

	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http("GET", p, NULL, &r);
	w = r.status == 200 ? json_int(&r, "waiting") : -1;
	http_free(&r);
	return w;
}

/* waiting counts who waits now: a waiter that gave up is not counted a
 * moment later, and one that waits longer than --queue-ttl-ms (its
 * dlockd's: 300 here) still is, however long it waits. */
TEST(semaphore_waiting_counts_the_waiters_still_waiting)
{
	static const char *const flags[] = { "--queue-ttl-ms", "300", NULL };
	const char *n = lockname("semwaiting");
	struct dlockd_srv d;
	char p[600];
	struct http_resp r;
	struct bg w[3];
	int64_t t0;

	put_sem(n, "h", "&limit=1&ttl_ms=60000", &r);
	CHECK_STATUS(r, 200, "the holder");
	http_free(&r);
	CHECK(dlockd_start_on(&d, &H_redis, flags) == 0, "start a dlockd with --queue-ttl-ms 300");
	snprintf(p, sizeof(p), "/semaphores/%s?owner=w&limit=1&wait_ms=6000", n);
	t0 = mono_ms();
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "/semaphores/%s?owner=w%d&limit=1&wait_ms=%d", n, i,
			 6000 * slow_factor());
		bg_start_on(&w[i], d.base, "PUT", p, NULL);
	}
	CHECK(WAIT_FOR(sem_waiting(n) == 3, 3000), "the three are counted (%lld)", sem_waiting(n));
	/* one more gives up after 300 ms */
	put_sem(n, "quitter", "&limit=1&wait_ms=300", &r);
	CHECK_STATUS(r, 409, "the quitter gives up");
	http_free(&r);
	CHECK(WAIT_FOR(sem_waiting(n) == 3, 2000), "the quitter is not counted once it left (%lld)",
	      sem_waiting(n));
	while (mono_ms() - t0 < 3000 * slow_factor()) {
		CHECK(sem_waiting(n) == 3, "still three waiting at %lld ms, ten times the place's "
		      "life: %lld", (long long)(mono_ms() - t0), sem_waiting(n));
		sleep_ms(250);
	}
	for (int i = 0; i < 3; i++) {
		bg_join(&w[i]);
		CHECK_STATUS(w[i].r, 409, "the waiter's wait ends");
		http_free(&w[i].r);
	}
	CHECK(WAIT_FOR(sem_waiting(n) == 0, 2000), "nobody waits (%lld)", sem_waiting(n));
	CHECK(del_sem(n, "h") == 200, "release");
	dlockd_stop(&d, 5000);
}

TEST(semaphore_dead_holders_permit_returns_at_its_lease_end)
{
	const char *n = lockname("semdead");
	char p[600], chan[300];
	struct http_resp r;
	struct bg w;
	long long s0;
	int64_t start, end;

	put_sem(n, "long", "&limit=2&ttl_ms=60000", &r);
	http_free(&r);
	start = mono_ms();
	put_sem(n, "dies", "&limit=2&ttl_ms=1500", &r);
	CHECK_STATUS(r, 200, "a holder that will never release");
	http_free(&r);
	end = start + 1500;
	snprintf(chan, sizeof(chan), "redisson_sc:{%s}", n);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=w&limit=2&wait_ms=30000", n);
	s0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, s0, 5000, "%s", chan), "waiter parked");
	/* nothing is published at a lease end: only the lease-end timer wakes it */
	CHECK_GRANTED_WITHIN(w, end, 500, "served at the dead holder's lease end");
	CHECK(w.done_ms >= end - 50, "not before it (%lld ms early)", (long long)(end - w.done_ms));
	http_free(&w.r);
	del_sem(n, "w");
	del_sem(n, "long");
}

TEST(semaphore_forced_release_wakes_as_many_waiters_as_permits_freed)
{
	const char *n = lockname("semforce");
	char p[600], chan[300];
	struct http_resp r;
	struct bg w[3];
	long long s0;
	int64_t at;
	int granted = 0, still = 0;

	put_sem(n, "a", "&limit=2&ttl_ms=60000", &r);
	http_free(&r);
	put_sem(n, "b", "&limit=2&ttl_ms=60000", &r);
	http_free(&r);
	snprintf(chan, sizeof(chan), "redisson_sc:{%s}", n);
	s0 = redis_scripts_called();
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "/semaphores/%s?owner=w%d&limit=2&wait_ms=%d", n, i,
			 4000 * slow_factor());
		bg_start(&w[i], "PUT", p, NULL);
	}
	CHECK(wait_parked(NULL, 3, s0, 5000, "%s", chan), "three waiters parked");
	snprintf(p, sizeof(p), "/semaphores/%s?force=true", n);
	http("DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "forced release");
	CHECK(json_bool(&r, "released") == 1, "%s", r.body);
	http_free(&r);
	at = mono_ms();
	for (int i = 0; i < 3; i++) {
		bg_join(&w[i]);
		if (w[i].r.status == 200 && w[i].done_ms - at < 1000 * slow_factor())
			granted++;
		else if (w[i].r.status == 409)
			still++;
		http_free(&w[i].r);
	}
	CHECK(granted == 2 && still == 1, "two served at once, one still waits to its end "
	      "(%d served, %d refused)", granted, still);
	for (int i = 0; i < 3; i++) {
		char o[16];

		snprintf(o, sizeof(o), "w%d", i);
		del_sem(n, o);
	}
}

/* ----- 20 contenders on 2 dlockd: never more than the limit at once ----- */

#define CONTENDERS 20
#define SEM_LIMIT 3

struct contend {
	const char *name;
	const char *base;
	int id;
	int rounds;
	_Atomic int *inside, *most, *grants, *errors;
};

static void *contender(void *arg)
{
	struct contend *c = arg;
	char p[600];

	for (int i = 0; i < c->rounds; i++) {
		struct http_resp r;
		int now, most;

		snprintf(p, sizeof(p), "/semaphores/%s?owner=c%d&limit=%d&ttl_ms=20000&wait_ms=20000",
			 c->name, c->id, SEM_LIMIT);
		http_on(c->base, "PUT", p, NULL, &r);
		if (r.status != 200) {
			atomic_fetch_add(c->errors, 1);
			http_free(&r);
			continue;
		}
		http_free(&r);
		now = atomic_fetch_add(c->inside, 1) + 1;
		most = atomic_load(c->most);
		while (now > most && !atomic_compare_exchange_weak(c->most, &most, now))
			;
		atomic_fetch_add(c->grants, 1);
		sleep_ms(5);	/* the hold itself: others must wait meanwhile */
		atomic_fetch_sub(c->inside, 1);
		snprintf(p, sizeof(p), "/semaphores/%s?owner=c%d", c->name, c->id);
		http_on(c->base, "DELETE", p, NULL, &r);
		if (r.status != 200)
			atomic_fetch_add(c->errors, 1);
		http_free(&r);
	}
	return NULL;
}

TEST(semaphore_limit_holds_under_20_contenders_on_2_dlockd)
{
	const char *n = lockname("semhot");
	struct dlockd_srv d2;
	struct contend c[CONTENDERS];
	pthread_t t[CONTENDERS];
	_Atomic int inside = 0, most = 0, grants = 0, errors = 0;

	CHECK(dlockd_start_on(&d2, &H_redis, NULL) == 0, "a second dlockd");
	for (int i = 0; i < CONTENDERS; i++) {
		c[i] = (struct contend){ .name = n, .base = i % 2 ? d2.base : H_dlockd.base,
					 .id = i, .rounds = 5, .inside = &inside, .most = &most,
					 .grants = &grants, .errors = &errors };
		pthread_create(&t[i], NULL, contender, &c[i]);
	}
	for (int i = 0; i < CONTENDERS; i++)
		pthread_join(t[i], NULL);
	dlockd_stop(&d2, 5000);
	CHECK(atomic_load(&most) <= SEM_LIMIT, "at most %d at once, saw %d", SEM_LIMIT,
	      atomic_load(&most));
	CHECK(atomic_load(&most) == SEM_LIMIT, "the limit was reached (%d)", atomic_load(&most));
	CHECK(atomic_load(&errors) == 0 && atomic_load(&grants) == CONTENDERS * 5,
	      "every round granted and released (%d grants, %d errors)", atomic_load(&grants),
	      atomic_load(&errors));
	CHECK(rcmd_int("GET %s", n) == SEM_LIMIT && rcmd_int("EXISTS {%s}:timeout", n) == 0,
	      "every permit back");
}

/* ----- Redisson ----- */

TEST(semaphore_shares_permits_with_redisson_both_ways)
{
	const char *n = lockname("semrs");
	char tkey[300], chan[300], p[600], ids[40];
	struct http_resp r;
	redisReply *rep;
	redisContext *sub = redis_client(NULL);
	struct timeval tv = { 3 * slow_factor(), 0 };
	struct bg w;
	long long s0;
	int64_t at;

	snprintf(tkey, sizeof(tkey), "{%s}:timeout", n);
	snprintf(chan, sizeof(chan), "redisson_sc:{%s}", n);
	/* Redisson's trySetPermits(2), then its tryAcquire(lease 60 s) */
	CHECK(rcmd_int("SETNX %s 2", n) == 1, "Redisson made the semaphore");
	rep = rcmd("EVAL %s 3 %s %s %s 1 %lld %lld 922337203685477 publish %b", rs_acquire, n, tkey,
		   chan, redis_time_ms(NULL) + 60000, redis_time_ms(NULL), RS_ID, (size_t)16);
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "OK"),
	      "Redisson's permit");
	freeReplyObject(rep);

	put_sem(n, "d1", "&limit=2&ttl_ms=30000", &r);
	CHECK_STATUS(r, 200, "dlockd takes the other permit");
	http_free(&r);
	put_sem(n, "d2", "&limit=2&ttl_ms=30000", &r);
	CHECK_ERROR(r, 409, "locked", "none left: Redisson's permit counts");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http("GET", p, NULL, &r);
	CHECK(strstr(r.body, "8f01a233445566778899aabbccddee0f") != NULL,
	      "Redisson's permit shown by its id: %s", r.body);
	http_free(&r);

	/* Redisson sees dlockd's permit: nothing free, told the nearest end */
	rep = rcmd("EVAL %s 3 %s %s %s 1 %lld %lld 922337203685477 publish %s", rs_acquire, n, tkey,
		   chan, redis_time_ms(NULL) + 60000, redis_time_ms(NULL), "other-id");
	CHECK(rep && rep->type == REDIS_REPLY_STRING && rep->str[0] == ':',
	      "Redisson waits for dlockd's permit");
	freeReplyObject(rep);

	/* Redisson's release wakes dlockd's waiter */
	snprintf(p, sizeof(p), "/semaphores/%s?owner=d2&limit=2&wait_ms=30000", n);
	s0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, s0, 5000, "%s", chan), "dlockd waiter parked");
	rep = rcmd("EVAL %s 3 %s %s %s %b 1 %lld publish", rs_release, n, chan, tkey, RS_ID,
		   (size_t)16, redis_time_ms(NULL));
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1, "Redisson releases");
	freeReplyObject(rep);
	at = mono_ms();
	CHECK_GRANTED_WITHIN(w, at, 500, "dlockd's waiter gets it");
	http_free(&w.r);

	/* dlockd's release is heard by Redisson's subscribers: a count */
	CHECK(sub, "a Redisson-like subscriber");
	rep = redisCommand(sub, "SUBSCRIBE %s", chan);
	freeReplyObject(rep);
	redisSetTimeout(sub, tv);
	CHECK(del_sem(n, "d1") == 200, "dlockd releases");
	rep = NULL;
	CHECK(redisGetReply(sub, (void **)&rep) == REDIS_OK && rep &&
	      rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
	      !strcmp(rep->element[2]->str, "1"), "Redisson hears \"1\" (one permit back)");
	if (rep)
		freeReplyObject(rep);
	redisFree(sub);
	snprintf(ids, sizeof(ids), "%s", "x");
	rep = rcmd("EVAL %s 3 %s %s %s 1 %lld %lld 922337203685477 publish %s", rs_acquire, n, tkey,
		   chan, redis_time_ms(NULL) + 60000, redis_time_ms(NULL), ids);
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "OK"),
	      "Redisson takes the permit dlockd gave back");
	freeReplyObject(rep);
	del_sem(n, "d2");
	(void)rcmd_int("DEL %s %s", n, tkey);
}

/* n made by hand as Redisson's layout has it: free permits free, permits
 * <owner>-0.. of count count, leases ending at now + first_ms, + step_ms
 * each. */
static bool sem_by_hand(const char *n, int free_n, int count, const char *owner,
			long long first_ms, long long step_ms)
{
	long long now = redis_time_ms(NULL);
	bool ok = rcmd_int("SET %s %d", n, free_n) == 0 || true;

	for (int i = 0; i < count && ok; i++) {
		char m[200];

		snprintf(m, sizeof(m), "%s-%d", owner, i);
		redisReply *r = rcmd("ZADD {%s}:timeout %lld %s", n, now + first_ms + i * step_ms, m);

		ok = r && r->type == REDIS_REPLY_INTEGER;
		if (r)
			freeReplyObject(r);
	}
	return ok;
}

/* The listing shows a semaphore as GET does: the 100 permits ending first
 * however many are out (none cut by what an earlier name in the same
 * batch used up), the longest lease left, and a limit that counts permits
 * past their lease end (still out of N until a call takes them back). */
TEST(semaphore_listing_shows_every_permit_its_limit_and_longest_lease)
{
	const char *pre = lockname("semlisting");
	char a[200], b[200], c[200], q[300], why[256] = "";
	json_t *locks, *e;
	int pages = 0, dups = 0;

	snprintf(a, sizeof(a), "%s-a", pre);
	snprintf(b, sizeof(b), "%s-b", pre);
	snprintf(c, sizeof(c), "%s-c", pre);
	/* a: 601 permits, the last one's lease an hour */
	CHECK(sem_by_hand(a, 9, 601, "pa", 600000, 5000), "semaphore a by hand");
	/* b: 100 permits, listed after a: no budget of a batch cuts it */
	CHECK(sem_by_hand(b, 0, 100, "pb", 600000, 0), "semaphore b by hand");
	/* c: limit 3, one permit out, one past its lease end */
	CHECK(sem_by_hand(c, 1, 1, "live", 600000, 0) && sem_by_hand(c, 1, 1, "dead", -5000, 0),
	      "semaphore c by hand");
	snprintf(q, sizeof(q), "prefix=%s", pre);
	locks = list_locks_all(NULL, NULL, q, 100, &pages, &dups, why, sizeof(why));
	CHECK(locks && json_object_size(locks) == 3, "all three listed (%s)", why);
	e = json_object_get(locks, a);
	CHECK(e && json_array_size(json_object_get(e, "holders")) == 100 &&
	      json_integer_value(json_object_get(e, "limit")) == 610 &&
	      json_integer_value(json_object_get(e, "ttl_ms")) > 3000000,
	      "a: 100 holders (%zu), limit 610 (%lld), the longest lease ~3600000 ms (%lld)",
	      json_array_size(json_object_get(e, "holders")),
	      (long long)json_integer_value(json_object_get(e, "limit")),
	      (long long)json_integer_value(json_object_get(e, "ttl_ms")));
	e = json_object_get(locks, b);
	CHECK(e && json_array_size(json_object_get(e, "holders")) == 100,
	      "b: 100 holders (%zu)", json_array_size(json_object_get(e, "holders")));
	e = json_object_get(locks, c);
	CHECK(e && json_array_size(json_object_get(e, "holders")) == 1 &&
	      json_integer_value(json_object_get(e, "limit")) == 3,
	      "c: one holder, limit 3 as GET says (%lld)",
	      (long long)json_integer_value(json_object_get(e, "limit")));
	json_decref(locks);
	CHECK(rcmd_int("DEL %s {%s}:timeout %s {%s}:timeout %s {%s}:timeout", a, a, b, b, c, c) == 6,
	      "clean up");
}

/* A permit scored below 0 (written by hand: no client makes one) is past
 * its lease end like any other: taken back, not counted as held, and no
 * waiter spins on it. */
TEST(semaphore_permit_scored_below_zero_is_taken_back)
{
	const char *n = lockname("semneg");
	char p[600];
	struct http_resp r;

	CHECK(sem_by_hand(n, 1, 1, "ghost", -redis_time_ms(NULL) - 5, 0), "a permit scored -5");
	put_sem(n, "a", "&limit=2&ttl_ms=60000", &r);
	CHECK_STATUS(r, 200, "a takes the free permit");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http("GET", p, NULL, &r);
	CHECK(r.status == 200 && json_int(&r, "held") == 1 && json_int(&r, "available") == 1,
	      "the ghost is not held: %s", r.body);
	http_free(&r);
	put_sem(n, "w", "&limit=2&ttl_ms=60000&wait_ms=2000", &r);
	CHECK_STATUS(r, 200, "w gets the ghost's permit at once");
	CHECK(r.ms < 1000.0 * slow_factor(), "at once: %.0f ms", r.ms);
	http_free(&r);
	CHECK(del_sem(n, "a") == 200 && del_sem(n, "w") == 200, "both release");
}

/* Past the 100 permits GET lists (those ending first), an owner whose
 * permit ends later still reads as holding it, and a permit given back
 * and another taken, neither listed, still move the index a watch waits
 * on. */
TEST(semaphore_past_100_permits_owner_and_index_stay_exact)
{
	const char *n = lockname("sem150");
	char p[600], extra[100];
	struct http_resp r;
	long long index;

	for (int i = 0; i < 150; i++) {
		char owner[32];

		snprintf(owner, sizeof(owner), "p%d", i);
		/* the older a permit, the longer its lease: the newest are listed */
		snprintf(extra, sizeof(extra), "&limit=200&ttl_ms=%d", 600000 - i * 100);
		put_sem(n, owner, extra, &r);
		CHECK_STATUS(r, 200, owner);
		http_free(&r);
	}
	put_sem(n, "late", "&limit=200&ttl_ms=900000", &r);
	CHECK_STATUS(r, 200, "late, whose lease ends last");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=late", n);
	http("GET", p, NULL, &r);
	CHECK(r.status == 200 && json_int(&r, "held") == 151 && json_bool(&r, "held_by_owner") == 1 &&
	      json_int(&r, "holds") == 1, "late holds one, listed or not: %s", r.body);
	index = json_int(&r, "index");
	http_free(&r);

	/* p0 (not listed) gives its permit back and fresh (not listed) takes one */
	CHECK(del_sem(n, "p0") == 200, "p0 releases");
	put_sem(n, "fresh", "&limit=200&ttl_ms=900000", &r);
	CHECK_STATUS(r, 200, "fresh takes one");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?index=%lld&wait_ms=3000", n, index);
	http("GET", p, NULL, &r);
	CHECK(r.status == 200 && json_bool(&r, "changed") == 1 && json_int(&r, "index") != index &&
	      r.ms < 2000, "the watch sees the change at once (%.0f ms): %s", r.ms, r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=p0", n);
	http("GET", p, NULL, &r);
	CHECK(r.status == 200 && json_bool(&r, "held_by_owner") == 0, "p0 holds none: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?force=true", n);
	http("DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "all given back");
	http_free(&r);
}

/* Setting the limit takes back at most 100 expired permits a call; with
 * 150 expired, the answer counted the 50 left as out: "available": -40
 * for a limit of 10 with none live (found by a probe). It is the limit
 * less the permits live; the count in Redis gets the rest back later. */
TEST(semaphore_limit_answer_counts_only_live_permits_past_100_expired)
{
	const char *n = lockname("sem-setexp");
	char p[300], owner[32];
	struct http_resp r;

	for (int i = 0; i < 150; i++) {
		snprintf(owner, sizeof(owner), "e%d", i);
		put_sem(n, owner, "&limit=150&ttl_ms=300", &r);
		CHECK_STATUS(r, 200, owner);
		http_free(&r);
	}
	put_sem(n, "live", "&limit=150&ttl_ms=60000", &r);
	CHECK_ERROR(r, 409, "locked", "all 150 out");
	http_free(&r);
	sleep_ms(600);
	snprintf(p, sizeof(p), "/semaphores/%s/limit?limit=10", n);
	http("PUT", p, NULL, &r);
	printf("# limit 150 -> 10 with 150 permits expired: %s\n", r.body);
	CHECK(r.status == 200 && json_int(&r, "limit") == 10 && json_int(&r, "available") == 10 &&
	      json_int(&r, "previous_limit") == 150, "its answer: %s", r.body);
	http_free(&r);
	for (int i = 0; i < 12; i++) {
		snprintf(owner, sizeof(owner), "n%d", i);
		put_sem(n, owner, "&limit=10&ttl_ms=60000", &r);
		CHECK(r.status == (i < 10 ? 200 : 409), "%s: %ld, want %d", owner, r.status,
		      i < 10 ? 200 : 409);
		http_free(&r);
	}
	snprintf(p, sizeof(p), "/semaphores/%s?force=true", n);
	http("DELETE", p, NULL, &r);
	http_free(&r);
}

TEST(semaphore_listed_and_watched_like_the_locks)
{
	const char *n = lockname("semlist");
	char p[600];
	struct http_resp r;
	struct bg w;
	json_t *page, *locks, *e = NULL;
	char why[256] = "";
	int pages = 0, dups = 0;
	long long index;
	int64_t at;

	put_sem(n, "w1", "&limit=3&ttl_ms=30000&value=here", &r);
	CHECK_STATUS(r, 200, "a permit");
	http_free(&r);
	snprintf(p, sizeof(p), "prefix=%s", n);
	page = list_locks_all(NULL, NULL, p, 100, &pages, &dups, why, sizeof(why));
	locks = page;
	CHECK(locks && json_object_size(locks) == 1, "listed once (%s)", why);
	e = json_object_get(locks, n);
	CHECK(e && !strcmp(json_string_value(json_object_get(e, "kind")), "semaphore") &&
	      json_integer_value(json_object_get(e, "limit")) == 3 &&
	      json_array_size(json_object_get(e, "holders")) == 1,
	      "as a semaphore with its limit and holder");
	json_decref(page);

	/* a watch hears the next permit taken */
	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http("GET", p, NULL, &r);
	index = json_int(&r, "index");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?index=%lld&wait_ms=20000", n, index);
	bg_start(&w, "GET", p, NULL);
	CHECK(WAIT_FOR(metric_value(&H_dlockd, "dlockd_watches") >= 1 &&
		       channel_subscribers(NULL, "dlockd_lock_state:{%s}", n) >= 1, 5000),
	      "the watch waits");
	put_sem(n, "w2", "&limit=3&ttl_ms=30000&value=there", &r);
	http_free(&r);
	at = mono_ms();
	CHECK_GRANTED_WITHIN(w, at, 1000, "the watch answers");
	CHECK(json_bool(&w.r, "changed") == 1 && strstr(w.r.body, "there"),
	      "with the new holder and its value: %s", w.r.body);
	http_free(&w.r);
	del_sem(n, "w1");
	del_sem(n, "w2");
}

/* ----- What one client piles up stays cheap for Redis ----- */

/* Pile ARGV[1] permits on semaphore KEYS[1] as Redisson clients would
 * (16-byte ids, KEYS[2] its {N}:timeout), the first ARGV[2] of them past
 * their lease end, the rest ending ARGV[3] ms after ARGV[4] (now, ms). */
static const char pile_permits[] =
	"redis.call('set', KEYS[1], 0) "
	"for i = 1, tonumber(ARGV[1]) do "
	"  local score = i <= tonumber(ARGV[2]) and 1 or tonumber(ARGV[4]) + tonumber(ARGV[3]) "
	"  redis.call('zadd', KEYS[2], score, string.format('%016x', i)) "
	"end return 1";

/* The longest script call (FCALL, EVALSHA, EVAL) Redis rs logged since its
 * SLOWLOG was reset, in µs. */
static long long slowest_script_us(const struct redis_srv *rs)
{
	redisReply *r = rcmd_on(rs, "SLOWLOG GET 100000");
	long long most = -1;

	for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		const redisReply *e = r->element[i], *argv;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 4)
			continue;
		argv = e->element[3];
		if (argv->type == REDIS_REPLY_ARRAY && argv->elements > 0 &&
		    is_script_command(argv->element[0]->str) &&
		    e->element[2]->integer > most)
			most = e->element[2]->integer;
	}
	if (r)
		freeReplyObject(r);
	return most;
}

TEST(semaphore_full_of_permits_costs_each_call_a_bounded_redis_time)
{
	static struct redis_srv rs;
	static struct dlockd_srv d;
	const char *n = lockname("sempile");
	char key[300], p[600];
	struct http_resp r;
	long long us[4];
	redisReply *rep;

	memset(&rs, 0, sizeof(rs));
	memset(&d, 0, sizeof(d));
	snprintf(rs.extra, sizeof(rs.extra), "--slowlog-log-slower-than 0 --slowlog-max-len 100000");
	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "a Redis that times every script");
	snprintf(key, sizeof(key), "{%s}:timeout", n);
	rep = rcmd_on(&rs, "EVAL %s 2 %s %s 10000 5000 600000 %lld", pile_permits, n, key,
		      (long long)time(NULL) * 1000);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER, "10000 permits, 5000 past their end");
	if (rep)
		freeReplyObject(rep);

	(void)rcmd_int_on(&rs, "SLOWLOG RESET");
	snprintf(p, sizeof(p), "/semaphores/%s?owner=w&limit=10000", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "an acquire that takes back expired permits");
	http_free(&r);
	us[0] = slowest_script_us(&rs);
	(void)rcmd_int_on(&rs, "SLOWLOG RESET");
	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http_on(d.base, "GET", p, NULL, &r);
	CHECK_STATUS(r, 200, "status");
	http_free(&r);
	us[1] = slowest_script_us(&rs);
	(void)rcmd_int_on(&rs, "SLOWLOG RESET");
	http_on(d.base, "GET", "/locks?limit=10", NULL, &r);
	CHECK_STATUS(r, 200, "listing");
	http_free(&r);
	us[2] = slowest_script_us(&rs);
	(void)rcmd_int_on(&rs, "SLOWLOG RESET");
	snprintf(p, sizeof(p), "/semaphores/%s?owner=w", n);
	http_on(d.base, "DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "release");
	http_free(&r);
	us[3] = slowest_script_us(&rs);
	printf("# semaphore with 10000 permits: acquire %lld us, status %lld us, listing %lld "
	       "us, release %lld us\n", us[0], us[1], us[2], us[3]);
	for (int i = 0; i < 4; i++)
		CHECK(us[i] >= 0 && us[i] < 20000LL * slow_factor(), "call %d took %lld us", i,
		      us[i]);
	redis_dlockd_stop(&rs, &d, 5000);
}

/* An owner whose permit ran out takes a new one: its old permit comes
 * back first, even behind many other expired permits (each call takes
 * back a bounded batch), so no permit is ever lost. */
TEST(semaphore_owner_whose_permit_ran_out_behind_many_gets_a_new_one_and_none_is_lost)
{
	const char *n = lockname("semlate");
	char key[300];
	struct http_resp r;
	redisReply *rep;

	snprintf(key, sizeof(key), "{%s}:timeout", n);
	/* 300 permits out, all past their end, "me" the latest of them */
	rep = rcmd("EVAL %s 2 %s %s 300 300 0 0", pile_permits, n, key);
	if (rep)
		freeReplyObject(rep);
	(void)rcmd_int("ZADD %s 2 me", key);
	(void)rcmd_int("SET %s 0", n);	/* 301 out, none free: the limit is 301 */
	put_sem(n, "me", "&limit=301&ttl_ms=30000", &r);
	CHECK_STATUS(r, 200, "the owner whose permit ran out takes one again");
	http_free(&r);
	CHECK(rcmd_int("GET %s", n) + rcmd_int("ZCARD %s", key) == 301,
	      "the limit stands: %lld free + %lld out", rcmd_int("GET %s", n),
	      rcmd_int("ZCARD %s", key));
	del_sem(n, "me");
	(void)rcmd_int("DEL %s %s", n, key);
}

/* A heartbeat renews the owner's permit; one that shortens it has the
 * waiters retried by the new end (nothing is published when it ends). */
TEST(semaphore_heartbeat_renews_and_a_shorter_lease_serves_a_waiter_by_its_end)
{
	const char *n = lockname("semhb");
	char p[600], chan[300];
	struct http_resp r;
	struct bg w;
	long long s0;
	int64_t end;

	put_sem(n, "h", "&limit=1&ttl_ms=2000", &r);
	CHECK_STATUS(r, 200, "a permit for 2 s");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s/heartbeat?owner=h&ttl_ms=60000", n);
	http("POST", p, NULL, &r);
	CHECK_STATUS(r, 200, "renewed");
	CHECK(json_int(&r, "ttl_ms") > 59000, "%s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s/heartbeat?owner=nobody", n);
	http("POST", p, NULL, &r);
	CHECK_ERROR(r, 409, "not_held", "a heartbeat of an owner without a permit");
	http_free(&r);

	snprintf(chan, sizeof(chan), "redisson_sc:{%s}", n);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=w&limit=1&wait_ms=30000", n);
	s0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, s0, 5000, "%s", chan), "waiter parked (the lease: 60 s)");
	snprintf(p, sizeof(p), "/semaphores/%s/heartbeat?owner=h&ttl_ms=1000", n);
	http("POST", p, NULL, &r);
	end = mono_ms() + 1000;
	CHECK_STATUS(r, 200, "the holder shortens its lease to 1 s, and dies");
	http_free(&r);
	CHECK_GRANTED_WITHIN(w, end, 500, "the waiter is served at the new end");
	http_free(&w.r);
	del_sem(n, "w");
}

/* Data that is not a semaphore's under its keys is refused untouched:
 * 409 wrong_kind, for an acquire, a status, a release and a limit change. */
TEST(semaphore_keys_holding_other_data_are_left_alone)
{
	static const char *const setup[] = { "SET %s notanumber", "SET {%s}:timeout x",
					     "HSET %s f v", "SET redisson_lock_token:{%s} x" };
	char p[600];

	for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++) {
		const char *n = lockname("semdata");
		struct http_resp r;
		redisReply *rep = rcmd(setup[i], n);

		if (rep)
			freeReplyObject(rep);
		put_sem(n, "w", "&limit=2", &r);
		CHECK_ERROR(r, 409, "wrong_kind", setup[i]);
		http_free(&r);
		snprintf(p, sizeof(p), "/semaphores/%s", n);
		http("GET", p, NULL, &r);
		CHECK(r.status == 409 || (i == 3 && r.status == 200), "%s: GET %ld", setup[i],
		      r.status);
		http_free(&r);
		snprintf(p, sizeof(p), "/semaphores/%s/limit?limit=3", n);
		http("PUT", p, NULL, &r);
		CHECK(r.status == 409 || (i == 3 && r.status == 200), "%s: limit %ld", setup[i],
		      r.status);
		http_free(&r);
		CHECK(rcmd_int("EXISTS {%s}:timeout", n) == (i == 1), "%s: no permit written",
		      setup[i]);
		(void)rcmd_int("DEL %s {%s}:timeout redisson_lock_token:{%s}", n, n, n);
	}
}

/* The holders' hash of a semaphore with no permit out: its check is the
 * grant's first write (the HSET of the new entry), so a hash of another
 * type is 409 wrong_kind with nothing written (no count, no permit), and
 * stale entries (their permits gone) are written over whole: the grant's
 * own token, no stale value, a hash that ends with the lease. */
TEST(semaphore_holders_hash_checked_by_the_grants_first_write)
{
	const char *n = lockname("semowners");
	struct http_resp r;
	redisReply *rep;
	long long token;

	(void)rcmd_int("SET dlockd_lock_owners:{%s} x", n);
	put_sem(n, "w", "&limit=2", &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a holders' hash of another type");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s {%s}:timeout redisson_lock_token:{%s}", n, n, n) == 0,
	      "nothing written");
	rep = rcmd("GET dlockd_lock_owners:{%s}", n);
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "x"), "the data is left");
	if (rep)
		freeReplyObject(rep);

	(void)rcmd_int("DEL dlockd_lock_owners:{%s}", n);
	(void)rcmd_int("HSET dlockd_lock_owners:{%s} w %s #w %s =w stale gone 3", n, "5 team-x",
		       "9 1 0 0");
	put_sem(n, "w", "&limit=2&ttl_ms=60000", &r);
	CHECK_STATUS(r, 200, "granted over stale entries");
	token = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(rcmd_int("HGET dlockd_lock_owners:{%s} w", n) == token, "the entry is the grant's");
	CHECK(rcmd_int("HEXISTS dlockd_lock_owners:{%s} =w", n) == 0, "no stale value");
	CHECK(rcmd_int("PTTL dlockd_lock_owners:{%s}", n) > 0 &&
	      rcmd_int("PTTL dlockd_lock_owners:{%s}", n) <= 60000, "it ends with the lease");
	put_sem(n, "w", "&limit=2&ttl_ms=60000", &r);
	CHECK(r.status == 200 && json_int(&r, "fencing_token") == token, "a repeat: same token");
	http_free(&r);
	CHECK(del_sem(n, "w") == 200, "released");
	(void)rcmd_int("DEL %s {%s}:timeout redisson_lock_token:{%s} dlockd_lock_owners:{%s}", n, n,
		       n, n);
}

/* Fencing tokens never go back, even when Redis lost the counter (and the
 * semaphore with it): the next permit's token is above every earlier one. */
TEST(semaphore_tokens_never_go_back_across_lost_data)
{
	const char *n = lockname("semtok");
	struct http_resp r;
	long long t1, t2;

	put_sem(n, "a", "&limit=2", &r);
	CHECK_STATUS(r, 200, "a permit");
	t1 = json_int(&r, "fencing_token");
	http_free(&r);
	(void)rcmd_int("DEL %s {%s}:timeout redisson_lock_token:{%s} dlockd_lock_owners:{%s}", n, n, n, n);
	put_sem(n, "b", "&limit=2", &r);
	CHECK_STATUS(r, 200, "a permit after the data was lost");
	t2 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(t2 > t1, "token %lld after %lld", t2, t1);
	del_sem(n, "b");
}
