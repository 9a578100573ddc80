/* test_waiters.c -- who is woken and why, on a real event loop turned by
 * hand (loop_turn) with a fake subscriber: "0" wakes the oldest sleeper,
 * "1" all of them, a message with nobody asleep is banked, a confirmed
 * subscription wakes the channel, deadlines fire, and the channels asked
 * of the subscriber follow the joined count; the channel's retry timer
 * keeps every sleeper covered by the earliest lease end reported (by a
 * sleeper, a granted waiter, a heartbeat), wakes one sleeper, and is
 * handed over when the one it woke gives up knowing nothing; a waiter told
 * to retry by itself (waiters_retry) is woken alone; watchers are woken by
 * every message, apart from the acquirers, by a message that came while
 * they were awake, and by their own timer; a grant told to its owner wakes
 * that owner's other sleepers only. And the
 * threading: a resume runs from the loop, never inside a waiters_* call;
 * a sleeping client's hang-up is seen by the loop; a heartbeat's lease end
 * and a shutdown reach every loop; deliveries may come from any thread. */
#include "unit.h"

#include "service/lock/waiters.c"

#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

struct fake_req {
	int resumed;
};

/* What the waiters asked of the fake subscriber. */
struct sub_call {
	struct waiters *ws;
	char channel[64];
	bool want;
};

static struct sub_call subs[32];
static int nsubs;
static bool inside_waiters;	/* a test is inside a waiters_* call */

static struct loop *L, *L2;
static struct waiters *WS, *WS2;

static void fake_subscribe(void *sub, struct waiters *ws, const char *channel, bool want)
{
	assert_ptr_equal(sub, &subs);
	assert_true(nsubs < (int)ARRAY_SIZE(subs));
	subs[nsubs].ws = ws;
	snprintf(subs[nsubs].channel, sizeof(subs[nsubs].channel), "%s", channel);
	subs[nsubs].want = want;
	nsubs++;
}

static void resume(void *ctx)
{
	assert_false(inside_waiters);
	((struct fake_req *)ctx)->resumed++;
}

static int setup(void **state)
{
	(void)state;
	nsubs = 0;
	inside_waiters = false;
	atomic_store(&R.shutting_down, false);
	atomic_store(&R.nwaiters, 0);	/* what a failed test left behind */
	atomic_store(&R.nwatchers, 0);
	atomic_store(&R.owned, 0);
	L = loop_new();
	L2 = loop_new();
	if (!L || !L2)
		return -1;
	WS = waiters_new(L, fake_subscribe, &subs);
	WS2 = waiters_new(L2, fake_subscribe, &subs);
	return 0;
}

static int teardown(void **state)
{
	unsigned left = waiters_count_all();
	size_t channels = WS->channels.n + WS2->channels.n;

	(void)state;
	/* what one loop posted the other (a winner's lease end) is handled,
	 * as a running loop would, before they go */
	loop_turn(L, 0);
	loop_turn(L2, 0);
	waiters_free(WS);
	waiters_free(WS2);
	loop_free(L);
	loop_free(L2);
	assert_int_equal(left, 0);
	assert_int_equal(channels, 0);		/* nothing left behind */
	return 0;
}

/* One turn of L without sleeping: what was posted, the due timers, the
 * deferred resumes. */
static void turn(void)
{
	loop_turn(L, 0);
}

/* Let ms pass (a timer of fewer ms is due), then turn L. */
static void turn_after(int ms)
{
	usleep((useconds_t)ms * 1000);
	turn();
}

/* rq was resumed n times in all, the last for why (which is consumed). */
#define assert_woken(rq, n, w, why) \
	do { \
		assert_int_equal((rq).resumed, n); \
		assert_int_equal(waiters_wake_reason(w), why); \
	} while (0)

static void confirm(struct waiters *ws, const char *ch)
{
	waiters_deliver_confirmed(ws, ch);
	loop_turn(ws->loop, 0);
}

/* The subscriber's numbers of its messages (seq): each message() is a new
 * one; message_seq() hands one message to several loops. */
static uint64_t next_seq = 1000;

static void message_seq(struct waiters *ws, const char *ch, const char *payload, uint64_t seq)
{
	waiters_deliver_message(ws, ch, payload, strlen(payload), seq);
	loop_turn(ws->loop, 0);
}

static void message(struct waiters *ws, const char *ch, const char *payload)
{
	message_seq(ws, ch, payload, ++next_seq);
}

/* Joined before the subscription was confirmed, w's first sleep ends at
 * once (subscribe-then-retry), from the loop; consume that wake and sleep
 * for real. */
static void first_sleep(struct waiter *w, struct fake_req *rq)
{
	struct loop *l = w->ch->ws->loop;
	int before = rq->resumed;

	waiters_sleep(w, 0);
	assert_int_equal(rq->resumed, before);
	loop_turn(l, 0);
	assert_int_equal(rq->resumed, before + 1);
	assert_int_equal(waiters_wake_reason(w), WAKE_RETRY);
	waiters_sleep(w, 0);
	loop_turn(l, 0);
	assert_int_equal(rq->resumed, before + 1);
}

static struct waiter *join_on(struct waiters *ws, const char *ch, struct fake_req *rq,
			      bool *confirmed)
{
	return waiters_join(ws, ch, -1, resume, rq, now_ms() + 60000, 0, confirmed);
}

static struct waiter *join(const char *ch, struct fake_req *rq, bool *confirmed)
{
	return join_on(WS, ch, rq, confirmed);
}

/* The first waiter on ch of ws, the subscription confirmed and asleep
 * after its first retry. */
static struct waiter *asleep_on(struct waiters *ws, const char *ch, struct fake_req *rq)
{
	bool confirmed;
	struct waiter *w = join_on(ws, ch, rq, &confirmed);

	confirm(ws, ch);
	first_sleep(w, rq);
	return w;
}

