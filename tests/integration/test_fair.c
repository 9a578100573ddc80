/* test_fair.c -- /fairlocks against real dlockd and Redis: strict arrival
 * order on release and on lease expiry, a hand-off that costs the same
 * whatever the queue length, the next in line told the new holder's lease
 * (or a lease a heartbeat shortened) and served at its end, waiters that give up or hang up leaving the
 * queue at once, a dead dlockd's waiter that stops blocking within seconds,
 * no queue jumping, ordering under load, Redisson interop, and leavers of
 * a long queue that cost short scripts. */
#include "../harness/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static long long queue_len(const char *name)
{
	return rcmd_int("LLEN redisson_lock_queue:{%s}", name);
}

static bool queued(const char *name, const char *owner)
{
	redisReply *r = rcmd("ZSCORE redisson_lock_timeout:{%s} %s", name, owner);
	bool in = r && r->type == REDIS_REPLY_STRING;

	if (r)
		freeReplyObject(r);
	return in;
}

/* ----- Arrival order ----- */

enum { ORDER_N = 20 };

struct orderly {
	struct bg b;
	long long token;
};

/* Start waiters w0..w(N-1) one after another, each only once the previous
 * one is queued, so their arrival order is known. */
static bool start_in_order(struct orderly *w, const char *name, int ttl_ms, int n)
{
	char p[512];

	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=w%02d&ttl_ms=%d&wait_ms=60000", name, i,
			 ttl_ms);
		bg_start(&w[i].b, "PUT", p, NULL);
		if (!WAIT_FOR(queue_len(name) == i + 1, 5000))
			return false;
	}
	return true;
}

static void check_tokens_follow_arrival(struct orderly *w, int n)
{
	for (int i = 0; i < n; i++) {
		bg_join(&w[i].b);
		CHECK_STATUS(w[i].b.r, 200, "every waiter is served");
		w[i].token = json_int(&w[i].b.r, "fencing_token");
		http_free(&w[i].b.r);
	}
	for (int i = 1; i < n; i++)
		CHECK(w[i].token > w[i - 1].token,
		      "waiter %d (token %lld) was served before waiter %d (token %lld)", i,
		      w[i].token, i - 1, w[i - 1].token);
}

TEST(fair_lock_serves_waiters_in_arrival_order_on_release)
{
	static struct orderly w[ORDER_N];
	const char *n = lockname("fifo");
	char p[512];
	struct http_resp r;

	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder", n) == 200,
	      "holder takes the fair lock");
	CHECK(start_in_order(w, n, 30000, ORDER_N), "%d waiters queued in order", ORDER_N);
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder", n) == 200,
	      "holder releases");
	/* each waiter, once served, releases for the next one */
	for (int i = 0; i < ORDER_N; i++) {
		char owner[16];

		snprintf(owner, sizeof(owner), "w%02d", i);
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=%s", n, owner);
		CHECK(WAIT_FOR(flag_of(NULL, "held", "%s", p) == 1, 10000),
		      "waiter %s holds the lock in its turn", owner);
		for (int j = i + 1; j < ORDER_N; j++)
			CHECK(w[j].b.done_ms == 0, "waiter %d was answered before waiter %d", j, i);
		http("DELETE", p, NULL, &r);
		http_free(&r);
	}
	check_tokens_follow_arrival(w, ORDER_N);
}

TEST(fair_lock_serves_waiters_in_arrival_order_when_leases_run_out)
{
	static struct orderly w[ORDER_N];
	const char *n = lockname("fifo-ttl");

	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=1000", n) ==
	      200, "holder takes the fair lock and never releases it");
	CHECK(start_in_order(w, n, 150, ORDER_N), "%d waiters queued in order", ORDER_N);
	/* nobody releases: each lease of 150 ms runs out in turn */
	check_tokens_follow_arrival(w, ORDER_N);
	CHECK(queue_len(n) == 0 && rcmd_int("EXISTS redisson_lock_timeout:{%s}", n) == 0,
	      "queue and deadlines are gone once everyone was served");
}

/* ----- Cost of a hand-off ----- */

TEST(fair_hand_off_costs_the_same_with_a_long_queue)
{
	enum { N = 40 };
	static const char *const flags[] = { "--queue-ttl-ms", "600000", NULL };
	static struct bg w[N];
	struct dlockd_srv d;
	const char *n = lockname("cost");
	char p[512];
	long long calls0, calls1;

	/* places refreshed every 200 s: no refresh falls in the window measured */
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder", n) == 200, "holder");
	calls0 = redis_scripts_called();
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=w%d&wait_ms=20000", n, i);
		bg_start_on(&w[i], d.base, "PUT", p, NULL);
	}
	CHECK(WAIT_FOR(waiters_of(&d) == N && queue_len(n) == N, 10000), "%d queued", N);
	/* each on a channel of its own (not checked here) */
	CHECK(wait_parked(&d, N, calls0, 10000, NULL), "%d past their post-subscribe retry", N);
	calls0 = redis_scripts_called();
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	CHECK(WAIT_FOR(waiters_of(&d) == N - 1, 3000), "one waiter served");
	sleep_ms(300);		/* the window measured: nobody else looks */
	calls1 = redis_scripts_called();
	/* the release and the head's acquire, the same two whether 4 or 40
	 * wait: the next head is told the new lease, it does not try to read
	 * it (three scripts when it did) */
	CHECK(calls1 - calls0 <= 2, "%lld scripts for one hand-off with %d queued; want <= 2",
	      calls1 - calls0, N);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit (the waiters get 503)");
	for (int i = 0; i < N; i++) {
		bg_join(&w[i]);
		http_free(&w[i].r);
	}
	CHECK(WAIT_FOR(queue_len(n) == 0, 3000), "stopping dlockd took its waiters out of the queue");
}

