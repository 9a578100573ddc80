/* test_waiters.c -- who is woken and why: "0" wakes the oldest sleeper,
 * "1" all of them, a message with nobody asleep is banked, a confirmed
 * subscription wakes the channel, deadlines fire, and the subscription
 * changes handed to the pubsub thread follow the joined count; the
 * channel's retry timer keeps every sleeper covered by the earliest lease
 * end reported (by a sleeper, a granted waiter, a heartbeat), wakes one
 * sleeper, and is handed over when the one it woke gives up knowing
 * nothing. */
#include "unit.h"

#include "../../service/waiters.c"

struct fake_req {
	int resumed;
};

static int notified;

static void on_notify(void)
{
	notified++;
}

static void resume(void *ctx)
{
	((struct fake_req *)ctx)->resumed++;
}

static int setup(void **state)
{
	(void)state;
	notified = 0;
	return waiters_init(on_notify);
}

static int teardown(void **state)
{
	(void)state;
	waiters_release();
	return 0;
}

/* Drain the subscription changes; returns how many, the last in *sub. */
static int drain_changes(const char *want_name, bool *sub)
{
	char *name;
	int n = 0;

	while (waiters_next_change(&name, sub)) {
		if (want_name)
			assert_string_equal(name, want_name);
		free(name);
		n++;
	}
	return n;
}

/* Joined before the subscription was confirmed, w's first sleep ends at
 * once (subscribe-then-retry); consume that wake and sleep for real. */
static void first_sleep(struct waiter *w, struct fake_req *rq)
{
	int before = rq->resumed;

	waiters_sleep(w, 0);
	assert_int_equal(rq->resumed, before + 1);
	assert_int_equal(waiters_wake_reason(w), WAKE_RETRY);
	waiters_sleep(w, 0);
	assert_int_equal(rq->resumed, before + 1);
}

static struct waiter *join(const char *ch, struct fake_req *rq, bool *confirmed)
{
	return waiters_join(ch, -1, resume, rq, now_ms() + 60000, 0, confirmed);
}

/* Three waiters on "ch" (w[1] a writer when writer_in_middle), the
 * subscription confirmed and each asleep after its first retry. */
static void three_asleep(struct waiter *w[3], struct fake_req rq[3], bool writer_in_middle)
{
	bool confirmed, sub;

	for (int i = 0; i < 3; i++)
		w[i] = waiters_join("ch", -1, resume, &rq[i], now_ms() + 60000,
				    i == 1 && writer_in_middle ? WAITER_WRITER : 0, &confirmed);
	drain_changes("ch", &sub);
	waiters_on_subscribed("ch");
	for (int i = 0; i < 3; i++)
		first_sleep(w[i], &rq[i]);
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
	bool confirmed, sub;

	(void)state;
	wa = join("ch", &a, &confirmed);
	assert_false(confirmed);
	assert_int_equal(notified, 1);
	wb = join("ch", &b, &confirmed);
	assert_int_equal(drain_changes("ch", &sub), 1);
	assert_true(sub);
	waiters_on_subscribed("ch");
	waiters_leave(wa, 0);
	assert_int_equal(drain_changes("ch", &sub), 0);	/* b still waits */
	waiters_leave(wb, 0);
	assert_int_equal(drain_changes("ch", &sub), 1);
	assert_false(sub);
	waiters_on_unsubscribed("ch");
	assert_int_equal(W.nchannels, 0);		/* nothing left behind */
	assert_int_equal(waiters_count(), 0);
}

static void test_waiters__confirmation_wakes_sleepers_to_retry(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed, sub;

	(void)state;
	w = join("ch", &a, &confirmed);
	waiters_sleep(w, 0);
	assert_int_equal(a.resumed, 0);
	drain_changes("ch", &sub);
	waiters_on_subscribed("ch");
	assert_int_equal(a.resumed, 1);
	assert_int_equal(waiters_wake_reason(w), WAKE_RETRY);
	assert_int_equal(waiters_wake_reason(w), WAKE_NONE);
	waiters_leave(w, 0);
}

static void test_waiters__zero_wakes_the_oldest_only(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	waiters_on_message("ch", "0", 1);
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(rq[1].resumed, 1);
	assert_int_equal(rq[2].resumed, 1);
	waiters_on_message("ch", "0", 1);
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(rq[2].resumed, 1);
	leave_all(w);
}