static struct waiter *asleep(const char *ch, struct fake_req *rq)
{
	return asleep_on(WS, ch, rq);
}

/* Three waiters on "ch" of ws (w[1] a writer when writer_in_middle), the
 * subscription confirmed and each asleep after its first retry. */
static void three_asleep_on(struct waiters *ws, struct waiter *w[3], struct fake_req rq[3],
			    bool writer_in_middle)
{
	bool confirmed;

	for (int i = 0; i < 3; i++)
		w[i] = waiters_join(ws, "ch", -1, resume, &rq[i], now_ms() + 60000,
				    i == 1 && writer_in_middle ? WAITER_WRITER : 0, &confirmed);
	confirm(ws, "ch");
	for (int i = 0; i < 3; i++)
		first_sleep(w[i], &rq[i]);
}

static void three_asleep(struct waiter *w[3], struct fake_req rq[3], bool writer_in_middle)
{
	three_asleep_on(WS, w, rq, writer_in_middle);
}

static void leave_all(struct waiter *w[3])
{
	for (int i = 0; i < 3; i++)
		waiters_leave(w[i], 0);
}

static void test_waiters__first_join_subscribes_last_leave_unsubscribes(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = join("ch", &a, &confirmed);
	assert_false(confirmed);
	assert_int_equal(nsubs, 1);
	assert_ptr_equal(subs[0].ws, WS);
	assert_string_equal(subs[0].channel, "ch");
	assert_true(subs[0].want);
	wb = join("ch", &b, &confirmed);
	assert_int_equal(nsubs, 1);
	confirm(WS, "ch");
	waiters_leave(wa, 0);
	assert_int_equal(nsubs, 1);		/* b still waits */
	assert_int_equal(waiters_count_all(), 1);
	waiters_leave(wb, 0);
	assert_int_equal(nsubs, 2);
	assert_string_equal(subs[1].channel, "ch");
	assert_false(subs[1].want);
	/* what the subscriber still says about it finds nobody */
	message(WS, "ch", "0");
	confirm(WS, "ch");
	assert_int_equal(WS->channels.n, 0);
	/* joined again, it is asked for anew and not live until confirmed */
	wa = join("ch", &a, &confirmed);
	assert_false(confirmed);
	assert_int_equal(nsubs, 3);
	assert_true(subs[2].want);
	confirm(WS, "ch");
	wb = join("ch", &b, &confirmed);
	assert_true(confirmed);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
	assert_int_equal(a.resumed + b.resumed, 0);
}

static void test_waiters__confirmation_wakes_sleepers_to_retry(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed;

	(void)state;
	w = join("ch", &a, &confirmed);
	waiters_sleep(w, 0);
	turn();
	assert_int_equal(a.resumed, 0);
	confirm(WS, "ch");
	assert_woken(a, 1, w, WAKE_RETRY);
	assert_int_equal(waiters_wake_reason(w), WAKE_NONE);
	waiters_leave(w, 0);
}

static void test_waiters__a_disconnect_makes_channels_wait_for_a_new_confirmation(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = asleep("ch", &a);
	waiters_deliver_disconnect(WS);
	turn();
	assert_int_equal(a.resumed, 1);		/* nothing to retry yet */
	wb = join("ch", &b, &confirmed);
	assert_false(confirmed);		/* not live: wait for it */
	confirm(WS, "ch");			/* resubscribed: a release may be unseen */
	assert_woken(a, 2, wa, WAKE_RETRY);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

static void test_waiters__zero_wakes_the_oldest_only(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	message(WS, "ch", "0");
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(rq[1].resumed, 1);
	assert_int_equal(rq[2].resumed, 1);
	message(WS, "ch", "0");
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(rq[2].resumed, 1);
	/* one loop on the channel: no other can take a "0", none is recorded
	 * (a fair lock's waiter's own channel costs no ring of 64) */
	assert_null(channel_lookup(WS, "ch")->claims->seq);
	leave_all(w);
}

/* A plain lock's release frees it for one: the subscriber hands its "0"
 * to both loops, and the first to handle it wakes its oldest sleeper; the
 * other wakes nobody. The next release may go to the other loop. */
static void test_waiters__zero_wakes_the_oldest_of_one_loop_only(void **state)
{
	struct fake_req rq[3] = { { 0 } }, rq2[3] = { { 0 } };
	struct waiter *w[3], *w2[3];

	(void)state;
	three_asleep(w, rq, false);
	three_asleep_on(WS2, w2, rq2, false);
	message_seq(WS, "ch", "0", 7);
	message_seq(WS2, "ch", "0", 7);
	assert_woken(rq[0], 2, w[0], WAKE_RETRY);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rq2[i].resumed, 1);
	assert_non_null(channel_lookup(WS, "ch")->claims->seq);	/* the record */
	/* the next release: L2 handles it first */
	message_seq(WS2, "ch", "0", 8);
	message_seq(WS, "ch", "0", 8);
	assert_woken(rq2[0], 2, w2[0], WAKE_RETRY);
	for (int i = 1; i < 3; i++) {
		assert_int_equal(rq[i].resumed, 1);
		assert_int_equal(rq2[i].resumed, 1);
	}
	leave_all(w);
	leave_all(w2);
}

/* Where a writer may wait (a read-write lock), a "0" still wakes the
 * oldest writer of every loop: a loop with readers alone could not use it. */
static void test_waiters__a_read_write_locks_zero_wakes_every_loops_writer(void **state)
{
	struct fake_req rq[3] = { { 0 } }, rq2[3] = { { 0 } };
	struct waiter *w[3], *w2[3];

	(void)state;
	three_asleep(w, rq, true);
	three_asleep_on(WS2, w2, rq2, true);
	message_seq(WS, "ch", "0", 9);
	message_seq(WS2, "ch", "0", 9);
	assert_woken(rq[1], 2, w[1], WAKE_RETRY);
	assert_woken(rq2[1], 2, w2[1], WAKE_RETRY);
	leave_all(w);
	leave_all(w2);
}