/* Start a waiting PUT of fair lock n with query on d, and wait until it
 * is the pos-th in the queue. */
static bool queue_on(struct dlockd_srv *d, struct bg *b, const char *n, const char *query, int pos)
{
	char p[512];

	snprintf(p, sizeof(p), "/fairlocks/%s?%s", n, query);
	bg_start_on(b, d->base, "PUT", p, NULL);
	return WAIT_FOR(queue_len(n) == pos, 5000);
}

/* The head that takes the lock tells the next in line its lease
 * ("-<ms>"), so the next one makes no try while that lease runs, and is
 * served when it ends: a holder that never releases holds it up no longer
 * than its lease, however long the lease before it was and however seldom
 * its queue place is refreshed. */
TEST(fair_next_in_line_is_told_the_new_lease_and_served_at_its_end)
{
	static const char *const flags[] = { "--queue-ttl-ms", "600000", NULL };
	struct bg w0, w1;
	struct dlockd_srv d;
	const char *n = lockname("told");
	long long calls0, calls1;
	int64_t granted0, took;

	/* places refreshed every 200 s: no refresh wakes anyone here */
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=600000", n) == 200,
	      "the holder takes it for 10 minutes");
	calls0 = redis_scripts_called();
	CHECK(queue_on(&d, &w0, n, "owner=w0&ttl_ms=1500&wait_ms=20000", 1), "w0 queued first");
	CHECK(queue_on(&d, &w1, n, "owner=w1&wait_ms=20000", 2), "w1 queued behind it");
	CHECK(wait_parked(&d, 2, calls0, 10000, NULL), "both past their post-subscribe retry");
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	bg_join(&w0);
	granted0 = w0.done_ms;
	CHECK_STATUS(w0.r, 200, "w0 is served, and then neither releases nor renews");
	http_free(&w0.r);
	calls0 = redis_scripts_called();
	/* the window measured: w0's lease runs (a sleep under test) */
	sleep_ms(800);
	calls1 = redis_scripts_called();
	CHECK(calls1 == calls0, "%lld scripts while w0's lease ran; want 0 (w1 woken to look)",
	      calls1 - calls0);
	CHECK(w1.done_ms == 0, "w1 was answered while w0 held the lock");
	bg_join(&w1);
	CHECK_STATUS(w1.r, 200, "w1 is served once w0's lease is over");
	took = w1.done_ms - granted0;
	/* not before w0's lease of 1.5 s could have ended (w0's answer left
	 * after its lease began), and at its end: without the lease told it
	 * would be at w1's deadline, 20 s, or the refresh, 200 s */
	CHECK(took >= 1300 && took < 1500 + 2500 * slow_factor(),
	      "w1 served %lld ms after w0's grant; want at w0's lease end (1500 ms)",
	      (long long)took);
	http_free(&w1.r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* A heartbeat that shortens the holder's lease tells the queue head the
 * new one ("-<ms>"), as a grant does: a holder that shortens its lease and
 * dies is waited for until that lease ends, not until the head's next
 * look (its queue refresh, or its deadline). */
TEST(fair_head_is_told_a_lease_a_heartbeat_shortened)
{
	static const char *const flags[] = { "--queue-ttl-ms", "600000", NULL };
	struct bg w1;
	struct dlockd_srv d;
	const char *n = lockname("shortened");
	long long calls0;
	int64_t renewed;

	/* places refreshed every 200 s: no refresh wakes anyone here */
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=w0&ttl_ms=600000", n) == 200,
	      "w0 takes it for 10 minutes");
	calls0 = redis_scripts_called();
	CHECK(queue_on(&d, &w1, n, "owner=w1&wait_ms=20000", 1), "w1 queued");
	CHECK(wait_parked(&d, 1, calls0, 10000, NULL), "w1 past its post-subscribe retry");
	CHECK(status_of(&d, "POST", "/fairlocks/%s/heartbeat?owner=w0&ttl_ms=1000", n) == 200,
	      "w0 shortens its lease to a second, then neither renews nor releases");
	renewed = mono_ms();
	bg_join(&w1);
	CHECK_STATUS(w1.r, 200, "w1 is served once w0's shortened lease is over");
	/* at w0's new lease end; untold, at w1's deadline (20 s) */
	CHECK(w1.done_ms - renewed >= 900 && w1.done_ms - renewed < 1000 + 2500 * slow_factor(),
	      "w1 served %lld ms after the heartbeat; want at the lease's end (1000 ms)",
	      (long long)(w1.done_ms - renewed));
	http_free(&w1.r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* Scripts run on the shared Redis so far: FCALL, EVALSHA and EVAL (a
 * script's first call on a new dlockd goes as EVAL). */
static long long scripts_run_so_far(void)
{
	redisReply *r = rcmd("INFO commandstats");
	long long n = script_calls_of(r && r->type == REDIS_REPLY_STRING ? r->str : NULL, true);

	if (r)
		freeReplyObject(r);
	return n;
}

/* Queued owners of name whose deadline is still ahead in Redis' clock. */

static long long live_places(const char *name)
{
	return rcmd_int("ZCOUNT redisson_lock_timeout:{%s} (%lld +inf", name, redis_time_ms(NULL));
}

TEST(fair_queue_places_are_kept_in_one_script_per_loop_not_one_per_waiter)
{
	enum { N = 200, HANDOFFS = 40, THREADS = 2, REFRESH_MS = 1000 };
	static const char *const flags[] = { "--queue-ttl-ms", "3000", "--threads", "2", NULL };
	static struct bg w[N];
	static bool served[N];
	struct dlockd_srv d;
	const char *n = lockname("refresh");
	char p[512];
	long long s0, s1;
	int64_t t0, t1;
	double periods;

	/* places live 3 s and are refreshed every second */
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=600000", n) == 200,
	      "holder");
	s0 = redis_scripts_called();
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=w%03d&wait_ms=120000", n, i);
		bg_start_on(&w[i], d.base, "PUT", p, NULL);
		served[i] = false;
	}
	CHECK(WAIT_FOR(waiters_of(&d) == N && queue_len(n) == N, 30000), "%d queued", N);
	CHECK(wait_parked(&d, N, s0, 30000, NULL), "%d past their post-subscribe retry", N);

	/* nobody releases: what keeps 200 places alive? (the idle time itself
	 * is what is measured, over four refresh periods) */
	s0 = scripts_run_so_far();
	t0 = mono_ms();
	sleep_ms(4 * REFRESH_MS);
	s1 = scripts_run_so_far();
	t1 = mono_ms();
	periods = (double)(t1 - t0) / REFRESH_MS;
	printf("# %d fair waiters idle: %lld scripts in %.1f refresh periods (%.1f per period)\n",
	       N, s1 - s0, periods, (double)(s1 - s0) / periods);
	/* per period: each loop's refresh, one script per 64 of its places
	 * (REFRESH_MAX, service/lock/locks.c: with 200 places over 2 loops, 4
	 * or 5 scripts), and the head looking at the lease; a period more for
	 * the timers' phase against the window (the window already holds 4
	 * periods' worth of 5 scripts: the old bound, THREADS + 2 a period,
	 * failed whenever a timer fired once more in it) */
	CHECK(s1 - s0 <= (long long)((periods + 1) * ((N + 63) / 64 + THREADS + 1)),
	      "%lld scripts in %.1f refresh periods with %d fair waiters; want a few per period "
	      "per loop, not one per waiter", s1 - s0, periods, N);
	CHECK(queue_len(n) == N && live_places(n) == N,
	      "every place is still queued and ahead of its deadline past --queue-ttl-ms "
	      "(%lld queued, %lld live)", queue_len(n), live_places(n));

	/* hand-offs: each served waiter releases at once */
	s0 = scripts_run_so_far();
	t0 = mono_ms();
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	for (int k = 0; k <= HANDOFFS; k++) {
		int got = -1;

		CHECK(WAIT_FOR(({
			for (int i = 0; i < N && got < 0; i++)
				if (!served[i] && __atomic_load_n(&w[i].done_ms, __ATOMIC_ACQUIRE))
					got = i;
			got >= 0; }), 10000), "hand-off %d: a waiter is served", k);
		served[got] = true;
		bg_join(&w[got]);
		CHECK_STATUS(w[got].r, 200, "the waiter served");
		http_free(&w[got].r);
		if (k < HANDOFFS)
			CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=w%03d", n, got) == 200,
			      "w%03d releases", got);
	}
	/* the window measured: the next head looks at the new lease, and the
	 * window spans two refresh periods, so what keeps the others' places
	 * (bursts, once per period) counts too */
	sleep_ms((int)(t0 + 2 * REFRESH_MS - mono_ms() > 300 ? t0 + 2 * REFRESH_MS - mono_ms()
							      : 300));
	s1 = scripts_run_so_far();
	printf("# %d hand-offs with %d fair waiters: %.2f scripts each\n", HANDOFFS + 1, N,
	       (double)(s1 - s0) / (HANDOFFS + 1));
	/* the release, the head's acquire, the next head looking at the lease */
	CHECK(s1 - s0 <= 4 * (HANDOFFS + 1), "%lld scripts for %d hand-offs with %d queued; "
	      "want <= 4 each", s1 - s0, HANDOFFS + 1, N);
	CHECK(dlockd_stop(&d, 10000) == 0, "clean exit (the waiters get 503)");
	for (int i = 0; i < N; i++) {
		if (served[i])
			continue;
		bg_join(&w[i]);
		http_free(&w[i].r);
	}
	CHECK(WAIT_FOR(queue_len(n) == 0, 5000), "stopping dlockd took its waiters out of the queue");
}

