/* test_fair_probe.c -- hostile probes of the fair-queue cap and of leavers
 * given back in batches (issue 27): a dead place cannot be revived past
 * the cap, the head leaving together with others still wakes the next live
 * waiter at once (no refresh to rescue it), and two dlockd instances
 * racing at cap - 1 queue exactly one more waiter. */
#include "../harness/harness.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static long long qlen(const char *name)
{
	return rcmd_int("LLEN redisson_lock_queue:{%s}", name);
}

static long long live_places(const char *name)
{
	return rcmd_int("EVAL %s 1 redisson_lock_timeout:{%s}",
			"local t = redis.call('time') "
			"return redis.call('zcount', KEYS[1], '(' .. (t[1] * 1000 + "
			"math.floor(t[2] / 1000)), '+inf')", name);
}

static void stop_dlockd(void *arg)
{
	dlockd_stop(arg, 5000);
}

/* Places whose deadline passed but that nobody purged yet (behind a live
 * head: a Redisson client that gave up, a dead dlockd's waiters) are not
 * places: their owners coming back must meet the cap like anyone new. */
TEST(fair_probe_dead_places_cannot_be_revived_past_the_cap)
{
	static const char *const flags[] = { "--max-fair-queue", "2", NULL };
	static struct dlockd_srv d;
	const char *n = lockname("revive"), *rw = lockname("revivew");
	struct bg live1, live2, wl1, wl2;
	struct http_resp r;
	char p[512];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd --max-fair-queue 2");
	test_at_end(stop_dlockd, &d);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=holder&ttl_ms=60000", n);
	CHECK(status_of(&d, "PUT", "%s", p) == 200, "holder");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=live1&wait_ms=20000", n);
	bg_start_on(&live1, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(qlen(n) == 1, 5000), "live1 queued at the head");
	/* two dead places behind it, as a gone Redisson client leaves them */
	CHECK(rcmd_int("RPUSH redisson_lock_queue:{%s} dead1 dead2", n) == 3 &&
	      rcmd_int("ZADD redisson_lock_timeout:{%s} 1000 dead1 1000 dead2", n) == 2,
	      "dead places planted");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=live2&wait_ms=20000", n);
	bg_start_on(&live2, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(qlen(n) == 4, 5000), "live2 queued: 2 live places, the cap");
	for (int i = 1; i <= 2; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=dead%d&wait_ms=20000", n, i);
		http_on(d.base, "PUT", p, NULL, &r);
		CHECK_ERROR(r, 409, "queue_full", "a dead place's owner returning to a full queue");
		http_free(&r);
	}
	CHECK(live_places(n) == 2, "still 2 live places, not %lld", live_places(n));

	/* waiting writers: the same */
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=reader&ttl_ms=60000", rw);
	CHECK(status_of(&d, "PUT", "%s", p) == 200, "a reader");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=wl1&wait_ms=20000", rw);
	bg_start_on(&wl1, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", rw) == 1, 5000), "wl1 waits");
	CHECK(rcmd_int("ZADD dlockd_rwlock_writers:{%s} 1000 dw1", rw) == 1, "a dead writer");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=wl2&wait_ms=20000", rw);
	bg_start_on(&wl2, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", rw) == 3, 5000), "wl2 waits");
	snprintf(p, sizeof(p), "/rwlocks/%s/write?owner=dw1&wait_ms=20000", rw);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "queue_full", "a dead writer returning past the cap");
	http_free(&r);

	/* the queues move on as ever */
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=holder", n);
	CHECK(status_of(&d, "DELETE", "%s", p) == 200, "holder leaves");
	bg_join(&live1);
	CHECK_STATUS(live1.r, 200, "live1 next");
	http_free(&live1.r);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=live1", n);
	CHECK(status_of(&d, "DELETE", "%s", p) == 200, "live1 leaves");
	bg_join(&live2);
	CHECK_STATUS(live2.r, 200, "live2 next, past the dead places");
	http_free(&live2.r);
	snprintf(p, sizeof(p), "/rwlocks/%s/read?owner=reader", rw);
	CHECK(status_of(&d, "DELETE", "%s", p) == 200, "reader leaves");
	bg_join(&wl1);
	bg_join(&wl2);
	CHECK(wl1.r.status == 200 || wl2.r.status == 200, "a writer writes");
	http_free(&wl1.r);
	http_free(&wl2.r);
}

/* The head and the two behind it hang up in one loop turn (one leaver
 * script); the holder's lease then runs out with nobody releasing. The
 * fourth waiter must have been told it is head, and so be served at the
 * lease end, not at the next queue refresh (a minute away here). */
TEST(fair_probe_head_leaving_with_others_wakes_the_next_at_lease_end)
{
	static const char *const flags[] = { "--threads", "1", "--queue-ttl-ms", "180000",
					     NULL };
	static struct dlockd_srv d;
	const char *n = lockname("batchhead");
	struct bg next, last;
	char p[512], req[600];
	int fd[3];
	int64_t lease_end;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd, one loop, refresh every minute");
	test_at_end(stop_dlockd, &d);
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=4000", n) == 200,
	      "holder, 4 s lease");
	lease_end = mono_ms() + 4000;
	for (int i = 0; i < 3; i++) {
		int len = snprintf(req, sizeof(req), "PUT /fairlocks/%s?owner=gone%d&wait_ms=60000 "
				   "HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", n, i);

		fd[i] = raw_connect(d.port);
		CHECK(fd[i] >= 0 && write(fd[i], req, (size_t)len) == len, "gone%d sends", i);
		CHECK(WAIT_FOR(qlen(n) == i + 1, 3000), "gone%d queued", i);
	}
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=next&ttl_ms=60000&wait_ms=60000", n);
	bg_start_on(&next, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(qlen(n) == 4, 3000), "next queued fourth");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=last&wait_ms=60000", n);
	bg_start_on(&last, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(qlen(n) == 5, 3000), "last queued fifth");
	for (int i = 0; i < 3; i++)
		close(fd[i]);
	CHECK(WAIT_FOR(qlen(n) == 2, 3000), "the three left, in one go");
	CHECK(mono_ms() < lease_end - 500, "they left before the lease ended (machine too slow)");
	bg_join(&next);
	CHECK_STATUS(next.r, 200, "next is served");
	CHECK(next.done_ms - lease_end < 1500 * slow_factor(),
	      "next served %lld ms after the lease end; want at once, not at a refresh",
	      (long long)(next.done_ms - lease_end));
	http_free(&next.r);
	CHECK(qlen(n) == 1, "last still waits behind next (mutual exclusion, FIFO)");
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=next", n) == 200, "next leaves");
	bg_join(&last);
	CHECK_STATUS(last.r, 200, "last is served after next");
	http_free(&last.r);
}