/* The loop that took a release banked it for a waiter awake there, which
 * then left without trying again: the wake is handed on to the other
 * loop's sleeper, not lost until a lease ends. */
static void test_waiters__a_taken_wake_whose_permit_is_dropped_is_handed_on(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wb = asleep_on(WS2, "ch", &b);
	wa = join("ch", &a, &confirmed);	/* awake: trying */
	confirm(WS, "ch");
	assert_int_equal(a.resumed, 0);		/* never slept: nothing to wake */
	message_seq(WS, "ch", "0", 11);
	message_seq(WS2, "ch", "0", 11);
	assert_int_equal(WS->channels.n, 1);
	assert_int_equal(channel_lookup(WS, "ch")->permits, 1);	/* banked for a */
	assert_int_equal(b.resumed, 1);		/* not woken: L took it */
	waiters_leave(wa, 0);			/* a gives up without trying again */
	loop_turn(L2, 0);
	assert_woken(b, 2, wb, WAKE_RETRY);
	waiters_leave(wb, 0);
}

/* A sleeper woken by a release its loop took, gone before its resume ran
 * (its request ended in the same turn): the wake goes to the next sleeper
 * of the loop, else to the other loops. */
static void test_waiters__a_taken_wake_whose_sleeper_left_is_handed_on(void **state)
{
	struct fake_req a = { 0 }, b = { 0 }, c = { 0 };
	struct waiter *wa, *wb, *wc;

	(void)state;
	wa = asleep("ch", &a);
	wc = asleep_on(WS2, "ch", &c);
	wb = join("ch", &b, &(bool){ false });
	waiters_sleep(wb, 0);
	channel_message(WS, "ch", "0", 1, 21);	/* handled, not resumed yet */
	assert_true(wa->ready && wa->claimed);
	waiters_leave(wa, 0);
	assert_true(wb->ready && wb->claimed);	/* L's next sleeper has it */
	turn();
	assert_woken(b, 1, wb, WAKE_RETRY);
	waiters_sleep(wb, 0);			/* alone on L now */
	channel_message(WS, "ch", "0", 1, 22);
	assert_true(wb->ready && wb->claimed);
	waiters_leave(wb, 0);
	assert_int_equal(c.resumed, 1);		/* posted to L2, not yet seen */
	loop_turn(L2, 0);
	assert_woken(c, 2, wc, WAKE_RETRY);
	waiters_leave(wc, 0);
	turn();
	assert_int_equal(a.resumed, 1);		/* its wake never ran */
}

static void test_waiters__one_wakes_everybody(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	message(WS, "ch", "1");
	for (int i = 0; i < 3; i++)
		assert_int_equal(rq[i].resumed, 2);
	leave_all(w);
}

static void test_waiters__messages_prefer_the_oldest_writer(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, true);	/* a reader, a writer, another reader */
	message(WS, "ch", "1");
	assert_int_equal(rq[1].resumed, 2);	/* the writer, alone */
	assert_int_equal(rq[0].resumed, 1);
	assert_int_equal(rq[2].resumed, 1);
	waiters_leave(w[1], now_ms() + 60000);	/* granted */
	message(WS, "ch", "1");			/* no writer left: every reader */
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(rq[2].resumed, 2);
	waiters_leave(w[0], 0);
	waiters_leave(w[2], 0);
}

static void test_waiters__message_while_nobody_sleeps_is_banked(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;

	(void)state;
	w = asleep("ch", &a);
	message(WS, "ch", "0");
	assert_int_equal(a.resumed, 2);
	(void)waiters_wake_reason(w);
	/* the waiter is between two tries when the next release arrives */
	message(WS, "ch", "0");
	message(WS, "ch", "0");		/* capped at one per joined waiter */
	assert_int_equal(a.resumed, 2);
	waiters_sleep(w, 0);
	turn();
	assert_woken(a, 3, w, WAKE_RETRY);
	waiters_sleep(w, 0);
	turn();
	assert_int_equal(a.resumed, 3);		/* only one permit was kept */
	waiters_leave(w, 0);
}

static void test_waiters__other_payloads_and_channels_wake_nobody(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;

	(void)state;
	w = asleep("ch", &a);
	message(WS, "ch", "2");
	message(WS, "ch", "00");
	message(WS, "other", "0");
	message(WS2, "ch", "0");	/* another loop's: nobody waits there */
	loop_turn(L2, 0);
	assert_int_equal(a.resumed, 1);
	waiters_leave(w, 0);
}