TEST(fair_refresh_wakes_a_head_nobody_told_and_requeues_a_lost_place)
{
	static const char *const flags[] = { "--queue-ttl-ms", "1500", NULL };
	struct dlockd_srv d;
	const char *n = lockname("rrefresh");
	char p[512];
	struct bg w;
	long long s0;
	int64_t t;

	/* places refreshed every 500 ms */
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");

	/* a Redisson waiter heads the queue of a free lock; dlockd's queues
	 * behind it, its place kept by the loop */
	rcmd_int("RPUSH redisson_lock_queue:{%s} java-uuid:1", n);
	rcmd_int("ZADD redisson_lock_timeout:{%s} %lld java-uuid:1", n, redis_time_ms(NULL) + 300000);
	s0 = redis_scripts_called();
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=svc&wait_ms=20000", n);
	bg_start_on(&w, d.base, "PUT", p, NULL);
	CHECK(wait_parked(&d, 1, s0, 5000, "redisson_lock__channel:{%s}:svc", n),
	      "dlockd's waiter queued behind the Redisson head");
	CHECK(queue_len(n) == 2, "two queued");
	/* the Redisson waiter gives up (acquireFailed): it leaves the queue and
	 * publishes nothing */
	rcmd_int("LREM redisson_lock_queue:{%s} 0 java-uuid:1", n);
	rcmd_int("ZREM redisson_lock_timeout:{%s} java-uuid:1", n);
	t = mono_ms();
	/* at the next refresh (500 ms), not at its deadline (20 s) */
	CHECK_GRANTED_WITHIN(w, t, 3000, "the refresh found it at the head, unannounced, and woke it");
	http_free(&w.r);
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=svc", n) == 200, "svc releases");

	/* a holder; a waiter queued behind it loses its place (Redis lost the
	 * queue): the refresh finds it gone and it queues again */
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=60000", n) == 200, "holder");
	rcmd_int("RPUSH redisson_lock_queue:{%s} java-uuid:2", n);
	rcmd_int("ZADD redisson_lock_timeout:{%s} %lld java-uuid:2", n, redis_time_ms(NULL) + 300000);
	s0 = redis_scripts_called();
	bg_start_on(&w, d.base, "PUT", p, NULL);
	CHECK(wait_parked(&d, 1, s0, 5000, "redisson_lock__channel:{%s}:svc", n),
	      "dlockd's waiter queued behind the Redisson one");
	CHECK(queued(n, "svc"), "svc queued");
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n);
	CHECK(WAIT_FOR(queued(n, "svc") && queue_len(n) == 1, 3000),
	      "the waiter whose place was lost is queued again");
	CHECK(w.done_ms == 0, "and still waits");
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "served once the holder releases");
	http_free(&w.r);

	/* a dead head (its dlockd gone: its deadline runs out) ahead of a free
	 * lock: the refresh drops it and tells the next on its channel */
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=svc", n) == 200, "svc releases again");
	rcmd_int("RPUSH redisson_lock_queue:{%s} dead", n);
	rcmd_int("ZADD redisson_lock_timeout:{%s} %lld dead", n, redis_time_ms(NULL) + 1000);
	s0 = redis_scripts_called();
	bg_start_on(&w, d.base, "PUT", p, NULL);
	CHECK(wait_parked(&d, 1, s0, 5000, "redisson_lock__channel:{%s}:svc", n),
	      "dlockd's waiter queued behind the dead head");
	t = mono_ms() + 1000;	/* when the dead head's place runs out, at the latest */
	CHECK_GRANTED_WITHIN(w, t, 3000, "served once the dead head's place ran out");
	http_free(&w.r);
	CHECK(queue_len(n) == 0, "nobody left queued");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* ----- Leaving the queue ----- */

