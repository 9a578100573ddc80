/* test_lease_end.c -- waiters woken by a lease that ends with nobody
 * releasing (expiry publishes nothing): every sleeping waiter must retry
 * no later than the lease end of whoever holds the lock by then -- a
 * waiter that won and died without releasing, a holder that shortened its
 * lease by heartbeat (on this dlockd, or through another one) -- in every
 * kind of lock; and covering them must not make a release or a lease end
 * with many waiters cost a script run per waiter. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How late after a lease end the next waiter may be granted: generous
 * for a loaded machine, far below the waits (20 s) a missed wake-up costs. */
#define LATE_MS 1500

/* The reproduction, for the lock resource fmt ("/locks/%s", ...):
 * h holds for 1 s; w1 and w2 wait (lease 500 ms). One of them is granted
 * at h's lease end and dies holding it; the other must be granted when
 * that lease ends, not at the end of its own 20 s wait. */
static void winner_dies(const char *fmt, const char *hint)
{
	const char *n = lockname(hint);
	char res[300], p[512];
	struct bg w1, w2;
	const struct bg *first, *second;

	snprintf(res, sizeof(res), fmt, n);
	CHECK(status_of(NULL, "PUT", "%s?owner=h&ttl_ms=1000", res) == 200, "h takes %s", res);
	snprintf(p, sizeof(p), "%s?owner=w1&ttl_ms=500&wait_ms=20000", res);
	bg_start(&w1, "PUT", p, NULL);
	CHECK(wait_waiters(NULL, 1, 3000), "w1 waits");
	snprintf(p, sizeof(p), "%s?owner=w2&ttl_ms=500&wait_ms=20000", res);
	bg_start(&w2, "PUT", p, NULL);
	bg_join(&w1);
	bg_join(&w2);
	CHECK_STATUS(w1.r, 200, "w1 is granted");
	CHECK_STATUS(w2.r, 200, "w2 is granted");
	first = w1.done_ms <= w2.done_ms ? &w1 : &w2;
	second = first == &w1 ? &w2 : &w1;
	printf("# %s: second waiter granted %lld ms after the first (lease 500 ms)\n", fmt,
	       (long long)(second->done_ms - first->done_ms));
	CHECK(second->done_ms - first->done_ms < 500 + LATE_MS * slow_factor(),
	      "%s: the second waiter was granted %lld ms after the first, whose lease was "
	      "500 ms; want < %d", res, (long long)(second->done_ms - first->done_ms),
	      500 + LATE_MS);
	http_free(&w1.r);
	http_free(&w2.r);
}

TEST(lease_end_lock_waiter_that_won_and_died_wakes_the_next)
{
	winner_dies("/locks/%s", "crash");
}

TEST(lease_end_fair_waiter_that_won_and_died_wakes_the_next)
{
	winner_dies("/fairlocks/%s", "fcrash");
}

TEST(lease_end_rw_writer_that_won_and_died_wakes_the_next_writer)
{
	winner_dies("/rwlocks/%s/write", "wcrash");
}

/* A writer holds; w waits to write, r1 and r2 to read (behind w: a
 * waiting writer goes first). w is granted at the holder's lease end and
 * dies; both readers must be let in when w's lease ends. */
TEST(lease_end_rw_readers_behind_a_writer_that_won_and_died)
{
	const char *n = lockname("rcrash");
	char p[512];
	struct bg w, r1, r2;
	int64_t w_end;

	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/write?owner=h&ttl_ms=1000", n) == 200,
	      "h takes the write lock");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=w&ttl_ms=500&wait_ms=20000", n);
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_waiters(NULL, 1, 3000), "w waits");
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=r1&ttl_ms=5000&wait_ms=20000", n);
	bg_start(&r1, "PUT", p, NULL);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=r2&ttl_ms=5000&wait_ms=20000", n);
	bg_start(&r2, "PUT", p, NULL);
	bg_join(&w);
	bg_join(&r1);
	bg_join(&r2);
	CHECK_STATUS(w.r, 200, "the waiting writer is granted");
	CHECK_STATUS(r1.r, 200, "r1 is granted");
	CHECK_STATUS(r2.r, 200, "r2 is granted");
	w_end = w.done_ms + 500;
	printf("# readers granted %lld and %lld ms after the dead writer's lease end\n",
	       (long long)(r1.done_ms - w_end), (long long)(r2.done_ms - w_end));
	CHECK(r1.done_ms > w.done_ms && r2.done_ms > w.done_ms,
	      "the writer went first (w %lld, r1 %lld, r2 %lld)", (long long)w.done_ms,
	      (long long)r1.done_ms, (long long)r2.done_ms);
	/* Refused while w waited, the readers' own next look comes a queue
	 * refresh later (1.67 s by default), too late: w's lease end, which
	 * this dlockd learnt when it granted w, must wake them. */
	CHECK(r1.done_ms - w_end < 1000 * slow_factor() &&
	      r2.done_ms - w_end < 1000 * slow_factor(),
	      "readers granted %lld and %lld ms after the dead writer's lease end; want < 1000",
	      (long long)(r1.done_ms - w_end), (long long)(r2.done_ms - w_end));
	http_free(&w.r);
	http_free(&r1.r);
	http_free(&r2.r);
}

/* h holds for 10 s, w waits; then h shortens its lease to 300 ms by a
 * heartbeat through hb_base and dies. Returns how long after that lease
 * end w was granted, the end counted from the heartbeat's answer; Redis
 * ran it up to *rtt ms before (a slow machine: valgrind), so w may be
 * granted as early as -*rtt. INT64_MIN on failure. */