static void test_waiters__deadline_and_retry_timers_fire(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = waiters_join(WS, "ch", -1, resume, &a, now_ms() + 20, 0, &confirmed);
	wb = waiters_join(WS, "ch2", -1, resume, &b, now_ms() + 60000, 0, &confirmed);
	/* never confirmed: no wake from that */
	waiters_sleep(wa, 0);
	waiters_sleep(wb, now_ms() + 10);	/* the holder's lease ends in 10 ms */
	turn();
	assert_int_equal(a.resumed + b.resumed, 0);
	turn_after(30);
	assert_woken(a, 1, wa, WAKE_DEADLINE);
	assert_woken(b, 1, wb, WAKE_RETRY);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

static void test_waiters__shutdown_wakes_everyone(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = join("ch", &a, &confirmed);
	wb = join_on(WS2, "ch", &b, &confirmed);
	waiters_sleep(wa, 0);
	waiters_sleep(wb, 0);
	waiters_shutdown_all();
	assert_int_equal(a.resumed + b.resumed, 0);	/* posted to each loop */
	turn();
	loop_turn(L2, 0);
	assert_woken(a, 1, wa, WAKE_SHUTDOWN);
	assert_woken(b, 1, wb, WAKE_SHUTDOWN);
	waiters_sleep(wa, 0);			/* a later sleep wakes at once */
	turn();
	assert_int_equal(a.resumed, 2);
	assert_int_equal(waiters_count_all(), 2);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

/* When ch's retry timer in ws fires, in ms from now; -1 when it is not
 * armed. */
static int64_t retry_in_on(struct waiters *ws, const char *ch)
{
	struct channel *c = channel_lookup(ws, ch);

	if (!c || !loop_timer_armed(&c->retry))
		return -1;
	return c->retry.node.at_ms - now_ms();
}

static int64_t retry_in(const char *ch)
{
	return retry_in_on(WS, ch);
}

/* ch's retry timer in ws is armed and due within ms. */
#define assert_retry_due(ws, ch, ms) \
	assert_true(retry_in_on(ws, ch) >= 0 && retry_in_on(ws, ch) <= (ms))

/* Wake w (asleep on "ch" and the oldest there) with a "0" and have it sleep
 * again, reporting a lease that ends in lease_ms. */
static void report(struct waiter *w, int64_t lease_ms)
{
	message(WS, "ch", "0");
	assert_int_equal(waiters_wake_reason(w), WAKE_RETRY);
	waiters_sleep(w, now_ms() + lease_ms);
}

static void test_waiters__retry_timer_keeps_the_earliest_lease_end(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	assert_int_equal(retry_in("ch"), -1);
	report(w[0], 5000);
	assert_true(retry_in("ch") > 4000 && retry_in("ch") <= 5000);
	report(w[1], 1000);
	assert_true(retry_in("ch") > 500 && retry_in("ch") <= 1000);
	/* an older view of a longer lease cannot push it back */
	report(w[2], 3000);
	assert_true(retry_in("ch") > 500 && retry_in("ch") <= 1000);
	leave_all(w);
	assert_int_equal(retry_in("ch"), -1);
}

static void test_waiters__lease_end_wakes_one_and_a_winner_covers_the_rest(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	report(w[0], 10);
	turn_after(20);
	/* the oldest (now w[1]) looks; the others sleep on */
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(rq[2].resumed, 1);
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(retry_in("ch"), -1);
	/* it wins, with a lease of 10 ms, and dies holding it: no message
	 * will come, its lease end must wake the next */
	waiters_leave(w[1], now_ms() + 10);
	assert_retry_due(WS, "ch", 10);
	turn_after(20);
	assert_int_equal(rq[2].resumed, 2);
	assert_int_equal(rq[0].resumed, 2);
	waiters_leave(w[2], now_ms() + 60000);
	waiters_leave(w[0], 0);
}

static void test_waiters__winner_covers_those_still_awake(void **state)
{
	struct fake_req rq[2] = { { 0 } };
	struct waiter *w[2];
	bool confirmed;

	(void)state;
	for (int i = 0; i < 2; i++)
		w[i] = join("ch", &rq[i], &confirmed);
	confirm(WS, "ch");
	/* both awake (a "1" woke them): one wins before the other, which
	 * tried while the lock was free but was refused, sleeps blind */
	waiters_leave(w[0], now_ms() + 10);
	waiters_sleep(w[1], 0);
	turn();			/* its first sleep: it retries (subscribe-then-retry) */
	assert_int_equal(rq[1].resumed, 1);
	waiters_sleep(w[1], 0);
	assert_retry_due(WS, "ch", 10);
	turn_after(20);
	assert_int_equal(rq[1].resumed, 2);
	waiters_leave(w[1], 0);
}

static void test_waiters__a_look_that_ends_blind_is_handed_over(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	report(w[0], 10);
	turn_after(20);
	assert_int_equal(rq[1].resumed, 2);	/* w[1] looks for the others */
	/* a sleeper hanging up meanwhile changes nothing: w[1] will report */
	waiters_leave(w[2], 0);
	turn();
	assert_int_equal(rq[0].resumed, 2);
	/* w[1]'s client hangs up before it saw the lock: w[0] looks instead */
	waiters_leave(w[1], 0);
	assert_int_equal(rq[0].resumed, 2);	/* from the loop, not from leave */
	turn();
	assert_woken(rq[0], 3, w[0], WAKE_RETRY);
	waiters_leave(w[0], 0);
}

/* "-<ms>", a fair lock's next in line told the new holder's lease: no
 * wake, the retry timer at that lease's end (and a little after). */
static void test_waiters__a_lease_told_arms_the_retry_and_wakes_nobody(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;

	(void)state;
	w = asleep("ch", &a);
	assert_int_equal(retry_in("ch"), -1);
	message(WS, "ch", "-");
	message(WS, "ch", "-2x");
	message(WS, "ch", "-123456789012");	/* more than 10 digits */
	assert_int_equal(retry_in("ch"), -1);
	message(WS, "ch", "-60000");
	assert_int_equal(a.resumed, 1);		/* its first sleep's wake alone */
	assert_true(retry_in("ch") > 59000 && retry_in("ch") <= 60002);
	message(WS, "ch", "-30");		/* a shorter one moves it earlier */
	assert_retry_due(WS, "ch", 32);
	message(WS, "ch", "-90000");		/* a longer one does not push it back */
	assert_retry_due(WS, "ch", 32);
	assert_int_equal(a.resumed, 1);
	turn_after(40);
	assert_woken(a, 2, w, WAKE_RETRY);
	/* told while it is awake: nothing banked, it is not woken again */
	message(WS, "ch", "-10");
	waiters_sleep(w, 0);
	turn();
	assert_int_equal(a.resumed, 2);
	assert_retry_due(WS, "ch", 12);
	turn_after(20);
	assert_woken(a, 3, w, WAKE_RETRY);
	waiters_leave(w, 0);
}

static void test_waiters__a_shortened_lease_moves_the_retry_earlier(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;

	(void)state;
	w = asleep("ch", &a);
	report(w, 60000);
	waiters_lease_ends(WS, "ch", now_ms() + 10);	/* a heartbeat shortened it */
	assert_retry_due(WS, "ch", 10);
	waiters_lease_ends(WS, "ch", now_ms() + 30000);	/* a longer one: no later */
	assert_retry_due(WS, "ch", 10);
	waiters_lease_ends(WS, "nobody", now_ms() + 10);	/* nobody waits there */
	assert_null(channel_lookup(WS, "nobody"));
	turn_after(20);
	assert_woken(a, 3, w, WAKE_RETRY);
	waiters_leave(w, 0);
	loop_turn(L2, 0);	/* what was posted there finds no channel */
	assert_int_equal(WS2->channels.n, 0);
}

/* ----- Threads and the loop ----- */

/* A resume that checks it is not called from inside waiters_sleep(). */
static void test_waiters__a_wake_resumes_from_the_loop_only(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = join("ch", &a, &confirmed);
	confirm(WS, "ch");
	/* confirmed since it joined: its sleep wakes it at once, but resume
	 * runs from the loop, after waiters_sleep() returned */
	inside_waiters = true;
	waiters_sleep(wa, 0);
	inside_waiters = false;
	assert_int_equal(a.resumed, 0);
	turn();
	assert_woken(a, 1, wa, WAKE_RETRY);
	/* a wake on its way is cancelled by a leave: no resume of a freed
	 * request (a banked permit wakes wb at once) */
	message(WS, "ch", "0");			/* banked: nobody sleeps */
	wb = join("ch", &b, &confirmed);
	assert_true(confirmed);
	waiters_sleep(wb, 0);
	waiters_leave(wb, 0);
	turn();
	assert_int_equal(b.resumed, 0);
	waiters_leave(wa, 0);
}

static void test_waiters__a_sleeping_client_hanging_up_is_gone(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	w = waiters_join(WS, "ch", sv[0], resume, &a, now_ms() + 60000, 0, &confirmed);
	confirm(WS, "ch");
	first_sleep(w, &a);
	turn();
	assert_int_equal(a.resumed, 1);		/* the socket is quiet */
	/* the client half-closes: EPOLLRDHUP */
	assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
	loop_turn(L, 1000);
	assert_woken(a, 2, w, WAKE_GONE);
	/* awake, it is no longer watched: nothing more comes */
	loop_turn(L, 0);
	assert_int_equal(a.resumed, 2);
	waiters_leave(w, 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_waiters__lease_ends_reach_the_other_loops(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;

	(void)state;
	wa = asleep("ch", &a);
	wb = asleep_on(WS2, "ch", &b);
	/* a heartbeat served by L's loop shortens the lease */
	waiters_lease_ends(WS, "ch", now_ms() + 10);
	assert_retry_due(WS, "ch", 10);
	assert_int_equal(retry_in_on(WS2, "ch"), -1);	/* posted, not yet seen */
	loop_turn(L2, 0);
	assert_retry_due(WS2, "ch", 10);
	turn_after(20);
	loop_turn(L2, 0);
	assert_int_equal(a.resumed, 2);
	assert_woken(b, 2, wb, WAKE_RETRY);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

/* A waiter granted on one loop reports its own lease end to the others:
 * a sleeper there may have tried just before the grant (and seen no
 * holder, only a queue) and be asleep until a queue refresh; should the
 * winner die holding the lock, it is retried at the winner's lease end. */
static void test_waiters__a_winners_lease_end_reaches_the_other_loops(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = join("ch", &a, &confirmed);
	confirm(WS, "ch");
	wb = asleep_on(WS2, "ch", &b);
	assert_int_equal(retry_in_on(WS2, "ch"), -1);
	waiters_leave(wa, now_ms() + 10);	/* granted, with a 10 ms lease */
	loop_turn(L2, 0);
	assert_retry_due(WS2, "ch", 10);
	usleep(20 * 1000);
	loop_turn(L2, 0);
	loop_turn(L2, 0);
	assert_woken(b, 2, wb, WAKE_RETRY);
	waiters_leave(wb, 0);
}

struct delivery {
	struct waiters *ws;
	const char *channel;
};

static void *deliver_zero(void *arg)
{
	struct delivery *d = arg;

	waiters_deliver_message(d->ws, d->channel, "0", 1, 1);
	return NULL;
}

static void test_waiters__a_delivery_from_another_thread_wakes_its_waiter(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	struct delivery d = { WS, "b" };
	pthread_t t;

	(void)state;
	wa = asleep("a", &a);
	wb = asleep("b", &b);
	assert_int_equal(pthread_create(&t, NULL, deliver_zero, &d), 0);
	pthread_join(t, NULL);
	assert_int_equal(b.resumed, 1);		/* in L's mailbox */
	loop_turn(L, 1000);
	assert_woken(b, 2, wb, WAKE_RETRY);
	assert_int_equal(a.resumed, 1);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

static void test_waiters__retry_wakes_that_sleeper_alone(void **state)
{
	struct waiter *w[3];
	struct fake_req rq[3] = { 0 };

	(void)state;
	three_asleep(w, rq, false);
	inside_waiters = true;
	waiters_retry(w[1]);		/* its queue place is gone: look again */
	inside_waiters = false;
	assert_int_equal(rq[1].resumed, 1);	/* not yet: from the loop */
	turn();
	assert_int_equal(rq[0].resumed, 1);
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(rq[2].resumed, 1);
	assert_int_equal(waiters_wake_reason(w[1]), WAKE_RETRY);
	/* awake: a second retry changes nothing */
	waiters_retry(w[1]);
	turn();
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(w[1]->ch->nsleeping, 2);
	leave_all(w);
}

/* A grant told to its owner (waiters_owner_told) wakes that owner's
 * other sleepers on the channel and nobody else, found through the loop's
 * count of sleepers by channel and owner, which follows them as they
 * sleep, wake, leave and change owner, and is empty when they are gone. */
static void test_waiters__owner_told_wakes_that_owners_sleepers_only(void **state)
{
	static const char *const owner[3] = { "a", "b", "b" };
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];
	bool confirmed;

	(void)state;
	for (int i = 0; i < 3; i++) {
		w[i] = join("ch", &rq[i], &confirmed);
		waiters_set_owner(w[i], owner[i]);
	}
	confirm(WS, "ch");
	for (int i = 0; i < 3; i++)
		first_sleep(w[i], &rq[i]);
	waiters_owner_told(WS, "ch", "c");
	waiters_owner_told(WS, "other", "a");
	turn();
	for (int i = 0; i < 3; i++)
		assert_int_equal(rq[i].resumed, 1);
	waiters_owner_told(WS, "ch", "b");
	turn();
	assert_int_equal(rq[0].resumed, 1);
	assert_woken(rq[1], 2, w[1], WAKE_RETRY);
	assert_woken(rq[2], 2, w[2], WAKE_RETRY);
	/* one of b's sleeps again, the other leaves granted: b is still found */
	waiters_sleep(w[1], 0);
	waiters_leave(w[2], now_ms() + 60000);
	turn();
	waiters_owner_told(WS, "ch", "b");
	turn();
	assert_woken(rq[1], 3, w[1], WAKE_RETRY);
	/* an owner changed while asleep is found under the new one only */
	waiters_set_owner(w[0], "z");
	waiters_owner_told(WS, "ch", "a");
	turn();
	assert_int_equal(rq[0].resumed, 1);
	waiters_owner_told(WS, "ch", "z");
	turn();
	assert_woken(rq[0], 2, w[0], WAKE_RETRY);
	waiters_leave(w[0], 0);
	waiters_leave(w[1], 0);
	assert_int_equal(WS->owners.n, 0);
}

/* A semaphore's channel (WAITER_COUNTED): "<n>" wakes the n oldest
 * sleepers, banks what is left for those awake, and "0" (a shorter lease)
 * still wakes one to look. */
static void test_waiters__a_count_wakes_that_many_sleepers(void **state)
{
	struct waiter *w[4];
	struct fake_req rq[4] = { { 0 } };
	bool confirmed;

	(void)state;
	for (int i = 0; i < 4; i++)
		w[i] = waiters_join(WS, "sem", -1, resume, &rq[i], now_ms() + 60000,
				    WAITER_COUNTED, &confirmed);
	confirm(WS, "sem");
	for (int i = 0; i < 4; i++)
		first_sleep(w[i], &rq[i]);
	message(WS, "sem", "2");	/* two permits came back */
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(rq[2].resumed, 1);
	assert_int_equal(rq[3].resumed, 1);
	message(WS, "sem", "0");	/* a lease got shorter: one looks */
	assert_int_equal(rq[2].resumed, 2);
	assert_int_equal(rq[3].resumed, 1);
	/* more than sleep: the rest is banked for the awake ones */
	message(WS, "sem", "12");
	assert_int_equal(rq[3].resumed, 2);
	assert_int_equal(w[0]->ch->permits, 4);	/* at most one per joined waiter */
	waiters_sleep(w[0], 0);		/* a banked permit: woken at once */
	turn();
	assert_int_equal(rq[0].resumed, 3);
	for (int i = 0; i < 4; i++)
		waiters_leave(w[i], 0);
}

/* ----- Watchers ----- */

static struct waiter *watcher(const char *ch, struct fake_req *rq, int64_t deadline_ms)
{
	bool confirmed;

	return waiters_join(WS, ch, -1, resume, rq, deadline_ms, WAITER_WATCH, &confirmed);
}

static void test_waiters__every_message_wakes_every_watcher_and_takes_nothing(void **state)
{
	struct fake_req rq[3] = { { 0 } }, v[2] = { { 0 } };
	struct waiter *w[3], *x[2];

	(void)state;
	three_asleep(w, rq, false);
	for (int i = 0; i < 2; i++) {
		x[i] = watcher("ch", &v[i], now_ms() + 60000);
		waiters_sleep(x[i], 0);
	}
	turn();
	assert_int_equal(v[0].resumed + v[1].resumed, 0);
	assert_int_equal(waiters_count_all(), 5);
	assert_int_equal(waiters_count_watchers(), 2);
	/* a "0": the oldest acquirer, as before, and every watcher */
	message(WS, "ch", "0");
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(rq[1].resumed + rq[2].resumed, 2);
	for (int i = 0; i < 2; i++) {
		assert_woken(v[i], 1, x[i], WAKE_RETRY);
		waiters_sleep(x[i], 0);
	}
	/* any payload: dlockd's own "acquired" wakes the watchers only */
	message(WS, "ch", "acquired");
	assert_int_equal(v[0].resumed + v[1].resumed, 4);
	assert_int_equal(rq[1].resumed + rq[2].resumed, 2);
	/* a watcher leaving hands nothing over: no acquirer is woken */
	waiters_leave(x[0], 0);
	waiters_leave(x[1], 0);
	turn();
	assert_int_equal(rq[1].resumed + rq[2].resumed, 2);
	assert_int_equal(waiters_count_watchers(), 0);
	/* with no acquirer asleep, a "0" is banked for the acquirers only */
	waiters_leave(w[1], 0);
	waiters_leave(w[2], 0);
	x[0] = watcher("ch", &v[0], now_ms() + 60000);
	waiters_sleep(x[0], 0);
	message(WS, "ch", "0");
	assert_int_equal(v[0].resumed, 3);
	assert_int_equal(channel_lookup(WS, "ch")->permits, 1);
	waiters_leave(x[0], 0);
	waiters_leave(w[0], 0);
}

static void test_waiters__a_message_while_a_watcher_looks_wakes_it_as_it_sleeps(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *x;

	(void)state;
	x = watcher("ch", &a, now_ms() + 60000);
	confirm(WS, "ch");
	waiters_sleep(x, 0);	/* confirmed since it joined: look again */
	turn();
	assert_woken(a, 1, x, WAKE_RETRY);
	/* awake (reading the lock), it hears of a change */
	message(WS, "ch", "released");
	assert_int_equal(a.resumed, 1);
	waiters_sleep(x, 0);	/* its read may predate the change: at once */
	turn();
	assert_woken(a, 2, x, WAKE_RETRY);
	waiters_sleep(x, 0);	/* nothing new: it sleeps */
	turn();
	assert_int_equal(a.resumed, 2);
	waiters_leave(x, 0);
	assert_int_equal(WS->channels.n, 0);	/* its channel went with it */
	assert_int_equal(nsubs, 2);
	assert_false(subs[1].want);
}

static void test_waiters__a_watcher_has_its_own_timer(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *x, *y;

	(void)state;
	x = watcher("ch", &a, now_ms() + 60000);
	y = watcher("ch2", &b, 0);		/* no deadline at all */
	waiters_sleep(x, now_ms() + 60000);
	waiters_sleep(y, 0);
	turn();
	/* asleep, it only moves its timer: to the lease end it read */
	waiters_sleep(x, now_ms() + 10);
	turn_after(20);
	assert_woken(a, 1, x, WAKE_RETRY);
	assert_true(list_empty(&channel_lookup(WS, "ch")->sleepers));	/* not among the acquirers */
	waiters_leave(x, 0);
	/* its deadline */
	x = watcher("ch", &a, now_ms() + 10);
	waiters_sleep(x, now_ms() + 60000);
	turn_after(20);
	assert_woken(a, 2, x, WAKE_DEADLINE);
	waiters_leave(x, 0);
	assert_int_equal(b.resumed, 0);
	waiters_shutdown_all();
	turn();
	assert_woken(b, 1, y, WAKE_SHUTDOWN);
	waiters_leave(y, 0);
}

/* A told owner wakes that owner's sleepers on every loop, and only them;
 * the loops that have no waiter with an owner are not posted to at all
 * (most grants: no note, no wake of another thread). */
static void test_waiters__a_told_owner_wakes_its_sleepers_on_every_loop(void **state)
{
	struct fake_req a = { 0 }, b = { 0 }, c = { 0 };
	struct waiter *wa, *wb, *wc;
	bool confirmed;

	(void)state;
	wa = asleep("ch", &a);
	wb = asleep_on(WS2, "ch", &b);
	wc = join_on(WS2, "ch", &c, &confirmed);
	assert_true(confirmed);
	waiters_sleep(wc, 0);
	/* nobody has an owner: nothing is counted, nothing posted */
	waiters_owner_told(WS, "ch", "w1");
	assert_int_equal(atomic_load(&R.owned), 0);
	turn();
	loop_turn(L2, 0);
	assert_int_equal(a.resumed, 1);
	assert_int_equal(b.resumed, 1);
	assert_int_equal(c.resumed, 0);
	/* one of L2's waits for w1, L's for w2 */
	waiters_set_owner(wb, "w1");
	waiters_set_owner(wb, "w1");	/* counted once */
	waiters_set_owner(wa, "w2");
	assert_int_equal(atomic_load(&R.owned), 2);
	assert_int_equal(atomic_load(&WS->owned), 1);
	assert_int_equal(atomic_load(&WS2->owned), 1);
	waiters_owner_told(WS, "ch", "w1");
	turn();
	assert_int_equal(a.resumed, 1);		/* w2's: not woken */
	assert_int_equal(b.resumed, 1);		/* posted, not yet seen */
	loop_turn(L2, 0);
	assert_woken(b, 2, wb, WAKE_RETRY);
	assert_int_equal(c.resumed, 0);		/* no owner: not woken */
	waiters_leave(wb, 0);
	assert_int_equal(atomic_load(&WS2->owned), 0);
	waiters_leave(wa, 0);
	waiters_leave(wc, 0);
	assert_int_equal(atomic_load(&R.owned), 0);
	assert_int_equal(atomic_load(&WS->owned), 0);
}

/* A newcomer that joins a live channel after its first try need not try
 * again only if the channel heard nothing since the mark taken before that
 * try: no message, no new confirmation, no drop, no grant told to its own
 * owner (other owners' grants do not matter, unless more came than the
 * channel remembers). */
static void test_waiters__a_join_is_covered_only_if_nothing_was_heard_since_the_mark(
	void **state)
{
	struct fake_req a = { 0 }, b = { 0 }, c = { 0 };
	struct waiter *wa, *wb, *wc;
	uint64_t mark;
	bool confirmed;
	char other[16];

	(void)state;
	wa = asleep("ch", &a);		/* keeps "ch" live */
	waiters_set_owner(wa, "a");

	/* nothing heard between the mark and the join */
	mark = waiters_expect_join(WS);
	assert_int_equal(atomic_load(&WS->owned), 2);	/* counted while it tries */
	wb = join("ch", &b, &confirmed);
	waiters_set_owner(wb, "b");
	waiters_expect_done(WS);
	assert_true(confirmed);
	assert_true(waiters_join_covered(wb, mark));
	waiters_leave(wb, 0);

	/* a message came after the mark: it may be the release */
	mark = waiters_expect_join(WS);
	message(WS, "ch", "0");
	assert_woken(a, 2, wa, WAKE_RETRY);
	wb = join("ch", &b, &confirmed);
	waiters_set_owner(wb, "b");
	waiters_expect_done(WS);
	assert_false(waiters_join_covered(wb, mark));
	waiters_leave(wb, 0);
	waiters_sleep(wa, 0);

	/* the subscription dropped and came back after the mark */
	mark = waiters_expect_join(WS);
	waiters_deliver_disconnect(WS);
	turn();
	wb = join("ch", &b, &confirmed);
	waiters_set_owner(wb, "b");
	assert_false(confirmed);
	assert_false(waiters_join_covered(wb, mark));
	confirm(WS, "ch");
	assert_false(waiters_join_covered(wb, mark));
	waiters_expect_done(WS);
	waiters_leave(wb, 0);
	turn();
	assert_woken(a, 3, wa, WAKE_RETRY);
	waiters_sleep(wa, 0);

	/* a grant told to another owner does not matter; to its own, it does */
	mark = waiters_expect_join(WS);
	waiters_owner_told(WS, "ch", "x");
	wb = join("ch", &b, &confirmed);
	waiters_set_owner(wb, "b");
	assert_true(waiters_join_covered(wb, mark));
	waiters_owner_told(WS, "ch", "b");
	assert_false(waiters_join_covered(wb, mark));
	waiters_expect_done(WS);
	waiters_leave(wb, 0);

	/* more grants than the channel remembers: one may have been its owner's */
	mark = waiters_expect_join(WS);
	for (int i = 0; i < TOLD_MARKS; i++) {
		snprintf(other, sizeof(other), "o%d", i);
		waiters_owner_told(WS, "ch", other);
	}
	wb = join("ch", &b, &confirmed);
	waiters_set_owner(wb, "b");
	assert_false(waiters_join_covered(wb, mark));
	waiters_expect_done(WS);
	waiters_leave(wb, 0);

	/* a channel that was not live at the mark: its confirmation is news */
	mark = waiters_expect_join(WS);
	wc = join("new", &c, &confirmed);
	waiters_set_owner(wc, "c");
	assert_false(confirmed);
	confirm(WS, "new");
	assert_false(waiters_join_covered(wc, mark));
	waiters_expect_done(WS);
	waiters_leave(wc, 0);
	waiters_leave(wa, 0);
	assert_int_equal(atomic_load(&WS->owned), 0);
	assert_int_equal(atomic_load(&R.owned), 0);
}

/* The sleeper woken for all loops is gone before its resume, and the one
 * other waiter of its loop is awake, its try in flight (sent before the
 * release, it will be refused): the wake is banked for it, so it tries
 * again as it goes to sleep -- not posted away to loops that have none. */
static void test_waiters__a_taken_wake_whose_sleeper_left_is_banked_for_one_awake(
	void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed;

	(void)state;
	wa = asleep("ch", &a);
	wb = join("ch", &b, &confirmed);	/* trying */
	channel_message(WS, "ch", "0", 1, 41);
	assert_true(wa->ready && wa->claimed);
	waiters_leave(wa, 0);
	assert_int_equal(channel_lookup(WS, "ch")->permits, 1);
	waiters_sleep(wb, 0);			/* refused: its try was before the release */
	turn();
	assert_woken(b, 1, wb, WAKE_RETRY);
	waiters_leave(wb, 0);
	turn();
	assert_int_equal(a.resumed, 1);
}

/* The sleeper a loop woke for all loops tried, was refused and sleeps
 * till the lease end it saw (a heartbeat elsewhere shortened it, and its
 * "0" woke this loop alone): the other loop's sleepers are retried by
 * then too. */
static void test_waiters__a_taken_wakes_lease_end_reaches_the_other_loops(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;

	(void)state;
	wa = asleep("ch", &a);
	wb = asleep_on(WS2, "ch", &b);
	message_seq(WS, "ch", "0", 31);
	message_seq(WS2, "ch", "0", 31);
	assert_woken(a, 2, wa, WAKE_RETRY);
	assert_int_equal(b.resumed, 1);
	waiters_sleep(wa, now_ms() + 30);	/* refused: the holder's lease ends then */
	loop_turn(L2, 0);
	assert_int_equal(b.resumed, 1);
	usleep(40 * 1000);
	loop_turn(L2, 0);
	assert_woken(b, 2, wb, WAKE_RETRY);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

#define T(name) cmocka_unit_test_setup_teardown(test_waiters__##name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(first_join_subscribes_last_leave_unsubscribes),
		T(confirmation_wakes_sleepers_to_retry),
		T(a_disconnect_makes_channels_wait_for_a_new_confirmation),
		T(zero_wakes_the_oldest_only),
		T(zero_wakes_the_oldest_of_one_loop_only),
		T(a_read_write_locks_zero_wakes_every_loops_writer),
		T(a_taken_wake_whose_permit_is_dropped_is_handed_on),
		T(a_taken_wake_whose_sleeper_left_is_handed_on),
		T(a_taken_wakes_lease_end_reaches_the_other_loops),
		T(a_taken_wake_whose_sleeper_left_is_banked_for_one_awake),
		T(one_wakes_everybody),
		T(messages_prefer_the_oldest_writer),
		T(message_while_nobody_sleeps_is_banked),
		T(other_payloads_and_channels_wake_nobody),
		T(a_lease_told_arms_the_retry_and_wakes_nobody),
		T(deadline_and_retry_timers_fire),
		T(shutdown_wakes_everyone),
		T(retry_timer_keeps_the_earliest_lease_end),
		T(lease_end_wakes_one_and_a_winner_covers_the_rest),
		T(winner_covers_those_still_awake),
		T(a_look_that_ends_blind_is_handed_over),
		T(a_shortened_lease_moves_the_retry_earlier),
		T(a_wake_resumes_from_the_loop_only),
		T(a_sleeping_client_hanging_up_is_gone),
		T(a_winners_lease_end_reaches_the_other_loops),
		T(lease_ends_reach_the_other_loops),
		T(a_delivery_from_another_thread_wakes_its_waiter),
		T(a_told_owner_wakes_its_sleepers_on_every_loop),
		T(retry_wakes_that_sleeper_alone),
		T(owner_told_wakes_that_owners_sleepers_only),
		T(a_count_wakes_that_many_sleepers),
		T(every_message_wakes_every_watcher_and_takes_nothing),
		T(a_message_while_a_watcher_looks_wakes_it_as_it_sleeps),
		T(a_watcher_has_its_own_timer),
		T(a_join_is_covered_only_if_nothing_was_heard_since_the_mark),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
