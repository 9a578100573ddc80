/* test_pileup.c -- what one client piles up on one name must not slow
 * Redis down for every lock. Read holds are capped per owner and per lock
 * (409 too_many_holds, and nothing changes), and the Redis time of any one
 * call -- a read-write lock's status, heartbeat or refused acquire at the
 * cap, a listing's script over locks full of read holds, a fair lock's
 * status behind a long queue of dead places -- stays bounded however much
 * was piled up; and a change seen by many watches of one lock costs a few
 * reads, not one (or two) per watch.
 *
 * Script time is what a private Redis' SLOWLOG (every command logged)
 * says each script took, the median of a few calls: never wall clocks,
 * which two busy cores stretch. The bounds are generous (the figures
 * measured are a few milliseconds at most, and are printed); what they
 * catch is a cost that grows with the pile (tens to hundreds of ms). */
#include "../harness/bystander.h"
#include "../harness/harness.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

/* dlockd's defaults (--max-read-holds-per-owner, --max-read-holds-per-lock) */
#define HOLDS_PER_OWNER 64
#define HOLDS_PER_LOCK 256
/* The most one script may take, in µs, however much is piled up. */
#define SCRIPT_US_MAX 20000

/* A Redisson client's owner field prefix ("<uuid>:<thread id>"). */
#define REDISSON_ID "9c345276-aa6e-44c1-b478-bf4b14ba1498"

/* Pile read holds on read-write lock KEYS[1] in Redisson's layout, as
 * Redisson clients make them (dlockd cannot refuse those): ARGV[1]
 * readers REDISSON_ID:<i> with ARGV[2] holds each, every hold's lease
 * ARGV[3] ms; only the first ARGV[4] holds of each have their timeout key
 * (the others' leases ran out, and no call has dropped them yet). */
static const char pile_lua[] =
	"local readers, holds, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) "
	"redis.call('hset', KEYS[1], 'mode', 'read') "
	"for i = 1, readers do "
	"  local f = '" REDISSON_ID ":' .. i "
	"  redis.call('hset', KEYS[1], f, holds) "
	"  for k = 1, math.min(holds, tonumber(ARGV[4])) do "
	"    redis.call('set', '{' .. KEYS[1] .. '}:' .. f .. ':rwlock_timeout:' .. k, 1, 'px', ttl) "
	"  end "
	"end "
	"redis.call('pexpire', KEYS[1], ttl) "
	"return 1";

/* Pile readers with holds each on name, in Redis rs (NULL: the shared
 * one); the first live of each reader's holds are live, the rest ran out. */
static bool pile_some(const struct redis_srv *rs, const char *name, int readers, int holds,
		      int live)
{
	redisReply *r = rcmd_on(rs, "EVAL %s 1 %s %d %d %d %d", pile_lua, name, readers, holds,
				120000, live);
	bool ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;

	if (r)
		freeReplyObject(r);
	return ok;
}

static bool pile(const struct redis_srv *rs, const char *name, int readers, int holds)
{
	return pile_some(rs, name, readers, holds, holds);
}

/* Field field of hash key in rs as a number; -1 if it has none. */
static long long hget_int(const struct redis_srv *rs, const char *key, const char *field)
{
	redisReply *r = rcmd_on(rs, "HGET %s %s", key, field);
	long long v = r && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;

	if (r)
		freeReplyObject(r);
	return v;
}

/* r's string field key is want (false when it has none). */
static bool str_is(const struct http_resp *r, const char *key, const char *want)
{
	const char *v = json_str(r, key);

	return v && !strcmp(v, want);
}

static void decref(void *j)
{
	json_decref(j);
}

/* ----- A private Redis that times every script ----- */

static struct redis_srv RS;
static struct dlockd_srv D;

static void private_stop(void *arg)
{
	(void)arg;
	redis_dlockd_stop(&RS, &D, 5000);
}

/* A Redis of the test's own that logs every command with its time
 * (SLOWLOG), and a dlockd on it with flags (NULL: none); stopped when the
 * test ends. */
static bool private_start_with(const char *const *flags)
{
	memset(&RS, 0, sizeof(RS));
	memset(&D, 0, sizeof(D));
	snprintf(RS.extra, sizeof(RS.extra),
		 "--slowlog-log-slower-than 0 --slowlog-max-len 100000");
	if (redis_start(&RS) < 0)
		return false;
	if (dlockd_start_on(&D, &RS, flags) < 0) {
		redis_stop(&RS, false);
		return false;
	}
	test_at_end(private_stop, &RS);
	return true;
}

static bool private_start(void)
{
	return private_start_with(NULL);
}

/* Stop the private Redis and dlockd now: dlockd must exit cleanly (a
 * sanitizer's report is an unclean exit). */
static bool private_stop_clean(void)
{
	test_at_end_cancel(&RS);
	return redis_dlockd_stop(&RS, &D, 5000) == 0;
}

