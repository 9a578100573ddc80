/* test_rwlock.c -- /rwlocks against real dlockd and Redis: readers share
 * and writers exclude, reentrancy, a lease per read hold, downgrade that
 * wakes readers, upgrade of a sole reader, who is woken by which release,
 * no writer starvation, wrong_kind in both directions, Redisson interop,
 * and a mixed read/write stress with an overlap checker. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char pbuf[512];

/* "/rwlocks/<name>/<side>?<query>" */
static const char *RW(const char *name, const char *side, const char *query)
{
	snprintf(pbuf, sizeof(pbuf), "/rwlocks/%s%s%s%s%s", name, side[0] ? "/" : "", side,
		 query[0] ? "?" : "", query);
	return pbuf;
}

TEST(rw_readers_share_and_writers_exclude)
{
	const char *n = lockname("share");
	struct http_resp r;

	CHECK(req("PUT", RW(n, "read", "owner=r1"), NULL) == 200, "first reader");
	CHECK(req("PUT", RW(n, "read", "owner=r2"), NULL) == 200, "second reader shares");
	req("PUT", RW(n, "write", "owner=w"), &r);
	CHECK_ERROR(r, 409, "locked", "a writer is kept out by readers");
	http_free(&r);
	req("GET", RW(n, "", ""), &r);
	CHECK(!strcmp(json_str(&r, "mode"), "read") && json_int(&r, "readers") == 2 &&
	      json_bool(&r, "locked") == 1 && json_int(&r, "ttl_ms") > 25000,
	      "status shows two readers: %s", r.body);
	http_free(&r);
	CHECK(req("DELETE", RW(n, "read", "owner=r1"), &r) == 200 && json_bool(&r, "released") == 0,
	      "one reader leaves, the lock is still held: %s", r.body);
	http_free(&r);
	CHECK(req("DELETE", RW(n, "read", "owner=r2"), &r) == 200 && json_bool(&r, "released") == 1,
	      "the last reader frees it: %s", r.body);
	http_free(&r);
	CHECK(req("PUT", RW(n, "write", "owner=w"), NULL) == 200, "now the writer gets it");
	req("PUT", RW(n, "read", "owner=r1"), &r);
	CHECK_ERROR(r, 409, "locked", "a writer keeps readers out");
	http_free(&r);
	req("PUT", RW(n, "write", "owner=w2"), &r);
	CHECK_ERROR(r, 409, "locked", "and other writers");
	http_free(&r);
	req("GET", RW(n, "", ""), &r);
	CHECK(!strcmp(json_str(&r, "mode"), "write") && json_int(&r, "readers") == 0,
	      "status shows the writer: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("HGET %s w:write", n) == 1 && rcmd_int("HEXISTS %s mode", n) == 1,
	      "Redisson's layout: mode field and <owner>:write");
	req("DELETE", RW(n, "write", "owner=w"), NULL);
	req("GET", RW(n, "", ""), &r);
	CHECK(!strcmp(json_str(&r, "mode"), "none") && json_bool(&r, "locked") == 0,
	      "free: %s", r.body);
	http_free(&r);
}