TEST(fair_waiter_that_times_out_or_hangs_up_leaves_the_queue)
{
	const char *n = lockname("leave");
	char p[512], req[600];
	struct bg quitter, patient;
	int64_t released_at;
	int fd;

	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder", n) == 200, "holder");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=quitter&wait_ms=600", n);
	bg_start(&quitter, "PUT", p, NULL);
	CHECK(WAIT_FOR(queued(n, "quitter"), 3000), "quitter queued");
	fd = raw_connect(H_dlockd.port);
	snprintf(req, sizeof(req), "PUT /fairlocks/%s?owner=ghost&wait_ms=60000 HTTP/1.1\r\n"
		 "Host: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", n);
	CHECK(fd >= 0 && write(fd, req, strlen(req)) == (ssize_t)strlen(req), "ghost sends");
	CHECK(WAIT_FOR(queued(n, "ghost"), 3000), "ghost queued");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=patient&wait_ms=60000", n);
	bg_start(&patient, "PUT", p, NULL);
	CHECK(WAIT_FOR(queue_len(n) == 3, 3000), "three queued");

	bg_join(&quitter);
	CHECK_ERROR(quitter.r, 409, "locked", "the quitter's wait ends");
	http_free(&quitter.r);
	CHECK(!queued(n, "quitter") && queue_len(n) == 2, "and it left the queue at once");
	close(fd);
	CHECK(WAIT_FOR(!queued(n, "ghost") && queue_len(n) == 1, 3000),
	      "the ghost left the queue when its client hung up");

	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder", n) == 200,
	      "release");
	released_at = mono_ms();
	/* at once, not after the places of those who left expired */
	CHECK_GRANTED_WITHIN(patient, released_at, 500, "the one behind them is served");
	http_free(&patient.r);
}