static void slowlog_reset(void)
{
	redisReply *r = rcmd_on(&RS, "SLOWLOG RESET");

	if (r)
		freeReplyObject(r);
}

static int compare_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

/* The median time in µs of the scripts (FCALL or EVALSHA, or EVAL for a
 * script's first run) Redis ran since the last reset, by its SLOWLOG; -1 if none
 * ran. *n (if given) gets how many ran. Resets the log. */
static long long script_us_median(size_t *n_out)
{
	redisReply *r = rcmd_on(&RS, "SLOWLOG GET -1");
	long long *v = NULL, median = -1;
	size_t n = 0;

	if (r && r->type == REDIS_REPLY_ARRAY) {
		v = calloc(r->elements + 1, sizeof(*v));
		for (size_t i = 0; v && i < r->elements; i++) {
			const redisReply *e = r->element[i], *args;

			if (e->type != REDIS_REPLY_ARRAY || e->elements < 4)
				continue;
			args = e->element[3];
			if (args->type != REDIS_REPLY_ARRAY || args->elements < 1 ||
			    args->element[0]->type != REDIS_REPLY_STRING ||
			    !is_script_command(args->element[0]->str))
				continue;
			v[n++] = e->element[2]->integer;
		}
	}
	if (n) {
		qsort(v, n, sizeof(*v), compare_ll);
		median = v[n / 2];
	}
	free(v);
	if (r)
		freeReplyObject(r);
	slowlog_reset();
	if (n_out)
		*n_out = n;
	return median;
}

/* Send method path on the private dlockd times times; the statuses must
 * all be want. Then the median script time of those calls (-1: none ran,
 * -2: a status was not want). */
static long long timed(int times, const char *method, const char *path, long want)
{
	struct http_resp r;
	bool ok = true;

	slowlog_reset();
	for (int i = 0; i < times; i++) {
		if (http_on(D.base, method, path, NULL, &r) != 0 || r.status != want) {
			fprintf(stderr, "# %s %s: %ld %s\n", method, path, r.status,
				r.body ? r.body : "");
			ok = false;
		}
		http_free(&r);
	}
	return ok ? script_us_median(NULL) : -2;
}

/* ----- The caps ----- */

TEST(rw_read_holds_are_capped_per_owner)
{
	const char *n = lockname("cap-owner");
	char p[512];
	struct http_resp r;

	for (int i = 1; i <= HOLDS_PER_OWNER; i++) {
		snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=greedy&ttl_ms=60000&reentrant=true",
			 n);
		CHECK(req("PUT", p, &r) == 200 && json_int(&r, "holds") == i,
		      "read hold %d granted: %ld %s", i, r.status, r.body);
		http_free(&r);
	}
	req("PUT", p, &r);
	CHECK_ERROR(r, 409, "too_many_holds", "one read hold past the owner's cap");
	CHECK(json_int(&r, "limit") == HOLDS_PER_OWNER && str_is(&r, "scope", "owner"),
	      "the answer names the cap: %s", r.body);
	CHECK(strstr(json_str(&r, "message"), "greedy") != NULL, "and the owner: %s", r.body);
	http_free(&r);

	/* nothing changed */
	CHECK(hget_int(NULL, n, "greedy") == HOLDS_PER_OWNER, "still %d holds in Redis",
	      HOLDS_PER_OWNER);
	CHECK(rcmd_int("EXISTS {%s}:greedy:rwlock_timeout:%d", n, HOLDS_PER_OWNER + 1) == 0,
	      "no timeout key for a refused hold");
	snprintf(p, sizeof(p), "/rwlocks/%s", n);
	req("GET", p, &r);
	CHECK(json_int(&r, "readers") == 1 && r.json &&
	      json_integer_value(json_object_get(json_array_get(json_object_get(r.json,
								      "holders"), 0),
						 "holds")) == HOLDS_PER_OWNER,
	      "status shows the holds unchanged: %s", r.body);
	http_free(&r);

	/* the owner may still repeat (no hold added), renew and release */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=greedy&ttl_ms=60000", n);
	CHECK(req("PUT", p, &r) == 200 && json_int(&r, "holds") == HOLDS_PER_OWNER,
	      "a repeat adds no hold and is granted: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s/read/heartbeat?owner=greedy&ttl_ms=60000", n);
	CHECK(req("POST", p, NULL) == 200, "heartbeat");
	/* others are not touched by one owner's cap */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=other&reentrant=true", n);
	CHECK(req("PUT", p, NULL) == 200, "another owner reads");
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=greedy", n);
	CHECK(req("DELETE", p, &r) == 200 && json_int(&r, "holds") == HOLDS_PER_OWNER - 1,
	      "one hold released: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=greedy&reentrant=true", n);
	CHECK(req("PUT", p, &r) == 200 && json_int(&r, "holds") == HOLDS_PER_OWNER,
	      "below the cap again, a hold is granted: %s", r.body);
	http_free(&r);

	/* and the lock still works: forced free, a writer takes it */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?force=true", n);
	CHECK(req("DELETE", p, NULL) == 200, "force free");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=w", n);
	CHECK(req("PUT", p, NULL) == 200, "a writer takes it");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=w", n);
	CHECK(req("DELETE", p, NULL) == 200, "and frees it");
}