TEST(rw_both_sides_are_reentrant_and_each_read_hold_has_its_lease)
{
	const char *n = lockname("holds");
	struct http_resp r;
	long long t1, t2;

	req("PUT", RW(n, "read", "owner=r&ttl_ms=8000"), &r);
	t1 = json_int(&r, "fencing_token");
	http_free(&r);
	req("PUT", RW(n, "read", "owner=r&ttl_ms=1000&reentrant=true"), &r);
	CHECK(json_int(&r, "holds") == 2, "two read holds: %s", r.body);
	t2 = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(t2 == t1, "the reader's holding keeps its token: %lld then %lld", t1, t2);
	CHECK(rcmd_int("PTTL {%s}:r:rwlock_timeout:1", n) > 7000 &&
	      rcmd_int("PTTL {%s}:r:rwlock_timeout:2", n) <= 1000,
	      "one rwlock_timeout key per hold, each with its own lease");
	CHECK(req("PUT", RW(n, "read", "owner=r2&ttl_ms=3000"), NULL) == 200, "another reader");
	req("DELETE", RW(n, "read", "owner=r2"), NULL);
	CHECK(rcmd_int("PTTL %s", n) > 7000, "the lock lives as long as its longest hold (8 s)");
	req("DELETE", RW(n, "read", "owner=r"), NULL);	/* releases hold 2 */
	CHECK(rcmd_int("EXISTS {%s}:r:rwlock_timeout:2", n) == 0 &&
	      rcmd_int("EXISTS {%s}:r:rwlock_timeout:1", n) == 1, "the newest hold went first");
	req("DELETE", RW(n, "read", "owner=r"), NULL);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "all holds gone, lock gone");

	CHECK(req("PUT", RW(n, "write", "owner=w&ttl_ms=5000"), NULL) == 200, "writer");
	req("PUT", RW(n, "write", "owner=w&ttl_ms=100&reentrant=true"), &r);
	CHECK(json_int(&r, "holds") == 2 && json_int(&r, "ttl_ms") > 4000,
	      "a write re-entry never shortens the lease: %s", r.body);
	http_free(&r);
	req("DELETE", RW(n, "write", "owner=w"), &r);
	CHECK(json_bool(&r, "released") == 0 && json_int(&r, "holds") == 1, "partial: %s", r.body);
	http_free(&r);
	req("DELETE", RW(n, "write", "owner=w"), &r);
	CHECK(json_bool(&r, "released") == 1, "full: %s", r.body);
	http_free(&r);
}

TEST(rw_writer_waits_only_for_the_longest_live_read_lease)
{
	const char *n = lockname("lease");
	struct bg w;
	int64_t t0;

	/* Redisson's scenario: A reads for 1.5 s, B for 10 s but leaves early */
	req("PUT", RW(n, "read", "owner=a&ttl_ms=1500"), NULL);
	req("PUT", RW(n, "read", "owner=b&ttl_ms=10000"), NULL);
	t0 = mono_ms();
	bg_start(&w, "PUT", RW(n, "write", "owner=w&wait_ms=8000"), NULL);
	CHECK(wait_waiters(NULL, 1, 3000), "writer waits");
	req("DELETE", RW(n, "read", "owner=b"), NULL);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the writer gets it once A's lease ran out");
	CHECK(w.done_ms - t0 >= 1300 && w.done_ms - t0 < 4000 * slow_factor(),
	      "after %lld ms; want about 1500 (A's lease), not B's 10 s",
	      (long long)(w.done_ms - t0));
	http_free(&w.r);
	req("DELETE", RW(n, "write", "owner=w"), NULL);
}

/* A read heartbeat with a shorter ttl_ms shortens that reader's holds, and
 * the lock lives exactly as long as its longest hold: a heartbeat used to
 * only lengthen the lock, so status and 409s overstated the lease. */
TEST(rw_shorter_read_heartbeat_shortens_the_lock)
{
	const char *n = lockname("rhb");
	struct http_resp r;

	CHECK(req("PUT", RW(n, "read", "owner=a&ttl_ms=60000"), NULL) == 200, "a reads 60 s");
	CHECK(req("POST", RW(n, "read/heartbeat", "owner=a&ttl_ms=1000"), NULL) == 200,
	      "a's heartbeat to 1 s");
	req("GET", RW(n, "", ""), &r);
	CHECK(json_int(&r, "ttl_ms") > 0 && json_int(&r, "ttl_ms") <= 1000,
	      "the lock now lives 1 s: %s", r.body);
	http_free(&r);
	CHECK(req("PUT", RW(n, "read", "owner=b&ttl_ms=5000"), NULL) == 200, "b reads 5 s");
	CHECK(req("POST", RW(n, "read/heartbeat", "owner=b&ttl_ms=2000"), NULL) == 200,
	      "b's heartbeat to 2 s");
	CHECK(rcmd_int("PTTL %s", n) > 1000 && rcmd_int("PTTL %s", n) <= 2000,
	      "the longest hold is b's 2 s: PTTL %lld", rcmd_int("PTTL %s", n));
	CHECK(WAIT_FOR(rcmd_int("EXISTS %s", n) == 0, 4000), "free when both holds ran out");
}