/* An owner's queue place is the owner's, not one request's: when a second
 * wait of the owner gives up, its first, still waiting, must queue again
 * at once. It queued again only at its place's next refresh (a third of
 * --queue-ttl-ms), and a lock that came free meanwhile was left free with
 * it waiting (found by a probe: served 0.85-2 s after the release). */
TEST(fair_second_wait_of_an_owner_giving_up_leaves_the_first_queued)
{
	const char *n = lockname("rejoin");
	char p[512];
	struct bg first;
	struct http_resp r;
	int64_t released_at;

	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=60000", n) == 200,
	      "holder");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=x&wait_ms=20000", n);
	bg_start(&first, "PUT", p, NULL);
	CHECK(WAIT_FOR(queued(n, "x"), 3000), "x's first wait is queued");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=x&wait_ms=300", n);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 409, "locked", "x's second wait gives up");
	http_free(&r);
	CHECK(WAIT_FOR(queued(n, "x") && queue_len(n) == 1, 500 * slow_factor()),
	      "x's first wait is queued again at once (queued %d, %lld in the queue)",
	      queued(n, "x"), queue_len(n));
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	released_at = mono_ms();
	CHECK_GRANTED_WITHIN(first, released_at, 500, "x's first wait is served");
	http_free(&first.r);
	status_of(NULL, "DELETE", "/fairlocks/%s?owner=x", n);
}

TEST(fair_waiter_of_a_killed_dlockd_stops_blocking_the_queue)
{
	static const char *const flags[] = { "--queue-ttl-ms", "1500", NULL };
	const char *n = lockname("dead");
	struct dlockd_srv d2;
	struct bg doomed, survivor;
	char p[512];
	int64_t killed_at;

	CHECK(dlockd_start(&d2, NULL, flags) == 0, "second dlockd");
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder", n) == 200, "holder");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=doomed&wait_ms=60000", n);
	bg_start_on(&doomed, d2.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(queued(n, "doomed"), 3000), "doomed waiter at the head, via the second dlockd");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=survivor&wait_ms=60000", n);
	bg_start(&survivor, "PUT", p, NULL);
	CHECK(WAIT_FOR(queue_len(n) == 2, 3000), "survivor queued behind it");
	sleep_ms(2000);		/* the second dlockd keeps its waiter's place alive */
	CHECK(queued(n, "doomed"), "a live instance's waiter keeps its place past --queue-ttl-ms");

	kill(d2.pid, SIGKILL);
	waitpid(d2.pid, NULL, 0);
	d2.pid = 0;
	killed_at = mono_ms();
	bg_join(&doomed);
	http_free(&doomed.r);
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder", n) == 200,
	      "release");
	bg_join(&survivor);
	CHECK_STATUS(survivor.r, 200, "the survivor gets the lock");
	CHECK(survivor.done_ms - killed_at < 6000 * slow_factor(),
	      "within %lld ms of the kill; want a few seconds, not Redisson's minutes",
	      (long long)(survivor.done_ms - killed_at));
	http_free(&survivor.r);
}

TEST(fair_try_without_wait_does_not_jump_the_queue)
{
	const char *n = lockname("nojump");

	/* a Redisson waiter is queued (its deadline 5 minutes out); N is free */
	rcmd_int("RPUSH redisson_lock_queue:{%s} other-client:1", n);
	rcmd_int("ZADD redisson_lock_timeout:{%s} %lld other-client:1", n,
		 (long long)time(NULL) * 1000 + 300000);
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=me", n) == 409,
	      "a free fair lock with a queue is not taken by a newcomer");
	CHECK(queue_len(n) == 1 && !queued(n, "me"), "and wait_ms=0 did not queue it");
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n);
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=me", n) == 200,
	      "with the queue empty it is taken");
}

/* The deadlines of a fair lock's queue (redisson_lock_timeout:{N}) holding
 * something else. They are read only with the queue's entries (their
 * ZMSCORE is the type check) or to queue a caller: a taker of a free lock
 * with nobody queued neither reads nor writes them; a caller that would
 * queue, or any call while the queue has entries, is 409 wrong_kind and
 * writes nothing; the data is left as it was throughout. */
TEST(fair_deadlines_of_another_type_are_refused_where_read_and_left_alone)
{
	const char *n = lockname("fairdl");
	struct http_resp r;
	redisReply *v;
	char p[300];
	int64_t t0;

	rcmd_int("SET redisson_lock_timeout:{%s} x", n);
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=a&ttl_ms=60000", n) == 200,
	      "a free lock with nobody queued is taken");
	t0 = mono_ms();
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=b&wait_ms=3000", n);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a caller that would queue");
	http_free(&r);
	CHECK(mono_ms() - t0 < 2500, "refused at once, not after its wait");
	CHECK(rcmd_int("EXISTS redisson_lock_queue:{%s}", n) == 0, "nobody was queued");
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=a", n) == 200, "released");

	rcmd_int("RPUSH redisson_lock_queue:{%s} w", n);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=c", n);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a call while the queue has entries");
	http_free(&r);
	http("DELETE", p, NULL, &r);
	CHECK_ERROR(r, 409, "wrong_kind", "a release while the queue has entries");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0 && queue_len(n) == 1, "nothing written");
	v = rcmd("GET redisson_lock_timeout:{%s}", n);
	CHECK(v && v->type == REDIS_REPLY_STRING && !strcmp(v->str, "x"), "the data is left");
	if (v)
		freeReplyObject(v);
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n);
}