TEST(rw_read_holds_are_capped_per_lock_redissons_included)
{
	const char *n = lockname("cap-lock");
	char p[512];
	struct http_resp r;

	/* 4 Redisson readers with 64 holds each: the lock's cap */
	CHECK(pile(NULL, n, 4, HOLDS_PER_LOCK / 4), "pile %d holds", HOLDS_PER_LOCK);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=late&ttl_ms=60000", n);
	req("PUT", p, &r);
	CHECK_ERROR(r, 409, "too_many_holds", "a new reader past the lock's cap");
	CHECK(json_int(&r, "limit") == HOLDS_PER_LOCK && str_is(&r, "scope", "lock"),
	      "the answer names the cap: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("HEXISTS %s late", n) == 0 && rcmd_int("HLEN %s", n) == 5 &&
	      rcmd_int("EXISTS {%s}:late:rwlock_timeout:1", n) == 0 &&
	      rcmd_int("EXISTS dlockd_lock_owners:{%s}", n) == 0,
	      "nothing written for the refused reader");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=writer", n);
	req("PUT", p, &r);
	CHECK_ERROR(r, 409, "locked", "a writer waits for the readers as ever");
	http_free(&r);
	/* one Redisson hold goes (its owner releases it through dlockd): the
	 * new reader gets in */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=" REDISSON_ID ":3", n);
	CHECK(req("DELETE", p, &r) == 200 && json_int(&r, "holds") == HOLDS_PER_LOCK / 4 - 1,
	      "a Redisson reader releases one hold: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=late&ttl_ms=60000", n);
	CHECK(req("PUT", p, &r) == 200 && json_int(&r, "holds") == 1,
	      "below the cap again, the new reader gets in: %s", r.body);
	http_free(&r);
	req("PUT", p, &r);
	CHECK(r.status == 200, "its repeat is granted at the cap (it adds no hold): %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s", n);
	req("GET", p, &r);
	CHECK(json_int(&r, "readers") == 5, "5 readers: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?force=true", n);
	CHECK(req("DELETE", p, NULL) == 200, "force free");
}

/* ----- What a pile costs Redis ----- */

/* One client piles up all it can on read-write lock name of the private
 * dlockd: owner after owner (ids <tag><j>), each taking up to each holds
 * (reentrant), until a new owner is refused (the lock is full) or it made
 * max attempts. How many holds it was granted, -1 if an answer was not
 * 200 or 409 too_many_holds; *full tells whether the lock got full. */
static int pile_http(const char *name, const char *tag, int each, int max, bool *full)
{
	char p[512];
	struct http_resp r;
	int granted = 0, attempts = 0;

	*full = false;
	for (int j = 0; !*full && attempts < max; j++) {
		for (int mine = 0; mine < each && attempts < max; mine++) {
			snprintf(p, sizeof(p),
				 "/rwlocks/%s/read?owner=%s%d&ttl_ms=600000&reentrant=true", name, tag, j);
			attempts++;
			if (http_on(D.base, "PUT", p, NULL, &r) != 0)
				return -1;
			if (r.status != 200) {
				bool refused = r.status == 409 && str_is(&r, "error", "too_many_holds");

				http_free(&r);
				if (!refused)
					return -1;
				*full = mine == 0;
				break;
			}
			http_free(&r);
			granted++;
		}
	}
	fprintf(stderr, "# %s: %d read holds granted in %d attempts\n", name, granted, attempts);
	return granted;
}