/* A writer that also reads keeps the write holding as long as its read
 * holds: a shorter write heartbeat cannot end it before them, so it must
 * say the lease the write holding has, not the one asked for (it said
 * 1 ms while the write lock stood 30 s, its waiters shut out). */
TEST(rw_write_heartbeat_says_the_lease_its_own_read_holds_keep)
{
	const char *n = lockname("whbread");
	struct http_resp r;
	long long ttl;

	CHECK(req("PUT", RW(n, "write", "owner=w&ttl_ms=30000"), NULL) == 200, "w writes");
	CHECK(req("PUT", RW(n, "read", "owner=w&ttl_ms=30000"), NULL) == 200, "w also reads");
	req("POST", RW(n, "write/heartbeat", "owner=w&ttl_ms=1000"), &r);
	CHECK_STATUS(r, 200, "w's write heartbeat to 1 s");
	ttl = json_int(&r, "ttl_ms");
	CHECK(ttl > 20000 && ttl <= 30000, "the lease its read hold keeps, not 1 s: %s", r.body);
	http_free(&r);
	req("GET", RW(n, "", ""), &r);
	CHECK(json_int(&r, "ttl_ms") > 20000, "status agrees: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("PTTL %s", n) > 20000, "Redis agrees: PTTL %lld", rcmd_int("PTTL %s", n));
	req("DELETE", RW(n, "read", "owner=w"), NULL);
	req("DELETE", RW(n, "write", "owner=w"), NULL);
}

TEST(rw_downgrade_wakes_waiting_readers_at_once)
{
	const char *n = lockname("down");
	struct http_resp r;
	struct bg rd;
	int64_t released_at;
	long long scripts0;

	CHECK(req("PUT", RW(n, "write", "owner=w&ttl_ms=60000"), NULL) == 200, "writer");
	CHECK(req("PUT", RW(n, "read", "owner=w"), NULL) == 200, "the writer may also read");
	scripts0 = redis_scripts_called();
	bg_start(&rd, "PUT", RW(n, "read", "owner=r&wait_ms=20000"), NULL);
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_rwlock:{%s}", n), "a reader waits");
	req("DELETE", RW(n, "write", "owner=w"), &r);
	CHECK(json_bool(&r, "released") == 0, "downgraded, not free: %s", r.body);
	http_free(&r);
	released_at = mono_ms();
	/* Redisson would let it in only when the 60 s lease ends */
	CHECK_GRANTED_WITHIN(rd, released_at, 500, "the waiting reader enters on the downgrade");
	http_free(&rd.r);
	req("GET", RW(n, "", ""), &r);
	CHECK(!strcmp(json_str(&r, "mode"), "read") && json_int(&r, "readers") == 2,
	      "mode read with two readers: %s", r.body);
	http_free(&r);
	req("DELETE", RW(n, "read", "owner=w"), NULL);
	req("DELETE", RW(n, "read", "owner=r"), NULL);
}

TEST(rw_sole_reader_upgrades_others_make_it_wait)
{
	const char *n = lockname("up");
	struct http_resp r;
	struct bg up;
	int64_t released_at;
	long long scripts0;

	long long read_token, write_token;

	CHECK(req("PUT", RW(n, "read", "owner=a"), &r) == 200, "a reads: %s", r.body);
	read_token = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(req("PUT", RW(n, "write", "owner=a"), &r) == 200, "the sole reader upgrades: %s",
	      r.body);
	write_token = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(write_token > read_token, "the write holding has a token of its own, newer "
	      "(%lld after %lld)", write_token, read_token);
	req("GET", RW(n, "", ""), &r);
	CHECK(!strcmp(json_str(&r, "mode"), "write"), "mode write: %s", r.body);
	http_free(&r);
	req("DELETE", RW(n, "write", "owner=a"), NULL);
	/* the read holding went on through the write: reading again is a
	 * repeat of it, and gives its token back, older than the write's (a
	 * client that never saw the read's answer sees a token go back) */
	CHECK(req("PUT", RW(n, "read", "owner=a"), &r) == 200, "a reads on: %s", r.body);
	CHECK(json_int(&r, "fencing_token") == read_token,
	      "the read holding's own token: %lld (read %lld, write %lld)",
	      json_int(&r, "fencing_token"), read_token, write_token);
	http_free(&r);
	req("DELETE", RW(n, "read", "owner=a"), NULL);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "free again");

	req("PUT", RW(n, "read", "owner=a"), NULL);
	req("PUT", RW(n, "read", "owner=b"), NULL);
	req("PUT", RW(n, "write", "owner=a&wait_ms=400"), &r);
	CHECK_ERROR(r, 409, "locked", "with another reader the upgrade waits, bounded by wait_ms");
	CHECK(r.ms >= 350, "it waited (%.0f ms)", r.ms);
	http_free(&r);
	scripts0 = redis_scripts_called();
	bg_start(&up, "PUT", RW(n, "write", "owner=a&wait_ms=20000"), NULL);
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_rwlock:{%s}", n), "upgrade waiting");
	req("DELETE", RW(n, "read", "owner=b"), NULL);
	released_at = mono_ms();
	CHECK_GRANTED_WITHIN(up, released_at, 500,
			     "the upgrade goes through once the other reader left");
	http_free(&up.r);
	req("DELETE", RW(n, "write", "owner=a"), NULL);
	req("DELETE", RW(n, "read", "owner=a"), NULL);
}