/* ----- Under load ----- */

enum { LOAD_CLIENTS = 16, LOAD_ROUNDS = 25, SNAPS = 4000, SNAP_LEN = LOAD_CLIENTS };
static const char *load_name;
static int grant_seq[LOAD_CLIENTS * LOAD_ROUNDS];
static int grants;
static int load_errors;
static bool load_done;
/* the queue as Redis held it, and how many grants were recorded before */
static struct snap {
	int from;
	int n;
	int ids[SNAP_LEN];
} snaps[SNAPS];
static int nsnaps;

static void *fair_client(void *arg)
{
	int id = (int)(long)arg;
	char acq[512], rel[512];
	struct http_resp r;

	snprintf(acq, sizeof(acq), "/fairlocks/%s?owner=c%d&wait_ms=60000", load_name, id);
	snprintf(rel, sizeof(rel), "/fairlocks/%s?owner=c%d", load_name, id);
	for (int i = 0; i < LOAD_ROUNDS; i++) {
		if (http("PUT", acq, NULL, &r) != 0 || r.status != 200) {
			__atomic_add_fetch(&load_errors, 1, __ATOMIC_RELAXED);
			http_free(&r);
			continue;
		}
		http_free(&r);
		grant_seq[grants] = id;	/* only the holder writes */
		__atomic_store_n(&grants, grants + 1, __ATOMIC_RELEASE);
		http("DELETE", rel, NULL, &r);
		http_free(&r);
	}
	return NULL;
}

/* Snapshot the queue every few milliseconds while the clients run. */
static void *sampler(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&load_done, __ATOMIC_ACQUIRE) && nsnaps < SNAPS) {
		struct snap *s = &snaps[nsnaps];
		redisReply *r;

		/* Whoever is queued at LRANGE is granted after it; its grants
		 * recorded from `from` on are those, unless one was recorded
		 * between reading `from` and LRANGE (a client may then record
		 * its previous grant, release and queue again): then the
		 * snapshot proves nothing and is dropped. */
		s->from = __atomic_load_n(&grants, __ATOMIC_ACQUIRE);
		r = rcmd("LRANGE redisson_lock_queue:{%s} 0 -1", load_name);
		s->n = 0;
		for (size_t i = 0; r && i < r->elements && s->n < SNAP_LEN; i++)
			s->ids[s->n++] = atoi(r->element[i]->str + 1);
		if (r)
			freeReplyObject(r);
		if (s->n > 1 && __atomic_load_n(&grants, __ATOMIC_ACQUIRE) == s->from)
			nsnaps++;
		sleep_ms(2);
	}
	return NULL;
}

/* Position of the first grant to id at or after from; -1 if none. */
static int next_grant(int id, int from)
{
	for (int g = from; g < grants; g++)
		if (grant_seq[g] == id)
			return g;
	return -1;
}

TEST(fair_lock_under_load_grants_in_queue_order)
{
	pthread_t t[LOAD_CLIENTS], samp;
	int checked = 0;

	load_name = lockname("load");
	grants = load_errors = nsnaps = 0;
	load_done = false;
	pthread_create(&samp, NULL, sampler, NULL);
	for (long i = 0; i < LOAD_CLIENTS; i++)
		pthread_create(&t[i], NULL, fair_client, (void *)i);
	for (int i = 0; i < LOAD_CLIENTS; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&load_done, true, __ATOMIC_RELEASE);
	pthread_join(samp, NULL);
	CHECK(load_errors == 0, "%d acquisitions failed", load_errors);
	CHECK(grants == LOAD_CLIENTS * LOAD_ROUNDS, "%d grants, want %d", grants,
	      LOAD_CLIENTS * LOAD_ROUNDS);
	/* every snapshot of the queue is served in exactly its order */
	for (int k = 0; k < nsnaps; k++) {
		const struct snap *s = &snaps[k];
		int prev = -1;

		for (int i = 0; i < s->n; i++) {
			int g = next_grant(s->ids[i], s->from);

			CHECK(g > prev, "queue snapshot %d: c%d (place %d) was served at grant %d, "
			      "before the one queued ahead of it (grant %d)", k, s->ids[i], i, g, prev);
			prev = g;
			checked++;
		}
	}
	CHECK(nsnaps >= 20 && checked >= 100, "only %d snapshots (%d places) taken", nsnaps, checked);
	printf("# %d queue snapshots, %d queued places, all served in queue order\n", nsnaps,
	       checked);
	CHECK(WAIT_FOR(queue_len(load_name) == 0, 2000), "queue empty at the end");
}

/* ----- Redisson interop ----- */