static void test_waiters__one_wakes_everybody(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	waiters_on_message("ch", "1", 1);
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
	waiters_on_message("ch", "1", 1);
	assert_int_equal(rq[1].resumed, 2);	/* the writer, alone */
	assert_int_equal(rq[0].resumed, 1);
	assert_int_equal(rq[2].resumed, 1);
	waiters_leave(w[1], now_ms() + 60000);	/* granted */
	waiters_on_message("ch", "1", 1);	/* no writer left: every reader */
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(rq[2].resumed, 2);
	waiters_leave(w[0], 0);
	waiters_leave(w[2], 0);
}

static void test_waiters__message_while_nobody_sleeps_is_banked(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed, sub;

	(void)state;
	w = join("ch", &a, &confirmed);
	drain_changes("ch", &sub);
	waiters_on_subscribed("ch");
	first_sleep(w, &a);
	waiters_on_message("ch", "0", 1);
	assert_int_equal(a.resumed, 2);
	(void)waiters_wake_reason(w);
	/* the waiter is between two tries when the next release arrives */
	waiters_on_message("ch", "0", 1);
	waiters_on_message("ch", "0", 1);	/* capped at one per joined waiter */
	assert_int_equal(a.resumed, 2);
	waiters_sleep(w, 0);
	assert_int_equal(a.resumed, 3);
	assert_int_equal(waiters_wake_reason(w), WAKE_RETRY);
	waiters_sleep(w, 0);
	assert_int_equal(a.resumed, 3);		/* only one permit was kept */
	waiters_leave(w, 0);
}

static void test_waiters__other_payloads_and_channels_wake_nobody(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed, sub;

	(void)state;
	w = join("ch", &a, &confirmed);
	drain_changes("ch", &sub);
	waiters_on_subscribed("ch");
	first_sleep(w, &a);
	waiters_on_message("ch", "2", 1);
	waiters_on_message("ch", "00", 2);
	waiters_on_message("other", "0", 1);
	assert_int_equal(a.resumed, 1);
	waiters_leave(w, 0);
}

static void test_waiters__deadline_and_retry_timers_fire(void **state)
{
	struct fake_req a = { 0 }, b = { 0 };
	struct waiter *wa, *wb;
	bool confirmed, sub;

	(void)state;
	wa = waiters_join("ch", -1, resume, &a, now_ms() + 20, 0, &confirmed);
	wb = waiters_join("ch2", -1, resume, &b, now_ms() + 60000, 0, &confirmed);
	drain_changes(NULL, &sub);	/* never confirmed: no wake from that */
	waiters_sleep(wa, 0);
	waiters_sleep(wb, now_ms() + 10);	/* the holder's lease ends in 10 ms */
	assert_true(waiters_next_timeout_ms() <= 20);
	usleep(30 * 1000);
	waiters_run_timers();
	assert_int_equal(a.resumed, 1);
	assert_int_equal(waiters_wake_reason(wa), WAKE_DEADLINE);
	assert_int_equal(b.resumed, 1);
	assert_int_equal(waiters_wake_reason(wb), WAKE_RETRY);
	waiters_leave(wa, 0);
	waiters_leave(wb, 0);
}

static void test_waiters__shutdown_wakes_everyone(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed;

	(void)state;
	w = join("ch", &a, &confirmed);
	waiters_sleep(w, 0);
	waiters_shutdown();
	assert_int_equal(a.resumed, 1);
	assert_int_equal(waiters_wake_reason(w), WAKE_SHUTDOWN);
	waiters_sleep(w, 0);			/* a later sleep wakes at once */
	assert_int_equal(a.resumed, 2);
	waiters_leave(w, 0);
}

/* When ch's retry timer fires, in ms from now; -1 when it is not armed. */
static int64_t retry_in(const char *ch)
{
	struct channel *c = channel_find(ch);

	if (!c || !heap_armed(&c->retry.node))
		return -1;
	return c->retry.node.at_ms - now_ms();
}

/* Wake w (asleep on "ch" and the oldest there) with a "0" and have it sleep
 * again, reporting a lease that ends in lease_ms. */