TEST(rw_write_release_wakes_every_reader_together)
{
	enum { N = 10 };
	const char *n = lockname("all");
	static struct bg rd[N];
	char q[64];
	int64_t released_at;
	long long scripts0;

	CHECK(req("PUT", RW(n, "write", "owner=w&ttl_ms=60000"), NULL) == 200, "writer");
	scripts0 = redis_scripts_called();
	for (int i = 0; i < N; i++) {
		snprintf(q, sizeof(q), "owner=r%d&wait_ms=20000", i);
		bg_start(&rd[i], "PUT", RW(n, "read", q), NULL);
	}
	CHECK(wait_parked(NULL, N, scripts0, 5000, "redisson_rwlock:{%s}", n), "%d readers wait", N);
	req("DELETE", RW(n, "write", "owner=w"), NULL);
	released_at = mono_ms();
	for (int i = 0; i < N; i++) {
		CHECK_GRANTED_WITHIN(rd[i], released_at, 1000, "a reader enters");
		http_free(&rd[i].r);
	}
	CHECK(rcmd_int("HLEN %s", n) == N + 1, "all %d read at once", N);
	for (int i = 0; i < N; i++) {
		snprintf(q, sizeof(q), "owner=r%d", i);
		req("DELETE", RW(n, "read", q), NULL);
	}
}

TEST(rw_read_release_that_frees_the_lock_wakes_a_writer)
{
	const char *n = lockname("rw1");
	struct bg w;
	int64_t released_at;
	long long scripts0;

	CHECK(req("PUT", RW(n, "read", "owner=r&ttl_ms=60000"), NULL) == 200, "reader");
	scripts0 = redis_scripts_called();
	bg_start(&w, "PUT", RW(n, "write", "owner=w&wait_ms=20000"), NULL);
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_rwlock:{%s}", n), "writer waits");
	req("DELETE", RW(n, "read", "owner=r"), NULL);
	released_at = mono_ms();
	CHECK_GRANTED_WITHIN(w, released_at, 500, "writer enters");
	http_free(&w.r);
	req("DELETE", RW(n, "write", "owner=w"), NULL);
}