TEST(pileup_of_read_holds_costs_each_call_a_bounded_redis_time)
{
	const int max = HOLDS_PER_LOCK + 200;	/* without a cap, the pile goes on */
	struct http_resp r;
	bool full;
	int granted;
	long long us, base;

	CHECK(private_start(), "private Redis and dlockd");
	CHECK(http_on(D.base, "PUT", "/rwlocks/amp/read?owner=o0&ttl_ms=600000", NULL, &r) == 0 &&
	      r.status == 200, "first reader: %s", r.body);
	http_free(&r);
	base = timed(9, "GET", "/rwlocks/amp", 200);

	/* owners filled up one after the other: the most holds per reader */
	granted = pile_http("amp", "o", 1000000, max, &full);
	CHECK(full && hget_int(&RS, "amp", "o0") == HOLDS_PER_OWNER,
	      "each owner stopped at %d holds, and the lock at %d: o0 has %lld", HOLDS_PER_OWNER,
	      HOLDS_PER_LOCK, hget_int(&RS, "amp", "o0"));
	CHECK(granted + 1 == HOLDS_PER_LOCK, "%d holds granted; want %d", granted + 1,
	      HOLDS_PER_LOCK);

	/* the lock at its cap: every call on it costs a bounded time */
	us = timed(9, "GET", "/rwlocks/amp", 200);
	fprintf(stderr, "# GET /rwlocks/amp: %lld us a script with 1 hold, %lld us with %d "
		"(%d owners of %d)\n", base, us, HOLDS_PER_LOCK, HOLDS_PER_LOCK / HOLDS_PER_OWNER,
		HOLDS_PER_OWNER);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a status read at the cap took %lld us; want < %d",
	      us, SCRIPT_US_MAX);
	us = timed(9, "POST", "/rwlocks/amp/read/heartbeat?owner=o1&ttl_ms=600000", 200);
	fprintf(stderr, "# heartbeat: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a heartbeat took %lld us", us);
	us = timed(9, "PUT", "/rwlocks/amp/read?owner=o1&ttl_ms=600000&reentrant=true", 409);
	fprintf(stderr, "# refused read: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a refused read took %lld us", us);
	us = timed(9, "PUT", "/rwlocks/amp/write?owner=w", 409);
	fprintf(stderr, "# refused write: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a refused write took %lld us", us);
	us = timed(5, "GET", "/locks?prefix=amp", 200);
	fprintf(stderr, "# listing: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a listing's script took %lld us", us);
	us = timed(9, "DELETE", "/rwlocks/amp/read?owner=o2", 200);
	fprintf(stderr, "# release: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a release took %lld us", us);

	/* one hold per owner: the most readers, the most a status costs */
	granted = pile_http("amp2", "r", 1, max, &full);
	CHECK(full && granted == HOLDS_PER_LOCK, "%d readers of one hold; want %d", granted,
	      HOLDS_PER_LOCK);
	us = timed(9, "GET", "/rwlocks/amp2", 200);
	fprintf(stderr, "# GET /rwlocks/amp2: %lld us with %d readers of one hold\n", us,
		HOLDS_PER_LOCK);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a status read at the cap took %lld us; want < %d",
	      us, SCRIPT_US_MAX);
	us = timed(9, "POST", "/rwlocks/amp2/read/heartbeat?owner=r1&ttl_ms=600000", 200);
	fprintf(stderr, "# heartbeat: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a heartbeat took %lld us", us);
	us = timed(9, "PUT", "/rwlocks/amp2/read?owner=late&ttl_ms=600000", 409);
	fprintf(stderr, "# refused read: %lld us\n", us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a refused read took %lld us", us);
	CHECK(private_stop_clean(), "dlockd exits cleanly");
}

TEST(pileup_listing_scripts_take_a_bounded_time_however_full_the_locks)
{
	enum { LOCKS = 48, READERS = 8, HOLDS = 128 };
	char name[32], why[256];
	json_t *all;
	int pages = 0, dups = 0;
	size_t calls;
	long long us;

	CHECK(private_start(), "private Redis and dlockd");
	/* 48 locks of 1024 read holds (Redisson's: past dlockd's cap), as
	 * clients can leave them: each reader's first hold lives long, the
	 * others had a lease of a millisecond, gone, but counted until a call
	 * on the lock drops them. Their keys are gone, so one SCAN batch finds
	 * all 48 locks. */
	for (int i = 0; i < LOCKS; i++) {
		snprintf(name, sizeof(name), "full-%02d", i);
		CHECK(pile_some(&RS, name, READERS, HOLDS, 1), "pile %s", name);
	}
	slowlog_reset();
	all = list_locks_all(&D, NULL, "prefix=full-", 100, &pages, &dups, why, sizeof(why));
	us = script_us_median(&calls);
	CHECK(all, "listing: %s", why);
	test_at_end(decref, all);
	fprintf(stderr, "# listing %d locks of %d holds: %zu scripts, %lld us each (median)\n",
		LOCKS, READERS * HOLDS, calls, us);
	CHECK(json_object_size(all) == LOCKS && dups == 0, "%zu locks listed, %d twice",
	      json_object_size(all), dups);
	for (int i = 0; i < LOCKS; i++) {
		json_t *e, *h;

		snprintf(name, sizeof(name), "full-%02d", i);
		e = json_object_get(all, name);
		h = json_array_get(json_object_get(e, "holders"), READERS - 1);
		CHECK(e && json_array_size(json_object_get(e, "holders")) == READERS &&
		      json_integer_value(json_object_get(h, "holds")) == 1,
		      "%s listed with its %d readers of one live hold each", name, READERS);
	}
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a listing script took %lld us; want < %d", us,
	      SCRIPT_US_MAX);
	CHECK(private_stop_clean(), "dlockd exits cleanly");
}