static void report(struct waiter *w, int64_t lease_ms)
{
	waiters_on_message("ch", "0", 1);
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
	usleep(20 * 1000);
	waiters_run_timers();
	/* the oldest (now w[1]) looks; the others sleep on */
	assert_int_equal(rq[1].resumed, 2);
	assert_int_equal(rq[2].resumed, 1);
	assert_int_equal(rq[0].resumed, 2);
	assert_int_equal(retry_in("ch"), -1);
	/* it wins, with a lease of 10 ms, and dies holding it: no message
	 * will come, its lease end must wake the next */
	waiters_leave(w[1], now_ms() + 10);
	assert_true(retry_in("ch") >= 0 && retry_in("ch") <= 10);
	usleep(20 * 1000);
	waiters_run_timers();
	assert_int_equal(rq[2].resumed, 2);
	assert_int_equal(rq[0].resumed, 2);
	waiters_leave(w[2], now_ms() + 60000);
	waiters_leave(w[0], 0);
}

static void test_waiters__winner_covers_those_still_awake(void **state)
{
	struct fake_req rq[2] = { { 0 } };
	struct waiter *w[2];
	bool confirmed, sub;

	(void)state;
	for (int i = 0; i < 2; i++)
		w[i] = join("ch", &rq[i], &confirmed);
	drain_changes("ch", &sub);
	waiters_on_subscribed("ch");
	/* both awake (a "1" woke them): one wins before the other, which
	 * tried while the lock was free but was refused, sleeps blind */
	waiters_leave(w[0], now_ms() + 10);
	waiters_sleep(w[1], 0);
	assert_true(retry_in("ch") >= 0 && retry_in("ch") <= 10);
	usleep(20 * 1000);
	waiters_run_timers();
	assert_int_equal(rq[1].resumed, 1);
	waiters_leave(w[1], 0);
}

static void test_waiters__a_look_that_ends_blind_is_handed_over(void **state)
{
	struct fake_req rq[3] = { { 0 } };
	struct waiter *w[3];

	(void)state;
	three_asleep(w, rq, false);
	report(w[0], 10);
	usleep(20 * 1000);
	waiters_run_timers();
	assert_int_equal(rq[1].resumed, 2);	/* w[1] looks for the others */
	/* a sleeper hanging up meanwhile changes nothing: w[1] will report */
	waiters_leave(w[2], 0);
	assert_int_equal(rq[0].resumed, 2);
	/* w[1]'s client hangs up before it saw the lock: w[0] looks instead */
	waiters_leave(w[1], 0);
	assert_int_equal(rq[0].resumed, 3);
	assert_int_equal(waiters_wake_reason(w[0]), WAKE_RETRY);
	waiters_leave(w[0], 0);
}

static void test_waiters__a_shortened_lease_moves_the_retry_earlier(void **state)
{
	struct fake_req a = { 0 };
	struct waiter *w;
	bool confirmed, sub;

	(void)state;
	w = join("ch", &a, &confirmed);
	drain_changes("ch", &sub);
	waiters_on_subscribed("ch");
	first_sleep(w, &a);
	report(w, 60000);
	notified = 0;
	waiters_lease_ends("ch", now_ms() + 10);	/* a heartbeat shortened it */
	assert_int_equal(notified, 1);			/* the pubsub thread's timeout */
	assert_true(retry_in("ch") >= 0 && retry_in("ch") <= 10);
	waiters_lease_ends("ch", now_ms() + 30000);	/* a longer one: no later */
	assert_true(retry_in("ch") >= 0 && retry_in("ch") <= 10);
	waiters_lease_ends("nobody", now_ms() + 10);	/* nobody waits there */
	assert_null(channel_find("nobody"));
	usleep(20 * 1000);
	waiters_run_timers();
	assert_int_equal(a.resumed, 3);
	assert_int_equal(waiters_wake_reason(w), WAKE_RETRY);
	waiters_leave(w, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_waiters__first_join_subscribes_last_leave_unsubscribes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__confirmation_wakes_sleepers_to_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__zero_wakes_the_oldest_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__one_wakes_everybody, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__messages_prefer_the_oldest_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__message_while_nobody_sleeps_is_banked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__other_payloads_and_channels_wake_nobody, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__deadline_and_retry_timers_fire, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__shutdown_wakes_everyone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__retry_timer_keeps_the_earliest_lease_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__lease_end_wakes_one_and_a_winner_covers_the_rest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__winner_covers_those_still_awake, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__a_look_that_ends_blind_is_handed_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiters__a_shortened_lease_moves_the_retry_earlier, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