static int64_t shortened(const char *hint, const char *hb_base, int64_t *rtt)
{
	const char *n = lockname(hint);
	char p[512];
	struct http_resp r;
	struct bg w;
	int64_t end, sent;
	long long scripts0;

	if (!lock_hold(NULL, n, "h", 10000))
		return INT64_MIN;
	snprintf(p, sizeof(p), "/locks/%s?owner=w&wait_ms=20000", n);
	scripts0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	/* asleep, having seen the 10 s lease */
	if (!wait_parked(NULL, 1, scripts0, 3000, "redisson_lock__channel:{%s}", n)) {
		bg_join(&w);
		http_free(&w.r);
		return INT64_MIN;
	}
	snprintf(p, sizeof(p), "/locks/%s/heartbeat?owner=h&ttl_ms=300", n);
	sent = mono_ms();
	http_on(hb_base, "POST", p, NULL, &r);
	end = mono_ms() + 300;
	*rtt = end - 300 - sent;
	if (r.status != 200 || json_int(&r, "ttl_ms") <= 0 || json_int(&r, "ttl_ms") > 300)
		test_fail(__FILE__, __LINE__, "heartbeat: %ld %s", r.status, r.body);
	http_free(&r);
	bg_join(&w);
	if (w.r.status != 200)
		test_fail(__FILE__, __LINE__, "w: %ld %s", w.r.status, w.r.body);
	http_free(&w.r);
	printf("# heartbeat through %s: waiter granted %lld ms after the shortened lease end\n",
	       hb_base == H_dlockd.base ? "the same dlockd" : "another dlockd",
	       (long long)(w.done_ms - end));
	return test_failed() ? INT64_MIN : w.done_ms - end;
}

TEST(lease_shortened_by_heartbeat_on_the_same_dlockd_wakes_waiters_at_its_end)
{
	int64_t rtt = 0, late = shortened("hbsame", H_dlockd.base, &rtt);

	/* this dlockd served the heartbeat: it knows the new lease end */
	CHECK(late != INT64_MIN && late >= -rtt && late < 1000 * slow_factor(),
	      "granted %lld ms after the shortened lease ended (heartbeat took %lld ms); "
	      "want < 1000", (long long)late, (long long)rtt);
}

TEST(lease_shortened_through_another_dlockd_wakes_waiters_at_its_end)
{
	struct dlockd_srv d2;
	int64_t rtt = 0, late;

	CHECK(dlockd_start(&d2, NULL, NULL) == 0, "second dlockd");
	late = shortened("hbother", d2.base, &rtt);
	dlockd_stop(&d2, 5000);
	/* the renew script published: a waiter here looked and saw the end */
	CHECK(late != INT64_MIN && late >= -rtt && late < 1000 * slow_factor(),
	      "granted %lld ms after the shortened lease ended (heartbeat took %lld ms); "
	      "want < 1000", (long long)late, (long long)rtt);
}

/* The owner that holds plain lock n now ("" if none). */
static void holder_of(const char *n, char *out, size_t len)
{
	redisReply *rep = rcmd("HKEYS %s", n);

	out[0] = 0;
	if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1)
		snprintf(out, len, "%s", rep->element[0]->str);
	if (rep)
		freeReplyObject(rep);
}

/* 50 waiters: the lease end that frees the lock, and then a release, each
 * cost a few script runs, not one per waiter. */
TEST(lease_end_and_release_with_fifty_waiters_cost_few_script_runs)
{
	enum { N = 50 };
	const char *n = lockname("herd");
	static struct bg w[N];
	char p[512], who[128];
	long long calls0, calls1, calls2;
	int granted = 0;
	int64_t t0 = mono_ms();

	CHECK(lock_hold(NULL, n, "holder", 3000 * slow_factor()), "holder");
	calls0 = redis_scripts_called();
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "/locks/%s?owner=w%d&ttl_ms=60000&wait_ms=%d", n, i,
			 8000 * slow_factor());
		bg_start(&w[i], "PUT", p, NULL);
	}
	CHECK(wait_parked(NULL, N, calls0, 2500, "redisson_lock__channel:{%s}", n),
	      "all %d waiting, each past its post-subscribe retry", N);
	calls0 = redis_scripts_called();
	CHECK(mono_ms() - t0 < 2800 * slow_factor(), "set up before the lease ended");
	CHECK(WAIT_FOR(({ holder_of(n, who, sizeof(who)); who[0] == 'w'; }), 5000),
	      "a waiter is granted at the holder's lease end");
	sleep_ms(500);		/* the window measured: a wake-all would show in it */
	calls1 = redis_scripts_called();
	/* the one retry that wins; a wake-all would be 50 */
	printf("# lease end with %d waiters: %lld script runs\n", N, calls1 - calls0);
	CHECK(calls1 - calls0 <= 3, "%lld script runs for a lease end with %d waiters; want <= 3",
	      calls1 - calls0, N);

	CHECK(lock_release(NULL, n, who) == 200, "the first winner releases");
	CHECK(WAIT_FOR(({ char h[128]; holder_of(n, h, sizeof(h));
			  h[0] == 'w' && strcmp(h, who); }), 3000),
	      "the release hands the lock to another waiter");
	sleep_ms(500);		/* the window measured, as above */
	calls2 = redis_scripts_called();
	/* the release, the one woken waiter's acquire (plus a re-check) */
	printf("# release with %d waiters: %lld script runs\n", N - 1, calls2 - calls1);
	CHECK(calls2 - calls1 <= 4, "%lld script runs for a release with %d waiters; want <= 4",
	      calls2 - calls1, N - 1);
	for (int i = 0; i < N; i++) {
		bg_join(&w[i]);
		granted += w[i].r.status == 200;
		http_free(&w[i].r);
	}
	CHECK(granted == 2, "%d granted; want 2 (the others time out)", granted);
}