TEST(rw_new_readers_queue_behind_a_waiting_writer)
{
	const char *n = lockname("starve");
	struct http_resp r;
	struct bg w, late;
	long long tw, tr, scripts0;

	req("PUT", RW(n, "read", "owner=early&ttl_ms=60000"), NULL);
	scripts0 = redis_scripts_called();
	bg_start(&w, "PUT", RW(n, "write", "owner=w&wait_ms=20000"), NULL);
	CHECK(WAIT_FOR(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", n) == 1, 3000),
	      "the writer is registered as waiting");
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_rwlock:{%s}", n), "and parked");
	req("PUT", RW(n, "read", "owner=late"), &r);
	CHECK_ERROR(r, 409, "locked", "a new reader does not overtake the waiting writer");
	http_free(&r);
	CHECK(req("PUT", RW(n, "read", "owner=early"), NULL) == 200,
	      "a reader already inside may re-enter (no self-deadlock)");
	scripts0 = redis_scripts_called();
	bg_start(&late, "PUT", RW(n, "read", "owner=late&wait_ms=20000"), NULL);
	CHECK(wait_waiters(NULL, 2, 3000), "the late reader waits too");
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_rwlock:{%s}", n),
	      "past its post-subscribe retry");
	req("DELETE", RW(n, "read", "owner=early"), NULL);
	req("DELETE", RW(n, "read", "owner=early"), NULL);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the writer goes first");
	tw = json_int(&w.r, "fencing_token");
	http_free(&w.r);
	CHECK(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", n) == 0, "no longer waiting");
	sleep_ms(100);		/* a window in which a wrongly woken reader would enter */
	CHECK(late.done_ms == 0, "the late reader still waits while the writer holds");
	req("DELETE", RW(n, "write", "owner=w"), NULL);
	bg_join(&late);
	CHECK_STATUS(late.r, 200, "then the late reader");
	tr = json_int(&late.r, "fencing_token");
	http_free(&late.r);
	CHECK(tr > tw, "in that order (tokens %lld then %lld)", tw, tr);
	req("DELETE", RW(n, "read", "owner=late"), NULL);
}

/* A stream of readers, each holding 300 ms and overlapping the next, for
 * stream_ms: without writer preference the lock is never free meanwhile. */
static const char *stream_name;
static int64_t stream_until;
static int stream_reads;

static void *reader_stream(void *arg)
{
	int id = (int)(long)arg, k = 0;
	char acq[512], rel[512];
	struct http_resp r;

	while (mono_ms() < stream_until) {
		snprintf(acq, sizeof(acq), "/rwlocks/%s/read?owner=s%d-%d&wait_ms=20000",
			 stream_name, id, k);
		snprintf(rel, sizeof(rel), "/rwlocks/%s/read?owner=s%d-%d", stream_name, id, k++);
		if (http("PUT", acq, NULL, &r) == 0 && r.status == 200) {
			__atomic_add_fetch(&stream_reads, 1, __ATOMIC_RELAXED);
			http_free(&r);
			sleep_ms(300);
			http("DELETE", rel, NULL, &r);
		}
		http_free(&r);
	}
	return NULL;
}

TEST(rw_steady_stream_of_readers_does_not_starve_a_writer)
{
	enum { STREAMS = 3 };
	pthread_t t[STREAMS];
	struct http_resp r;
	int64_t asked;

	stream_name = lockname("stream");
	stream_reads = 0;
	stream_until = mono_ms() + 4000 * slow_factor();
	for (long i = 0; i < STREAMS; i++) {
		pthread_create(&t[i], NULL, reader_stream, (void *)i);
		sleep_ms(100);		/* staggered: their holds overlap */
	}
	CHECK(WAIT_FOR(__atomic_load_n(&stream_reads, __ATOMIC_RELAXED) >= STREAMS, 3000),
	      "the stream flows (%d reads)", stream_reads);
	asked = mono_ms();
	req("PUT", RW(stream_name, "write", "owner=w&wait_ms=20000"), &r);
	CHECK_STATUS(r, 200, "the writer gets in while the stream goes on");
	http_free(&r);
	/* the holds granted before it end within 300 ms; allow slack, but far
	 * less than the 3 s of stream still to come */
	CHECK(mono_ms() - asked < 1500 * slow_factor(),
	      "writer waited %lld ms behind a reader stream whose holds last 300 ms",
	      (long long)(mono_ms() - asked));
	CHECK(mono_ms() < stream_until, "and it got in before the stream ended");
	printf("# writer got in %lld ms after asking, inside a 4 s reader stream\n",
	       (long long)(mono_ms() - asked));
	req("DELETE", RW(stream_name, "write", "owner=w"), NULL);
	for (int i = 0; i < STREAMS; i++)
		pthread_join(t[i], NULL);
	CHECK(stream_reads >= 15, "the stream really flowed (%d reads)", stream_reads);
}

TEST(rw_waiting_writer_that_gives_up_lets_readers_in)
{
	const char *n = lockname("giveup");
	struct bg w, rd;

	req("PUT", RW(n, "read", "owner=early&ttl_ms=60000"), NULL);
	bg_start(&w, "PUT", RW(n, "write", "owner=w&wait_ms=800"), NULL);
	CHECK(WAIT_FOR(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", n) == 1, 3000), "writer waits");
	bg_start(&rd, "PUT", RW(n, "read", "owner=late&wait_ms=20000"), NULL);
	bg_join(&w);
	CHECK_ERROR(w.r, 409, "locked", "the writer gives up");
	http_free(&w.r);
	bg_join(&rd);
	CHECK_STATUS(rd.r, 200, "the reader held back by it enters as soon as it left");
	CHECK(rd.done_ms - w.done_ms < 500 * slow_factor(), "%lld ms later",
	      (long long)(rd.done_ms - w.done_ms));
	http_free(&rd.r);
	CHECK(rcmd_int("EXISTS dlockd_rwlock_writers:{%s}", n) == 0, "nothing left behind");
	req("DELETE", RW(n, "read", "owner=early"), NULL);
	req("DELETE", RW(n, "read", "owner=late"), NULL);
}

TEST(rw_heartbeats_and_force_release_per_side)
{
	const char *n = lockname("hbf");
	struct http_resp r;

	req("PUT", RW(n, "read", "owner=r&ttl_ms=1000"), NULL);
	req("PUT", RW(n, "read", "owner=r&ttl_ms=1000&reentrant=true"), NULL);
	CHECK(req("POST", RW(n, "read/heartbeat", "owner=r&ttl_ms=60000"), &r) == 200,
	      "reader heartbeat: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("PTTL {%s}:r:rwlock_timeout:1", n) > 59000 &&
	      rcmd_int("PTTL {%s}:r:rwlock_timeout:2", n) > 59000 && rcmd_int("PTTL %s", n) > 59000,
	      "every read hold and the lock renewed");
	req("POST", RW(n, "write/heartbeat", "owner=r"), &r);
	CHECK_ERROR(r, 409, "not_owner", "a reader cannot renew the write side");
	CHECK(strstr(json_str(&r, "message"), "not held by 'r', which reads it"),
	      "and is told it reads, not that another owner holds it: %s", r.body);
	http_free(&r);
	req("POST", RW(n, "read/heartbeat", "owner=x"), &r);
	CHECK_ERROR(r, 409, "not_held", "someone who does not read cannot renew (read holds are "
		    "each reader's own: x holds none)");
	CHECK(strstr(json_str(&r, "message"), "not held by 'x'"), "message: %s", r.body);
	http_free(&r);
	req("DELETE", RW(n, "write", "force=true"), &r);
	CHECK(json_bool(&r, "released") == 0, "forcing the write side leaves readers: %s", r.body);
	http_free(&r);
	req("DELETE", RW(n, "read", "force=true"), &r);
	CHECK(json_bool(&r, "released") == 1, "forcing the read side frees it: %s", r.body);
	http_free(&r);
	req("POST", RW(n, "read/heartbeat", "owner=r"), &r);
	CHECK_ERROR(r, 409, "not_held", "after that the reader's heartbeat says not_held");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "a heartbeat never re-creates it");
}

TEST(name_in_use_as_another_kind_is_refused_untouched)
{
	const char *a = lockname("plain"), *b = lockname("rw");
	char p[512];
	struct http_resp r;
	redisReply *rep;

	snprintf(p, sizeof(p), "/locks/%s?owner=x&ttl_ms=60000", a);
	http("PUT", p, NULL, &r);
	http_free(&r);
	static const char *const sides[][2] = { { "PUT", "read" }, { "PUT", "write" },
						{ "DELETE", "read" }, { "GET", "" } };
	for (size_t i = 0; i < sizeof(sides) / sizeof(sides[0]); i++) {
		req(sides[i][0], RW(a, sides[i][1], !strcmp(sides[i][0], "GET") ? "" :
				    !strcmp(sides[i][0], "DELETE") ? "force=true" : "owner=y"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", "rwlock call on a plain lock's name");
		http_free(&r);
	}
	rep = rcmd("HGETALL %s", a);
	CHECK(rep && rep->elements == 2 && !strcmp(rep->element[0]->str, "x"),
	      "the plain lock is untouched (Redisson would have added a mode field)");
	freeReplyObject(rep);
	CHECK(rcmd_int("PTTL %s", a) > 55000, "and its lease too");

	req("PUT", RW(b, "write", "owner=w&ttl_ms=60000"), NULL);
	snprintf(p, sizeof(p), "/locks/%s?owner=y", b);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "wrong_kind", "plain acquire of an rwlock's name");
	http_free(&r);
	snprintf(p, sizeof(p), "/fairlocks/%s?force=true", b);
	http("DELETE", p, NULL, &r);
	CHECK_ERROR(r, 409, "wrong_kind", "fair force release of an rwlock's name");
	http_free(&r);
	CHECK(rcmd_int("HGET %s w:write", b) == 1 && rcmd_int("EXISTS redisson_lock_queue:{%s}", b) == 0,
	      "the rwlock is untouched");
	req("DELETE", RW(b, "write", "owner=w"), NULL);
}

/* ----- Redisson interop ----- */

TEST(rwlock_interop_with_redisson_readers_and_messages)
{
	const char *n = lockname("rrw");
	char chan[300];
	struct bg w;
	int64_t released_at;
	redisContext *sub = redis_client(NULL);
	redisReply *rep;
	struct timeval tv = { 3 * slow_factor(), 0 };
	long long scripts0;

	/* a Redisson reader holds: mode, its field, its timeout key */
	rcmd_int("HSET %s mode read java:1 1", n);
	rcmd_int("SET {%s}:java:1:rwlock_timeout:1 1 PX 60000", n);
	rcmd_int("PEXPIRE %s 60000", n);
	CHECK(req("PUT", RW(n, "read", "owner=svc"), NULL) == 200, "a dlockd reader shares with it");
	req("DELETE", RW(n, "read", "owner=svc"), NULL);
	CHECK(rcmd_int("PTTL %s", n) > 55000, "and leaves the Redisson reader's lease alone");
	scripts0 = redis_scripts_called();
	bg_start(&w, "PUT", RW(n, "write", "owner=svc&wait_ms=20000"), NULL);
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_rwlock:{%s}", n), "dlockd writer waits");
	/* Redisson's read unlock: last hold gone, DEL, "0" on the channel */
	rcmd_int("HDEL %s java:1", n);
	rcmd_int("DEL {%s}:java:1:rwlock_timeout:1 %s", n, n);
	rcmd_int("PUBLISH redisson_rwlock:{%s} 0", n);
	released_at = mono_ms();
	CHECK_GRANTED_WITHIN(w, released_at, 500, "woken by Redisson's read unlock");
	http_free(&w.r);

	CHECK(sub, "subscriber");
	snprintf(chan, sizeof(chan), "redisson_rwlock:{%s}", n);
	rep = redisCommand(sub, "SUBSCRIBE %s", chan);
	freeReplyObject(rep);
	req("DELETE", RW(n, "write", "owner=svc"), NULL);
	redisSetTimeout(sub, tv);
	rep = NULL;
	CHECK(redisGetReply(sub, (void **)&rep) == REDIS_OK && rep && rep->elements == 3 &&
	      !strcmp(rep->element[2]->str, "1"), "a write release publishes \"1\" (wake all)");
	freeReplyObject(rep);
	req("PUT", RW(n, "read", "owner=svc"), NULL);
	req("DELETE", RW(n, "read", "owner=svc"), NULL);
	rep = NULL;
	CHECK(redisGetReply(sub, (void **)&rep) == REDIS_OK && rep && rep->elements == 3 &&
	      !strcmp(rep->element[2]->str, "0"), "the last read release publishes \"0\"");
	freeReplyObject(rep);
	redisFree(sub);
}

/* ----- Stress ----- */

enum { RW_CLIENTS = 16, RW_ROUNDS = 100 };
static const char *rw_name;
static int readers_in, writers_in, overlaps, rw_errors, reads_done, writes_done;
static int max_readers;

static void *rw_client(void *arg)
{
	int id = (int)(long)arg;
	unsigned seed = (unsigned)id * 2654435761u;
	char acq[512], rel[512];
	struct http_resp r;

	for (int i = 0; i < RW_ROUNDS; i++) {
		bool write = rand_r(&seed) % 4 == 0;
		const char *side = write ? "write" : "read";

		snprintf(acq, sizeof(acq), "/rwlocks/%s/%s?owner=c%d&ttl_ms=20000&wait_ms=120000",
			 rw_name, side, id);
		snprintf(rel, sizeof(rel), "/rwlocks/%s/%s?owner=c%d", rw_name, side, id);
		if (http("PUT", acq, NULL, &r) != 0 || r.status != 200) {
			__atomic_add_fetch(&rw_errors, 1, __ATOMIC_RELAXED);
			http_free(&r);
			continue;
		}
		http_free(&r);
		if (write) {
			if (__atomic_add_fetch(&writers_in, 1, __ATOMIC_SEQ_CST) != 1 ||
			    __atomic_load_n(&readers_in, __ATOMIC_SEQ_CST) != 0)
				__atomic_add_fetch(&overlaps, 1, __ATOMIC_RELAXED);
			sleep_ms(1);
			__atomic_sub_fetch(&writers_in, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&writes_done, 1, __ATOMIC_RELAXED);
		} else {
			int now = __atomic_add_fetch(&readers_in, 1, __ATOMIC_SEQ_CST);

			if (__atomic_load_n(&writers_in, __ATOMIC_SEQ_CST) != 0)
				__atomic_add_fetch(&overlaps, 1, __ATOMIC_RELAXED);
			if (now > __atomic_load_n(&max_readers, __ATOMIC_RELAXED))
				__atomic_store_n(&max_readers, now, __ATOMIC_RELAXED);
			sleep_ms(i % 3);
			__atomic_sub_fetch(&readers_in, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&reads_done, 1, __ATOMIC_RELAXED);
		}
		if (http("DELETE", rel, NULL, &r) != 0 || r.status != 200)
			__atomic_add_fetch(&rw_errors, 1, __ATOMIC_RELAXED);
		http_free(&r);
	}
	return NULL;
}

TEST(rw_stress_16_clients_random_mix_no_writer_overlaps)
{
	pthread_t t[RW_CLIENTS];

	rw_name = lockname("mix");
	readers_in = writers_in = overlaps = rw_errors = reads_done = writes_done = 0;
	max_readers = 0;
	for (long i = 0; i < RW_CLIENTS; i++)
		pthread_create(&t[i], NULL, rw_client, (void *)i);
	for (int i = 0; i < RW_CLIENTS; i++)
		pthread_join(t[i], NULL);
	CHECK(rw_errors == 0, "%d requests failed", rw_errors);
	CHECK(overlaps == 0, "%d times a writer overlapped someone", overlaps);
	CHECK(reads_done + writes_done == RW_CLIENTS * RW_ROUNDS, "%d + %d sections", reads_done,
	      writes_done);
	CHECK(writes_done > 100 && max_readers > 1,
	      "the mix really mixed: %d writes, up to %d readers at once", writes_done, max_readers);
	printf("# %d reads, %d writes, up to %d readers at once, no overlap\n", reads_done,
	       writes_done, max_readers);
	CHECK(rcmd_int("EXISTS %s", rw_name) == 0 &&
	      rcmd_int("EXISTS dlockd_rwlock_writers:{%s}", rw_name) == 0, "nothing left in Redis");
}