TEST(fair_lock_interop_with_redisson_queue_and_channels)
{
	const char *n = lockname("rfair");
	char p[512], chan[300];
	struct http_resp r;
	redisContext *sub = redis_client(NULL);
	redisReply *rep = NULL;
	struct timeval tv = { 3 * slow_factor(), 0 };
	struct bg w;
	int64_t released_at;
	long long scripts0;

	/* a Redisson holder; dlockd's waiter queues behind it */
	rcmd_int("HSET %s java-uuid:7 1", n);
	rcmd_int("PEXPIRE %s 60000", n);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=svc&wait_ms=20000", n);
	scripts0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(WAIT_FOR(queued(n, "svc"), 3000), "dlockd waiter queued");
	CHECK(wait_parked(NULL, 1, scripts0, 3000, "redisson_lock__channel:{%s}:svc", n),
	      "and listening on its own channel");
	/* Redisson's unlock: DEL N, "0" to the queue head's own channel */
	rcmd_int("DEL %s", n);
	rcmd_int("PUBLISH redisson_lock__channel:{%s}:svc 0", n);
	released_at = mono_ms();
	CHECK_GRANTED_WITHIN(w, released_at, 500, "woken by Redisson's unlock on its own channel");
	http_free(&w.r);
	CHECK(queue_len(n) == 0, "and left the queue");

	/* a Redisson waiter queues behind dlockd's holder and listens on its channel */
	CHECK(sub, "subscriber");
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}:java-uuid:9", n);
	rep = redisCommand(sub, "SUBSCRIBE %s", chan);
	freeReplyObject(rep);
	rcmd_int("RPUSH redisson_lock_queue:{%s} java-uuid:9", n);
	rcmd_int("ZADD redisson_lock_timeout:{%s} %lld java-uuid:9", n,
		 (long long)time(NULL) * 1000 + 300000);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=svc", n);
	http("DELETE", p, NULL, &r);
	CHECK(json_bool(&r, "released") == 1, "dlockd releases: %s", r.body);
	http_free(&r);
	redisSetTimeout(sub, tv);
	rep = NULL;
	CHECK(redisGetReply(sub, (void **)&rep) == REDIS_OK && rep &&
	      rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
	      !strcmp(rep->element[1]->str, chan) && !strcmp(rep->element[2]->str, "0"),
	      "the Redisson head gets \"0\" on its own channel");
	freeReplyObject(rep);
	redisFree(sub);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "locked", "and dlockd does not jump ahead of it");
	http_free(&r);
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n);
}

/* Found by hostile probing: a name used as a fair and as a plain lock is
 * one lock, but a fair release with nobody queued told nobody, so a plain
 * waiter slept until the fair holder's old lease end. With nobody queued,
 * the release now says "0" on the plain lock's channel. */
TEST(plain_waiter_is_woken_when_a_fair_holder_releases)
{
	const char *n = lockname("fairplain");
	char p[512];
	struct http_resp r;
	struct bg w;
	int64_t released_at;
	long long calls0;

	/* run alone, the plain acquire's first call would be an EVAL, which
	 * wait_parked does not count */
	CHECK(lock_hold(NULL, n, "p", 60000) && lock_release(NULL, n, "p") == 200,
	      "the plain scripts are loaded");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=f&ttl_ms=60000", n);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "the fair holder takes the lock");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=p&wait_ms=30000", n);
	calls0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, calls0, 5000, "redisson_lock__channel:{%s}", n),
	      "the plain waiter is parked");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=f", n);
	http("DELETE", p, NULL, &r);
	released_at = mono_ms();
	CHECK_STATUS(r, 200, "the fair holder releases");
	http_free(&r);
	/* 60 s of lease were left: only the release message explains this */
	CHECK_GRANTED_WITHIN(w, released_at, 1000, "the plain waiter takes it");
	http_free(&w.r);
	lock_release(NULL, n, "p");
}

/* ----- A long queue: leavers cost a bounded script ----- */

/* The longest run, in µs, of a fair-lock script on name's queue or lock
 * in SLOWLOG (logging every call), and how many fair_dequeue ran. */
static long long slowest_fair_script(const char *name, long long *dequeues)
{
	redisReply *r = rcmd("SLOWLOG GET 100000");
	char lock[160], queue[200];
	long long worst = 0;

	snprintf(lock, sizeof(lock), "%s", name);
	snprintf(queue, sizeof(queue), "redisson_lock_queue:{%s}", name);
	*dequeues = 0;
	for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		redisReply *e = r->element[i], *a;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 4)
			continue;
		a = e->element[3];
		if (a->type != REDIS_REPLY_ARRAY || a->elements < 4 ||
		    !is_script_command(a->element[0]->str) ||
		    (strcmp(a->element[3]->str, lock) && strcmp(a->element[3]->str, queue)))
			continue;
		if (!strcmp(a->element[3]->str, queue))
			(*dequeues)++;	/* only fair_dequeue names the queue first */
		if (e->element[2]->integer > worst)
			worst = e->element[2]->integer;
	}
	if (r)
		freeReplyObject(r);
	return worst;
}

/* 8,000 places (a Redisson client's, pushed here) between dlockd's
 * waiters: the head times out, one in the middle times out, a crowd hangs
 * up at once, a dead place sits in the middle. Each leaver leaves at once,
 * the rest keep their order, and no fair script takes long: three leavers
 * or more in one script used to copy the whole queue into Lua and push it
 * back (6.5 ms here, 8 ms with 10,000 queued; every other client of that
 * Redis waited as long). The bound on time is generous (a loaded machine
 * stretches any script); the rewrite itself is what is checked. */