TEST(pileup_fair_status_takes_a_bounded_time_behind_a_long_queue)
{
	enum { DEAD = 20000 };
	struct http_resp r;
	redisReply *x;
	json_t *q;
	long long us;

	CHECK(private_start(), "private Redis and dlockd");
	CHECK(http_on(D.base, "PUT", "/fairlocks/long?owner=holder&ttl_ms=600000", NULL, &r) == 0 &&
	      r.status == 200, "holder: %s", r.body);
	http_free(&r);
	/* one live place at the head, then the places of a dlockd that died
	 * with its waiters: past their deadline, dropped only as they reach
	 * the head */
	x = rcmd_on(&RS, "EVAL %s 2 %s %s %d",
		    "local t = redis.call('time') "
		    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
		    "redis.call('rpush', KEYS[1], 'live') "
		    "redis.call('zadd', KEYS[2], now + 600000, 'live') "
		    "for i = 1, tonumber(ARGV[1]) do "
		    "  redis.call('rpush', KEYS[1], 'dead-' .. i) "
		    "  redis.call('zadd', KEYS[2], now - 1000, 'dead-' .. i) "
		    "end return 1",
		    "redisson_lock_queue:{long}", "redisson_lock_timeout:{long}", DEAD);
	CHECK(x && x->type == REDIS_REPLY_INTEGER, "queue piled");
	freeReplyObject(x);

	us = timed(5, "GET", "/fairlocks/long", 200);
	fprintf(stderr, "# GET /fairlocks/long behind %d dead places: %lld us\n", DEAD, us);
	CHECK(us > 0 && us < SCRIPT_US_MAX, "a fair lock's status took %lld us; want < %d", us,
	      SCRIPT_US_MAX);
	http_on(D.base, "GET", "/fairlocks/long", NULL, &r);
	q = r.json ? json_object_get(r.json, "queue") : NULL;
	CHECK(r.status == 200 && json_int(&r, "queue_length") == 1 && json_array_size(q) == 1 &&
	      !strcmp(json_string_value(json_object_get(json_array_get(q, 0), "owner")), "live"),
	      "the live place is shown, the dead ones are not: %s", r.body);
	http_free(&r);
	CHECK(private_stop_clean(), "dlockd exits cleanly");
}

/* ----- A crowd of fair-lock waiters ----- */

/* dlockd's default --max-fair-queue (a fair lock's queue, a read-write
 * lock's waiting writers) */
#define FAIR_QUEUE_MAX 1000

/* The sum and the largest of the times (µs) of the scripts on Redis keys
 * holding on (the crowd's lock), in the private Redis' SLOWLOG since it
 * was last reset; resets it. */
static long long scripts_us_total(const char *on, long long *max, size_t *n)
{
	redisReply *r = rcmd_on(&RS, "SLOWLOG GET -1");
	long long sum = 0;

	*max = 0;
	*n = 0;
	for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		const redisReply *e = r->element[i], *args;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 4)
			continue;
		args = e->element[3];
		if (args->type != REDIS_REPLY_ARRAY || args->elements < 1 ||
		    args->element[0]->type != REDIS_REPLY_STRING ||
		    !is_script_command(args->element[0]->str))
			continue;
		bool mine = false;

		for (size_t k = 1; k < args->elements && !mine; k++)
			mine = args->element[k]->type == REDIS_REPLY_STRING &&
			       strstr(args->element[k]->str, on);
		if (!mine)
			continue;
		sum += e->element[2]->integer;
		if (e->element[2]->integer > *max)
			*max = e->element[2]->integer;
		(*n)++;
	}
	if (r)
		freeReplyObject(r);
	slowlog_reset();
	return sum;
}

enum { CROWD = 8000 };

/* One client sends CROWD waiting acquires (method path_fmt with %d the
 * waiter's number) on raw connections to the private dlockd, waits until
 * each is queued (queued() counts them) or answered, then hangs up on all
 * of them at once while another client cycles a lock of its own. The
 * bystander's calls must all succeed and stay fast, and the Redis time of
 * the crowd's leaving stay small. *answered gets how many of the crowd
 * were answered before the hang-up, and one answer in first. */
static int *crowd_fds;

static void crowd_close(void *arg)
{
	(void)arg;
	for (int i = 0; crowd_fds && i < CROWD; i++)
		if (crowd_fds[i] >= 0)
			close(crowd_fds[i]);
	free(crowd_fds);
	crowd_fds = NULL;
}