/* Two dlockd instances on one Redis, the queue at cap - 1: of six waiters
 * arriving at once through both, exactly one is queued; the others get 409
 * queue_full at once; a second request of a queued owner is not refused. */
TEST(fair_probe_two_instances_racing_at_cap_minus_one_queue_one)
{
	static const char *const flags[] = { "--max-fair-queue", "3", NULL };
	static struct dlockd_srv a, b;
	const char *n = lockname("race");
	struct bg pre[2], w[6], again;
	char p[512];
	int ok = 0, full = 0;

	CHECK(dlockd_start(&a, NULL, flags) == 0, "dlockd A");
	test_at_end(stop_dlockd, &a);
	CHECK(dlockd_start(&b, NULL, flags) == 0, "dlockd B");
	test_at_end(stop_dlockd, &b);
	CHECK(status_of(&a, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=60000", n) == 200, "holder");
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=pre%d&wait_ms=4000", n, i);
		bg_start_on(&pre[i], (i ? b : a).base, "PUT", p, NULL);
		CHECK(WAIT_FOR(qlen(n) == i + 1, 3000), "pre%d queued", i);
	}
	for (int i = 0; i < 6; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=racer%d&wait_ms=4000", n, i);
		bg_start_on(&w[i], (i % 2 ? b : a).base, "PUT", p, NULL);
	}
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=pre0&wait_ms=3000", n);
	bg_start_on(&again, b.base, "PUT", p, NULL);
	for (int i = 0; i < 6; i++) {
		bg_join(&w[i]);
		if (w[i].r.status == 409 && strstr(w[i].r.body, "queue_full"))
			full++;
		else if (w[i].r.status == 409 && strstr(w[i].r.body, "\"locked\""))
			ok++;	/* queued, then its wait ran out */
		http_free(&w[i].r);
	}
	CHECK(full == 5 && ok == 1, "%d queued and %d refused; want 1 and 5", ok, full);
	bg_join(&again);
	CHECK(again.r.status == 409 && strstr(again.r.body, "\"locked\""),
	      "a queued owner's second request waits, never queue_full: %ld %s", again.r.status,
	      again.r.body);
	http_free(&again.r);
	for (int i = 0; i < 2; i++) {
		bg_join(&pre[i]);
		http_free(&pre[i].r);
	}
	CHECK(WAIT_FOR(qlen(n) == 0, 3000), "every place given back");
}