TEST(fair_leavers_of_a_long_queue_leave_in_order_with_short_scripts)
{
	enum { FOREIGN = 8000, CROWD = 6, BOUND_US = 25000 };
	static const char *const flags[] = { "--max-fair-queue", "20000", NULL };
	struct dlockd_srv d;
	const char *n = lockname("longq");
	struct bg head, mid, last;
	int fds[CROWD];
	char p[512], req[600];
	long long deadline, worst, dequeues, rpush0;
	redisContext *rc;
	redisReply *r;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=600000", n) == 200,
	      "holder");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=head&wait_ms=1500", n);
	bg_start_on(&head, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(queued(n, "head"), 5000), "head queued");
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=mid&wait_ms=2500", n);
	bg_start_on(&mid, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(queued(n, "mid"), 5000), "mid queued");
	/* the foreign places, live for 10 minutes, one of them dead; sent
	 * in one pipeline: 16,000 round trips took over a second on a slow
	 * machine, and the head's wait ran out while the crowd queued */
	deadline = redis_time_ms(NULL) + 600000;
	CHECK((rc = redis_client(&H_redis)), "a pipeline to Redis");
	for (int i = 0; i < FOREIGN; i++) {
		long long at = i == FOREIGN / 2 ? redis_time_ms(NULL) - 1000 : deadline;

		redisAppendCommand(rc, "RPUSH redisson_lock_queue:{%s} r%05d", n, i);
		redisAppendCommand(rc, "ZADD redisson_lock_timeout:{%s} %lld r%05d", n, at, i);
	}
	for (int i = 0; i < 2 * FOREIGN; i++) {
		bool ok;

		r = NULL;
		ok = redisGetReply(rc, (void **)&r) == REDIS_OK && r && r->type == REDIS_REPLY_INTEGER;

		if (r)
			freeReplyObject(r);
		if (!ok)
			redisFree(rc);
		CHECK(ok, "push and zadd %d", i / 2);
	}
	redisFree(rc);
	for (int i = 0; i < CROWD; i++) {
		fds[i] = raw_connect(d.port);
		snprintf(req, sizeof(req), "PUT /fairlocks/%s?owner=crowd%d&wait_ms=60000 HTTP/1.1\r\n"
			 "Host: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", n, i);
		CHECK(fds[i] >= 0 && write(fds[i], req, strlen(req)) == (ssize_t)strlen(req),
		      "crowd %d sends", i);
		CHECK(WAIT_FOR(queue_len(n) == 2 + FOREIGN + i + 1, 5000), "crowd %d queued", i);
	}
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=last&wait_ms=60000", n);
	bg_start_on(&last, d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(queue_len(n) == FOREIGN + 2 + CROWD + 1, 5000), "all queued");
	rcmd_int("CONFIG SET slowlog-log-slower-than 0");
	rcmd_int("SLOWLOG RESET");
	rpush0 = redis_cmdstat(NULL, "rpush", "calls");

	for (int i = 0; i < CROWD; i++)
		close(fds[i]);	/* hang up together: one turn's leavers */
	bg_join(&head);
	CHECK_ERROR(head.r, 409, "locked", "the head's wait ends");
	http_free(&head.r);
	bg_join(&mid);
	CHECK_ERROR(mid.r, 409, "locked", "the middle one's wait ends");
	http_free(&mid.r);
	CHECK(WAIT_FOR(queue_len(n) == FOREIGN + 1, 5000), "%lld left queued, want %d",
	      queue_len(n), FOREIGN + 1);
	worst = slowest_fair_script(n, &dequeues);
	/* not copied out and pushed back (DEL, RPUSH of the rest) */
	CHECK(redis_cmdstat(NULL, "rpush", "calls") == rpush0, "%lld RPUSH while only leavers left: the queue "
	      "was rewritten", redis_cmdstat(NULL, "rpush", "calls") - rpush0);
	rcmd_int("CONFIG SET slowlog-log-slower-than 10000");

	/* order kept: the foreign places, the dead one still among them, then last */
	r = rcmd("LRANGE redisson_lock_queue:{%s} 0 -1", n);
	CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == FOREIGN + 1, "the queue");
	for (size_t i = 0; i < FOREIGN; i++) {
		char want[16];

		snprintf(want, sizeof(want), "r%05zu", i);
		if (strcmp(r->element[i]->str, want)) {
			CHECK(false, "place %zu is %s, want %s", i, r->element[i]->str, want);
			break;
		}
	}
	CHECK(!strcmp(r->element[FOREIGN]->str, "last"), "last is last");
	freeReplyObject(r);
	CHECK(!queued(n, "head") && !queued(n, "mid") && !queued(n, "crowd0") &&
	      !queued(n, "crowd5") && queued(n, "last"), "leavers' deadlines gone, last's kept");
	printf("# slowest fair script %lld us, %lld dequeue scripts, %d queued\n", worst, dequeues,
	       FOREIGN);
	CHECK(dequeues >= 2 && worst < BOUND_US, "slowest fair script %lld us (want < %d) over "
	      "%lld dequeues with %d queued", worst, BOUND_US, dequeues, FOREIGN);

	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	bg_join(&last);
	http_free(&last.r);
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n);
}