static bool crowd_come_and_go(const char *what, const char *path_fmt, long long (*queued)(void),
			      int *answered, char *first, size_t cap, char *why, size_t whycap)
{
	static struct bystander b;
	char req[512], path[300], buf[2048];
	long long leave_us, leave_max, q = 0;
	size_t leave_n, sent = 0;
	int64_t until;
	double p50, p99, max;

	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	*answered = 0;
	*first = '\0';
	crowd_fds = malloc(CROWD * sizeof(*crowd_fds));
	test_at_end(crowd_close, NULL);
	for (int i = 0; i < CROWD; i++) {
		int n;

		snprintf(path, sizeof(path), path_fmt, i);
		n = snprintf(req, sizeof(req), "PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			     "Content-Length: 0\r\n\r\n", path);
		crowd_fds[i] = raw_connect(D.port);
		if (crowd_fds[i] >= 0 && write(crowd_fds[i], req, (size_t)n) == n)
			sent++;
	}
	/* every one queued or answered */
	until = mono_ms() + 120000;
	while (mono_ms() < until) {
		struct pollfd *p = calloc(CROWD, sizeof(*p));

		for (int i = 0; i < CROWD; i++)
			p[i] = (struct pollfd){ .fd = crowd_fds[i], .events = POLLIN };
		if (poll(p, CROWD, 0) > 0) {
			for (int i = 0; i < CROWD; i++) {
				ssize_t got;

				if (!(p[i].revents & (POLLIN | POLLHUP)) || crowd_fds[i] < 0)
					continue;
				got = read(crowd_fds[i], buf, sizeof(buf) - 1);
				if (got > 0) {
					buf[got] = '\0';
					if (!*first)
						snprintf(first, cap, "%s", buf);
					(*answered)++;
				}
				close(crowd_fds[i]);
				crowd_fds[i] = -1;
			}
		}
		free(p);
		q = queued();
		if (q + *answered >= CROWD)
			break;
		sleep_ms(100);
	}
	fprintf(stderr, "# %s: %zu of %d waiting acquires sent; %lld queued, %d answered\n", what,
		sent, CROWD, q, *answered);
	if (sent != CROWD || q + *answered < CROWD) {
		snprintf(why, whycap, "%zu sent, %lld queued, %d answered", sent, q, *answered);
		return false;
	}

	/* the hang-up, while the other client goes on */
	if (!bystander_start(&b, D.base, NULL, 1)) {
		snprintf(why, whycap, "could not start the other client");
		return false;
	}
	sleep_ms(500);
	slowlog_reset();
	crowd_close(NULL);
	test_at_end_cancel(NULL);
	sleep_ms(4000 * slow_factor());
	bystander_stop(&b);
	leave_us = scripts_us_total("crowd", &leave_max, &leave_n);
	p50 = bystander_call_ms(&b, 0.5);
	p99 = bystander_call_ms(&b, 0.99);
	max = bystander_call_ms(&b, 1);
	fprintf(stderr, "# %s: the crowd hung up; the other client's %d calls: %d failed, "
		"p50 %.1f ms, p99 %.1f ms, max %.1f ms; Redis ran %zu scripts on the crowd's "
		"lock meanwhile, %lld ms in all, the longest %lld us; %lld still queued\n", what, b.ncalls, b.failed, p50,
		p99, max, leave_n, leave_us / 1000, leave_max, queued());
	if (b.failed) {
		snprintf(why, whycap, "%d of the other client's calls failed, e.g. %s", b.failed,
			 b.worst);
		return false;
	}
	if (p99 > 50.0 * slow_factor() || max > 500.0 * slow_factor()) {
		snprintf(why, whycap, "the other client's calls: p99 %.1f ms, max %.1f ms; want "
			 "< 50 and < 500", p99, max);
		return false;
	}
	if (leave_us > 250000) {
		snprintf(why, whycap, "the crowd's leaving cost Redis %lld ms (its longest script "
			 "%lld us); want < 250 ms", leave_us / 1000, leave_max);
		return false;
	}
	if (queued() != 0) {
		snprintf(why, whycap, "%lld still queued after the hang-up", queued());
		return false;
	}
	return true;
}

static long long fair_crowd_queued(void)
{
	return rcmd_int_on(&RS, "LLEN redisson_lock_queue:{crowd}");
}

TEST(pileup_of_fair_waiters_is_capped_and_their_leaving_slows_nobody)
{
	struct http_resp r;
	char first[2048], why[512];
	int answered;
	bool ok;

	CHECK(private_start(), "private Redis and dlockd");
	CHECK(http_on(D.base, "PUT", "/fairlocks/crowd?owner=holder&ttl_ms=600000", NULL, &r) == 0 &&
	      r.status == 200, "holder: %s", r.body);
	http_free(&r);
	ok = crowd_come_and_go("fair", "/fairlocks/crowd?owner=w%d&wait_ms=120000",
			       fair_crowd_queued, &answered, first, sizeof(first), why, sizeof(why));
	CHECK(ok, "%s", why);
	CHECK(answered == CROWD - FAIR_QUEUE_MAX, "%d waiters queued and %d refused; want at most "
	      "%d queued (--max-fair-queue)", CROWD - answered, answered, FAIR_QUEUE_MAX);
	CHECK(strstr(first, "HTTP/1.1 409") && strstr(first, "\"error\":\"queue_full\"") &&
	      strstr(first, "\"limit\":1000"), "past the cap: 409 queue_full with the limit: %s",
	      first);
	/* the lock still works: its holder leaves, a new waiter gets it */
	CHECK(http_on(D.base, "DELETE", "/fairlocks/crowd?owner=holder", NULL, &r) == 0 &&
	      r.status == 200, "holder releases: %s", r.body);
	http_free(&r);
	CHECK(http_on(D.base, "PUT", "/fairlocks/crowd?owner=late&wait_ms=5000", NULL, &r) == 0 &&
	      r.status == 200, "a new waiter gets it: %ld %s", r.status, r.body);
	http_free(&r);
	CHECK(private_stop_clean(), "dlockd exits cleanly");
}

/* The cap as set, and the example of docs/guides/fair-and-rw-locks.md: a fair PUT with wait_ms on a
 * full queue, a write PUT with wait_ms behind full waiting writers. */
TEST(fair_queue_cap_is_a_setting_and_answers_queue_full)
{
	static const char *const flags[] = { "--max-fair-queue", "2", NULL };
	struct bg w[4];
	struct http_resp r;
	char p[300];

	CHECK(private_start_with(flags), "dlockd --max-fair-queue 2");
	CHECK(status_of(&D, "PUT", "/fairlocks/printer?owner=job-1") == 200, "job-1 holds");
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "/fairlocks/printer?owner=job-%d&wait_ms=20000", i + 2);
		bg_start_on(&w[i], D.base, "PUT", p, NULL);
		CHECK(WAIT_FOR(rcmd_int_on(&RS, "LLEN redisson_lock_queue:{printer}") == i + 1, 3000),
		      "job-%d queued", i + 2);
	}
	http_on(D.base, "PUT", "/fairlocks/printer?owner=job-1001&wait_ms=30000", NULL, &r);
	CHECK_ERROR(r, 409, "queue_full", "a third waiter");
	CHECK(json_int(&r, "limit") == 2 &&
	      !strcmp(json_str(&r, "message"), "fair lock 'printer' has 2 waiters queued, the "
		      "most one lock may have (--max-fair-queue 2): retry later, or without "
		      "wait_ms"), "the answer docs/guides/fair-and-rw-locks.md shows: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int_on(&RS, "ZCARD redisson_lock_timeout:{printer}") == 2 &&
	      rcmd_int_on(&RS, "LLEN redisson_lock_queue:{printer}") == 2, "nothing queued for it");
	http_on(D.base, "PUT", "/fairlocks/printer?owner=job-1001", NULL, &r);
	CHECK_ERROR(r, 409, "locked", "without wait_ms the cap is not in the way");
	http_free(&r);

	/* waiting writers: the same cap */
	CHECK(status_of(&D, "PUT", "/rwlocks/ledger/read?owner=r") == 200, "a reader");
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "/rwlocks/ledger/write?owner=w%d&wait_ms=20000", i);
		bg_start_on(&w[2 + i], D.base, "PUT", p, NULL);
		CHECK(WAIT_FOR(rcmd_int_on(&RS, "ZCARD dlockd_rwlock_writers:{ledger}") == i + 1, 3000),
		      "writer %d waits", i);
	}
	http_on(D.base, "PUT", "/rwlocks/ledger/write?owner=w9&wait_ms=20000", NULL, &r);
	CHECK_ERROR(r, 409, "queue_full", "a third writer");
	CHECK(json_int(&r, "limit") == 2 && strstr(json_str(&r, "message"), "2 writers waiting"),
	      "the answer names the cap: %s", r.body);
	http_free(&r);

	/* the queues move on as ever */
	CHECK(status_of(&D, "DELETE", "/fairlocks/printer?owner=job-1") == 200, "job-1 leaves");
	bg_join(&w[0]);
	CHECK(w[0].r.status == 200, "job-2 gets it: %s", w[0].r.body ? w[0].r.body : "");
	http_free(&w[0].r);
	CHECK(status_of(&D, "DELETE", "/fairlocks/printer?owner=job-2") == 200, "job-2 leaves");
	bg_join(&w[1]);
	CHECK(w[1].r.status == 200, "job-3 gets it");
	http_free(&w[1].r);
	CHECK(status_of(&D, "DELETE", "/fairlocks/printer?owner=job-3") == 200, "job-3 leaves");
	CHECK(status_of(&D, "DELETE", "/rwlocks/ledger/read?owner=r") == 200, "the reader leaves");
	for (int i = 2; i < 4; i++) {
		bg_join(&w[i]);
		CHECK(w[i].r.status == 200, "writer %d writes", i - 2);
		http_free(&w[i].r);
		snprintf(p, sizeof(p), "/rwlocks/ledger/write?owner=w%d", i - 2);
		CHECK(status_of(&D, "DELETE", "%s", p) == 200, "writer %d leaves", i - 2);
	}
	CHECK(private_stop_clean(), "dlockd exits cleanly");
}

static long long writer_crowd_queued(void)
{
	return rcmd_int_on(&RS, "ZCARD dlockd_rwlock_writers:{wcrowd}");
}

TEST(pileup_of_waiting_writers_is_capped_and_their_leaving_slows_nobody)
{
	struct http_resp r;
	char first[2048], why[512];
	int answered;
	bool ok;

	CHECK(private_start(), "private Redis and dlockd");
	CHECK(http_on(D.base, "PUT", "/rwlocks/wcrowd/read?owner=reader&ttl_ms=600000", NULL,
		      &r) == 0 && r.status == 200, "reader: %s", r.body);
	http_free(&r);
	ok = crowd_come_and_go("writers", "/rwlocks/wcrowd/write?owner=w%d&wait_ms=120000",
			       writer_crowd_queued, &answered, first, sizeof(first), why,
			       sizeof(why));
	CHECK(ok, "%s", why);
	CHECK(answered == CROWD - FAIR_QUEUE_MAX, "%d writers waited and %d were refused; want "
	      "at most %d waiting (--max-fair-queue)", CROWD - answered, answered, FAIR_QUEUE_MAX);
	CHECK(strstr(first, "HTTP/1.1 409") && strstr(first, "\"error\":\"queue_full\"") &&
	      strstr(first, "\"limit\":1000"), "past the cap: 409 queue_full with the limit: %s",
	      first);
	CHECK(http_on(D.base, "DELETE", "/rwlocks/wcrowd/read?owner=reader", NULL, &r) == 0 &&
	      r.status == 200, "reader releases: %s", r.body);
	http_free(&r);
	CHECK(http_on(D.base, "PUT", "/rwlocks/wcrowd/write?owner=late&wait_ms=5000", NULL,
		      &r) == 0 && r.status == 200, "a new writer gets it: %ld %s", r.status, r.body);
	http_free(&r);
	CHECK(private_stop_clean(), "dlockd exits cleanly");
}

/* ----- Watches ----- */

static struct dlockd_srv WD;

static void watched_stop(void *arg)
{
	(void)arg;
	dlockd_stop(&WD, 5000);
}

TEST(pileup_of_watches_costs_a_few_reads_per_change_not_one_per_watch)
{
	enum { W = 40 };
	static const char *const one_loop[] = { "--threads", "1", NULL };
	static struct bg w[W];
	const char *n = lockname("watched");
	char p[512];
	struct http_resp r;
	long long token, s0, reads;

	CHECK(dlockd_start(&WD, NULL, one_loop) == 0, "a dlockd with one event loop");
	test_at_end(watched_stop, &WD);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=old&ttl_ms=600000", n);
	CHECK(http_on(WD.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "old reader");
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=new&ttl_ms=600000", n);
	CHECK(http_on(WD.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "new reader");
	token = json_int(&r, "fencing_token");
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s?index=%lld&wait_ms=30000", n, token);
	for (int i = 0; i < W; i++)
		bg_start_on(&w[i], WD.base, "GET", p, NULL);
	CHECK(WAIT_FOR(metric_value(&WD, "dlockd_watches") >= W &&
		       channel_subscribers(NULL, "dlockd_lock_state:{%s}", n) >= 1, 5000),
	      "%d watches wait", W);
	/* the window measured starts once their first reads are in: no script
	 * for 300 ms (a fixed sleep was too short on a loaded machine) */
	redis_scripts_quiet(300);

	/* a change every watch is told of, that leaves the index as it was:
	 * the older reader leaves */
	/* the release is counted out below: it runs with EVALSHA too, not
	 * with the EVAL that loads a script on its first use */
	CHECK(http_on(WD.base, "DELETE", "/rwlocks/pileup-warm/read?owner=x", NULL, &r) == 0 &&
	      r.status == 409, "a release that loads the release script");
	http_free(&r);
	s0 = redis_scripts_called();
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=old", n);
	CHECK(http_on(WD.base, "DELETE", p, NULL, &r) == 0 && r.status == 200, "old leaves");
	http_free(&r);
	sleep_ms(500);		/* the window measured: the watches look and sleep again */
	reads = redis_scripts_called() - s0 - 1;
	fprintf(stderr, "# %lld status reads for one change seen by %d watches\n", reads, W);
	CHECK(metric_value(&WD, "dlockd_watches") == W, "all %d still watch", W);
	CHECK(reads >= 1 && reads <= 4, "%lld reads for one change seen by %d watches of one "
	      "loop; want a few, however many watch", reads, W);

	/* and every watch still sees the change that matters */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=new", n);
	CHECK(http_on(WD.base, "DELETE", p, NULL, &r) == 0 && r.status == 200, "new leaves");
	http_free(&r);
	for (int i = 0; i < W; i++) {
		bg_join(&w[i]);
		CHECK(w[i].r.status == 200 && json_bool(&w[i].r, "changed") == 1 &&
		      json_bool(&w[i].r, "locked") == 0, "watch %d: %ld %s", i, w[i].r.status,
		      w[i].r.body ? w[i].r.body : "");
		http_free(&w[i].r);
	}
	test_at_end_cancel(&WD);
	CHECK(dlockd_stop(&WD, 5000) == 0, "dlockd exits cleanly");
}
