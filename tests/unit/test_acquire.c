/* test_acquire.c -- the acquire phase machine with its collaborators
 * faked (struct acquire_ops): each test injects the try outcomes, wakes
 * and dequeue answers one by one, and checks the phase after each event
 * and the calls the machine made, in order: granted at once; held, joined
 * on a live channel and retried at once; asleep until a wake; the deadline's
 * last try refused and its queue place given back before the answer; Redis
 * down for a new request and for one already waiting; the client gone and
 * dlockd stopping while it sleeps; and the end of the request taking back a
 * grant that was not delivered; a waiter queued behind a fair lock's head
 * having its place kept by the loop exactly while it sleeps. */
#include "unit.h"

#include "service/lock/acquire.c"

#include <stdio.h>
#include <string.h>

/* ----- Fakes ----- */

static char fake_waiter_mem;
#define FAKE_WAITER ((struct waiter *)&fake_waiter_mem)
static char fake_place_mem;
#define FAKE_PLACE ((struct fair_place *)&fake_place_mem)
static char fake_backend_mem;
#define FAKE_BACKEND ((const struct backend *)&fake_backend_mem)

static char calls[1024];	/* "try(queue) join(deadline, fd) sleep(at) ..." */
static int64_t fake_now;
static bool fake_confirmed;	/* join: is the channel already live? */
static bool fake_covered;	/* ... and has it heard nothing since the mark? */
static int expecting;		/* expect_join calls not yet ended */
static enum waiter_wake fake_reason;
static lock_done_fn pending_try, pending_dequeue;
static void *pending_try_ctx, *pending_dequeue_ctx;
static waiter_resume_fn resume_fn;
static void *resume_ctx;
static int dones;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	size_t len = strlen(calls);
	va_list ap;

	if (len)
		calls[len++] = ' ';
	va_start(ap, fmt);
	vsnprintf(calls + len, sizeof(calls) - len, fmt, ap);
	va_end(ap);
}

static void fake_try(const struct backend *b, enum lock_kind kind, const char *name,
		     const char *owner, const char *principal, int64_t ttl_ms, unsigned flags,
		     const struct lock_extras *x, lock_done_fn done, void *ctx)
{
	(void)x;
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_int_equal(kind, LOCK_KIND_FAIR);
	assert_string_equal(name, "deploy");
	assert_string_equal(owner, "ci-2");
	assert_string_equal(principal, "team-a");
	assert_int_equal(ttl_ms, 30000);
	assert_null(pending_try);	/* one call in flight at a time */
	record("try(%s%s)", (flags & LOCK_QUEUE) ? "queue" : "once",
	       (flags & LOCK_REENTRANT) ? ", reentrant" : "");
	pending_try = done;
	pending_try_ctx = ctx;
}

static void fake_dequeue(const struct backend *b, enum lock_kind kind, const char *name,
			 const char *owner, lock_done_fn done, void *ctx)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_int_equal(kind, LOCK_KIND_FAIR);
	assert_string_equal(name, "deploy");
	assert_string_equal(owner, "ci-2");
	record("dequeue(%s)", done ? "await" : "unawaited");
	pending_dequeue = done;
	pending_dequeue_ctx = ctx;
}

static void fake_undo(const struct backend *b, enum lock_kind kind, const char *name,
		      const char *owner, int64_t change, lock_done_fn done, void *ctx)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_int_equal(kind, LOCK_KIND_FAIR);
	assert_string_equal(name, "deploy");
	assert_string_equal(owner, "ci-2");
	assert_int_equal(change, 7);	/* the grant's own, nothing later */
	assert_null(done);
	assert_null(ctx);
	record("undo");
}

static struct waiter *fake_join(const struct backend *b, enum lock_kind kind, const char *name,
				const char *owner, int fd, waiter_resume_fn resume, void *ctx,
				int64_t deadline_ms, bool *confirmed)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_int_equal(kind, LOCK_KIND_FAIR);
	assert_string_equal(name, "deploy");
	assert_string_equal(owner, "ci-2");
	record("join(%lld, fd %d)", (long long)deadline_ms, fd);
	resume_fn = resume;
	resume_ctx = ctx;
	*confirmed = fake_confirmed;
	return FAKE_WAITER;
}

#define FAKE_MARK 77

static uint64_t fake_expect_join(const struct backend *b)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_int_equal(expecting, 0);
	expecting++;
	return FAKE_MARK;
}

static void fake_expect_done(const struct backend *b)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_int_equal(expecting, 1);
	expecting--;
}

static bool fake_join_covered(const struct waiter *w, uint64_t mark)
{
	assert_ptr_equal(w, FAKE_WAITER);
	assert_int_equal(mark, FAKE_MARK);
	assert_int_equal(expecting, 1);		/* asked before the expectation ends */
	return fake_covered;
}

static void fake_sleep(struct waiter *w, int64_t retry_at_ms)
{
	assert_ptr_equal(w, FAKE_WAITER);
	record("sleep(%lld)", (long long)retry_at_ms);
}

static enum waiter_wake fake_wake_reason(struct waiter *w)
{
	enum waiter_wake why = fake_reason;

	assert_ptr_equal(w, FAKE_WAITER);
	fake_reason = WAKE_NONE;
	return why;
}

static void fake_leave(struct waiter *w, int64_t lease_end_ms)
{
	assert_ptr_equal(w, FAKE_WAITER);
	record("leave(%lld)", (long long)lease_end_ms);
}

static struct fair_place *fake_keep_place(const struct backend *b, const char *name,
					   const char *owner, struct waiter *w)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	assert_string_equal(name, "deploy");
	assert_string_equal(owner, "ci-2");
	assert_ptr_equal(w, FAKE_WAITER);
	record("keep");
	return FAKE_PLACE;
}

static void fake_drop_place(struct fair_place *p)
{
	assert_ptr_equal(p, FAKE_PLACE);
	record("drop");
}

static int64_t fake_now_ms(void)
{
	return fake_now;
}

static void fake_told(const struct backend *b, enum lock_kind kind, const char *name,
		      const char *owner)
{
	assert_ptr_equal(b, FAKE_BACKEND);
	record("told(%d %s %s)", (int)kind, name, owner);
}

static const struct acquire_ops fake_ops = {
	.try_acquire = fake_try,
	.dequeue = fake_dequeue,
	.undo = fake_undo,
	.join = fake_join,
	.expect_join = fake_expect_join,
	.expect_done = fake_expect_done,
	.covered = fake_join_covered,
	.sleep = fake_sleep,
	.wake_reason = fake_wake_reason,
	.leave = fake_leave,
	.keep_place = fake_keep_place,
	.drop_place = fake_drop_place,
	.now_ms = fake_now_ms,
	.told = fake_told,
};

static void on_done(void *ctx)
{
	assert_ptr_equal(ctx, &dones);
	dones++;
	record("done");
}

/* ----- Driving it ----- */

static int setup(void **state)
{
	(void)state;
	calls[0] = '\0';
	fake_now = 1000;
	fake_confirmed = false;
	fake_covered = false;
	expecting = 0;
	fake_reason = WAKE_NONE;
	pending_try = pending_dequeue = NULL;
	resume_fn = NULL;
	dones = 0;
	return 0;
}

/* A fair lock acquire of "deploy" by "ci-2", waiting wait_ms. */
static void start(struct acquire *a, int64_t wait_ms)
{
	memset(a, 0, sizeof(*a));
	*a = (struct acquire){
		.ops = &fake_ops, .b = FAKE_BACKEND, .kind = LOCK_KIND_FAIR,
		.name = "deploy", .owner = "ci-2", .principal = "team-a", .ttl_ms = 30000,
		.wait_ms = wait_ms,
		.fd = 7, .done = on_done, .done_ctx = &dones,
	};
	acquire_start(a);
	assert_int_equal(dones, 0);	/* never from inside acquire_start */
	assert_int_equal(a->phase, ACQUIRE_TRYING);
}

/* The try in flight answers r with st. */
static void answer_try(enum lock_result r, struct lock_state st)
{
	lock_done_fn done = pending_try;

	assert_non_null(done);
	pending_try = NULL;
	done(pending_try_ctx, r, &st);
}

static void answer_dequeue(void)
{
	lock_done_fn done = pending_dequeue;
	struct lock_state st = { 0 };

	assert_non_null(done);
	pending_dequeue = NULL;
	done(pending_dequeue_ctx, LOCK_OK, &st);
}

/* The waiter is woken with why (later, from the loop, as waiters do). */
static void wake(enum waiter_wake why)
{
	assert_non_null(resume_fn);
	fake_reason = why;
	resume_fn(resume_ctx);
}

/* Calls since the last check; clears them. */
static void check_calls(const char *want)
{
	assert_string_equal(calls, want);
	calls[0] = '\0';
}

static const struct lock_state granted = { .token = 42, .holds = 1, .ttl_ms = 30000,
					   .added = true, .change = 7 };
/* The owner held it already: a repeat, which added no hold. */
static const struct lock_state repeated = { .token = 42, .holds = 1, .ttl_ms = 30000 };
/* Held by another owner for 20 s; the caller holds a queue place. */
static const struct lock_state held = { .ttl_ms = 20000, .retry_ms = 20000, .queued = true,
					.others = 0, .why = LOCK_WHY_NONE };

/* Queued behind the head of a fair lock held for 20 s: nothing to retry
 * for, the place to be kept by the loop. */
static const struct lock_state behind = { .ttl_ms = 20000, .retry_ms = 0, .queued = true,
					  .refresh_place = true, .others = 3 };

/* ----- Tests ----- */

static void test_acquire__granted_at_once(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 0);
	check_calls("try(once)");
	answer_try(LOCK_OK, granted);
	check_calls("done");	/* never joined: nothing to leave */
	assert_int_equal(a.phase, ACQUIRE_DONE);
	assert_int_equal(a.outcome, ACQUIRE_GRANTED);
	assert_int_equal(a.state.token, 42);
	assert_int_equal(a.state.ttl_ms, 30000);
	assert_true(a.grant_pending);
	assert_false(acquire_end(&a, true));	/* delivered: kept */
	check_calls("told(1 deploy ci-2)");	/* its other waiters retry */
	assert_false(a.grant_pending);
}

static void test_acquire__held_joins_a_live_channel_and_retries_at_once(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	check_calls("try(queue)");
	fake_confirmed = true;
	answer_try(LOCK_HELD, held);
	/* subscribe, then retry: the channel is live, so try again now */
	check_calls("join(6000, fd 7) try(queue)");
	assert_int_equal(a.phase, ACQUIRE_TRYING);
	assert_true(a.queued);
	fake_now = 1100;
	answer_try(LOCK_OK, granted);
	/* leaves with its own lease end, and the grant took the queue place */
	check_calls("leave(31100) done");
	assert_int_equal(a.outcome, ACQUIRE_GRANTED);
	assert_false(a.queued);
	assert_null(a.waiter);
}

/* The channel was live before the first try and heard nothing since: a
 * release after that try is still to come, so the waiter sleeps without a
 * second try. Whatever the outcome, the expectation of a join ends once. */
static void test_acquire__held_joins_a_covered_channel_and_sleeps_at_once(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	check_calls("try(queue)");
	assert_int_equal(expecting, 1);
	fake_confirmed = true;
	fake_covered = true;
	answer_try(LOCK_HELD, held);
	check_calls("join(6000, fd 7) sleep(21000)");
	assert_int_equal(a.phase, ACQUIRE_SLEEPING);
	assert_int_equal(expecting, 0);
	fake_now = 1500;
	wake(WAKE_RETRY);
	check_calls("try(queue)");
	assert_int_equal(expecting, 0);		/* a retry expects no join */
	answer_try(LOCK_OK, granted);
	check_calls("leave(31500) done");

	/* granted at once, or refused without waiting: no join, expectation ended */
	dones = 0;
	start(&a, 5000);
	answer_try(LOCK_OK, granted);
	assert_int_equal(expecting, 0);
	dones = 0;
	start(&a, 0);
	assert_int_equal(expecting, 0);		/* no wait: nothing to expect */
	answer_try(LOCK_HELD, held);
	assert_int_equal(expecting, 0);
}

static void test_acquire__held_sleeps_until_a_wake_then_is_granted(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	check_calls("try(queue)");
	answer_try(LOCK_HELD, held);
	/* not live yet: asleep until the confirmation (or the holder's lease end) */
	check_calls("join(6000, fd 7) sleep(21000)");
	assert_int_equal(a.phase, ACQUIRE_SLEEPING);
	assert_int_equal(dones, 0);
	fake_now = 1500;
	wake(WAKE_RETRY);
	check_calls("try(queue)");
	assert_int_equal(a.phase, ACQUIRE_TRYING);
	/* held again, now without a lease end: sleeps without a retry time,
	 * and joins only once */
	answer_try(LOCK_HELD, (struct lock_state){ .ttl_ms = -1, .queued = true });
	check_calls("sleep(0)");
	assert_int_equal(a.holder_ttl_ms, -1);
	wake(WAKE_RETRY);
	check_calls("try(queue)");
	fake_now = 2000;
	answer_try(LOCK_OK, granted);
	check_calls("leave(32000) done");
	assert_int_equal(a.outcome, ACQUIRE_GRANTED);
	assert_false(acquire_end(&a, true));
	check_calls("told(1 deploy ci-2)");	/* nothing left to give back */
}

static void test_acquire__deadline_tries_last_and_gives_back_before_refusing(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, held);
	check_calls("try(queue) join(6000, fd 7) sleep(21000)");
	fake_now = 6000;
	wake(WAKE_DEADLINE);
	check_calls("try(queue)");	/* one last try */
	answer_try(LOCK_HELD, (struct lock_state){ .ttl_ms = 15000, .retry_ms = 14000,
						    .queued = true, .why = LOCK_WHY_QUEUE,
						    .others = 2 });
	/* leaves with the holder's retry time, gives its place back, and
	 * answers only once that is done */
	check_calls("leave(20000) dequeue(await)");
	assert_int_equal(a.phase, ACQUIRE_GIVING_BACK);
	assert_int_equal(dones, 0);
	answer_dequeue();
	check_calls("done");
	assert_int_equal(a.phase, ACQUIRE_DONE);
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_HELD);
	assert_int_equal(a.holder_ttl_ms, 15000);
	assert_int_equal(a.state.why, LOCK_WHY_QUEUE);
	assert_int_equal(a.state.others, 2);
	assert_false(a.queued);
	assert_false(acquire_end(&a, true));
	check_calls("");
}

static void test_acquire__held_without_wait_is_refused_at_once(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 0);
	answer_try(LOCK_HELD, (struct lock_state){ .ttl_ms = 9000, .retry_ms = 9000 });
	check_calls("try(once) done");	/* nobody joined, no place to give back */
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_HELD);
	assert_int_equal(a.holder_ttl_ms, 9000);
}

static void test_acquire__backend_down_refuses_a_new_request_at_once(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_BACKEND_DOWN, (struct lock_state){ .fault = "redis is loading" });
	check_calls("try(queue) done");
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_BACKEND_DOWN);
	assert_string_equal(a.state.fault, "redis is loading");
}

static void test_acquire__backend_down_keeps_a_waiting_request_retrying(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, held);
	check_calls("try(queue) join(6000, fd 7) sleep(21000)");
	fake_now = 2000;
	wake(WAKE_RETRY);
	answer_try(LOCK_BACKEND_DOWN, (struct lock_state){ 0 });
	/* retries every 250 ms while Redis is down */
	check_calls("try(queue) sleep(2250)");
	assert_int_equal(a.phase, ACQUIRE_SLEEPING);
	fake_now = 2250;
	wake(WAKE_RETRY);
	answer_try(LOCK_OK, granted);
	check_calls("try(queue) leave(32250) done");
	assert_int_equal(a.outcome, ACQUIRE_GRANTED);
}

static void test_acquire__backend_down_at_the_deadline_refuses(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, held);
	fake_now = 6000;
	wake(WAKE_DEADLINE);
	answer_try(LOCK_BACKEND_DOWN, (struct lock_state){ 0 });
	/* nothing known of the holder's lease: leaves with none */
	check_calls("try(queue) join(6000, fd 7) sleep(21000) try(queue) leave(0) "
		    "dequeue(await)");
	answer_dequeue();
	check_calls("done");
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_BACKEND_DOWN);
}

static void test_acquire__script_error_ends_the_wait(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, (struct lock_state){ .ttl_ms = 20000, .retry_ms = 20000 });
	wake(WAKE_RETRY);
	answer_try(LOCK_SCRIPT_ERROR, (struct lock_state){ .fault = "bad data" });
	/* not queued (plain lock answers): answered at once */
	check_calls("try(queue) join(6000, fd 7) sleep(21000) try(queue) leave(0) done");
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_SCRIPT_ERROR);
}

static void test_acquire__client_gone_while_asleep(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, held);
	check_calls("try(queue) join(6000, fd 7) sleep(21000)");
	wake(WAKE_GONE);
	/* the place is given back without waiting: nobody is there to answer */
	check_calls("leave(0) dequeue(unawaited) done");
	assert_int_equal(a.phase, ACQUIRE_DONE);
	assert_int_equal(a.outcome, ACQUIRE_GONE);
	assert_false(acquire_end(&a, false));
	check_calls("");
}

static void test_acquire__shutdown_while_asleep(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, held);
	check_calls("try(queue) join(6000, fd 7) sleep(21000)");
	wake(WAKE_SHUTDOWN);
	check_calls("leave(0) dequeue(unawaited) done");
	assert_int_equal(a.outcome, ACQUIRE_SHUTDOWN);
	assert_false(acquire_end(&a, true));
	check_calls("");
}

static void test_acquire__undelivered_grant_is_taken_back_at_the_end(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	fake_confirmed = true;
	answer_try(LOCK_HELD, held);
	answer_try(LOCK_OK, granted);
	check_calls("try(queue) join(6000, fd 7) try(queue) leave(31000) done");
	assert_true(acquire_end(&a, false));
	check_calls("undo");
	assert_false(a.grant_pending);
	assert_false(acquire_end(&a, false));	/* once only */
	check_calls("");
}

/* A repeat whose answer is lost added no hold: releasing one would free
 * the holding its first answer told the client about. */
static void test_acquire__undelivered_repeat_is_left_alone(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 0);
	answer_try(LOCK_OK, repeated);
	check_calls("try(once) done");
	assert_false(a.grant_pending);
	assert_false(acquire_end(&a, false));
	check_calls("");
}

/* reentrant asks the script to count a re-entry as a hold. */
static void test_acquire__reentrant_is_passed_on(void **state)
{
	struct acquire a;

	(void)state;
	memset(&a, 0, sizeof(a));
	a = (struct acquire){
		.ops = &fake_ops, .b = FAKE_BACKEND, .kind = LOCK_KIND_FAIR,
		.name = "deploy", .owner = "ci-2", .principal = "team-a", .reentrant = true,
		.ttl_ms = 30000, .done = on_done, .done_ctx = &dones,
	};
	acquire_start(&a);
	answer_try(LOCK_OK, granted);
	check_calls("try(once, reentrant) done");
	assert_true(acquire_end(&a, false));	/* the added hold goes */
	check_calls("undo");
}

static void test_acquire__request_closed_while_asleep_leaves_quietly(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, held);
	check_calls("try(queue) join(6000, fd 7) sleep(21000)");
	assert_false(acquire_end(&a, false));
	check_calls("leave(0) dequeue(unawaited)");	/* and no done */
	assert_int_equal(dones, 0);
}

static void test_acquire__never_started_is_left_alone(void **state)
{
	struct acquire a;

	(void)state;
	memset(&a, 0, sizeof(a));
	assert_false(acquire_end(&a, false));
	check_calls("");
}

static void test_acquire__behind_the_head_sleeps_with_its_place_kept(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, behind);
	/* no retry time: the loop keeps its place while it sleeps */
	check_calls("try(queue) join(6000, fd 7) keep sleep(0)");
	assert_int_equal(a.phase, ACQUIRE_SLEEPING);
	assert_ptr_equal(a.place, FAKE_PLACE);
	/* told on its channel that its turn came (or the refresh found its
	 * place gone): the place is dropped before it tries */
	wake(WAKE_RETRY);
	check_calls("drop try(queue)");
	assert_null(a.place);
	/* now the head: watches the holder's lease itself, nothing kept */
	answer_try(LOCK_HELD, held);
	check_calls("sleep(21000)");
	assert_null(a.place);
	wake(WAKE_RETRY);
	answer_try(LOCK_HELD, behind);	/* back behind a head (its place went stale) */
	check_calls("try(queue) keep sleep(0)");
	fake_now = 6000;
	wake(WAKE_DEADLINE);
	answer_try(LOCK_HELD, behind);
	/* the last try: refused, and nothing kept any more */
	check_calls("drop try(queue) leave(0) dequeue(await)");
	answer_dequeue();
	check_calls("done");
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_null(a.place);
}

static void test_acquire__behind_the_head_gone_or_ended_drops_its_place(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, behind);
	check_calls("try(queue) join(6000, fd 7) keep sleep(0)");
	wake(WAKE_GONE);
	check_calls("drop leave(0) dequeue(unawaited) done");
	assert_int_equal(a.outcome, ACQUIRE_GONE);

	setup(NULL);
	start(&a, 5000);
	answer_try(LOCK_HELD, behind);
	check_calls("try(queue) join(6000, fd 7) keep sleep(0)");
	/* the request ends under it while it sleeps */
	assert_false(acquire_end(&a, false));
	check_calls("drop leave(0) dequeue(unawaited)");
	assert_null(a.place);
	assert_int_equal(dones, 0);
}

static void test_acquire__backend_down_keeps_no_place(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, behind);
	wake(WAKE_RETRY);
	answer_try(LOCK_BACKEND_DOWN, (struct lock_state){ .refresh_place = true });
	/* retries every 250 ms by itself; nothing for the loop to keep */
	check_calls("try(queue) join(6000, fd 7) keep sleep(0) drop try(queue) sleep(1250)");
	assert_null(a.place);
}

/* acquire_cancel (a session-bound acquire whose session ended): asleep
 * with its place kept, it drops the place, leaves, gives the place back
 * and is refused with the caller's result; a try in flight ends so when
 * it answers held, but a grant stays a grant; once done, nothing. */
static void test_acquire__cancelled_gives_back_its_place_and_is_refused(void **state)
{
	struct acquire a;

	(void)state;
	start(&a, 5000);
	answer_try(LOCK_HELD, behind);
	check_calls("try(queue) join(6000, fd 7) keep sleep(0)");
	fake_now = 1400;
	acquire_cancel(&a, LOCK_NOT_HELD);
	check_calls("drop leave(0) dequeue(await)");
	assert_int_equal(a.phase, ACQUIRE_GIVING_BACK);
	assert_int_equal(dones, 0);	/* answered once the place is given back */
	acquire_cancel(&a, LOCK_NOT_HELD);	/* again: nothing more */
	check_calls("");
	answer_dequeue();
	check_calls("done");
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_NOT_HELD);
	assert_int_equal(a.slept_ms, 400);
	assert_false(a.queued);
	acquire_cancel(&a, LOCK_NOT_HELD);	/* done: nothing */
	check_calls("");
	assert_false(acquire_end(&a, true));
	check_calls("");

	/* cancelled while a try is in flight, which answers held */
	setup(NULL);
	start(&a, 5000);
	acquire_cancel(&a, LOCK_NOT_HELD);
	check_calls("try(queue)");
	answer_try(LOCK_HELD, held);
	check_calls("dequeue(await)");	/* never joined: no channel to leave */
	answer_dequeue();
	check_calls("done");
	assert_int_equal(a.outcome, ACQUIRE_REFUSED);
	assert_int_equal(a.result, LOCK_NOT_HELD);

	/* ... which answers a grant: the grant stands */
	setup(NULL);
	start(&a, 5000);
	acquire_cancel(&a, LOCK_NOT_HELD);
	answer_try(LOCK_OK, granted);
	check_calls("try(queue) done");
	assert_int_equal(a.outcome, ACQUIRE_GRANTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_acquire__granted_at_once, setup),
		cmocka_unit_test_setup(test_acquire__held_joins_a_live_channel_and_retries_at_once,
				       setup),
		cmocka_unit_test_setup(test_acquire__held_joins_a_covered_channel_and_sleeps_at_once,
				       setup),
		cmocka_unit_test_setup(test_acquire__held_sleeps_until_a_wake_then_is_granted,
				       setup),
		cmocka_unit_test_setup(
			test_acquire__deadline_tries_last_and_gives_back_before_refusing, setup),
		cmocka_unit_test_setup(test_acquire__held_without_wait_is_refused_at_once, setup),
		cmocka_unit_test_setup(test_acquire__backend_down_refuses_a_new_request_at_once,
				       setup),
		cmocka_unit_test_setup(test_acquire__backend_down_keeps_a_waiting_request_retrying,
				       setup),
		cmocka_unit_test_setup(test_acquire__backend_down_at_the_deadline_refuses, setup),
		cmocka_unit_test_setup(test_acquire__script_error_ends_the_wait, setup),
		cmocka_unit_test_setup(test_acquire__client_gone_while_asleep, setup),
		cmocka_unit_test_setup(test_acquire__shutdown_while_asleep, setup),
		cmocka_unit_test_setup(test_acquire__undelivered_repeat_is_left_alone, setup),
		cmocka_unit_test_setup(test_acquire__reentrant_is_passed_on, setup),
		cmocka_unit_test_setup(test_acquire__undelivered_grant_is_taken_back_at_the_end,
				       setup),
		cmocka_unit_test_setup(test_acquire__request_closed_while_asleep_leaves_quietly,
				       setup),
		cmocka_unit_test_setup(test_acquire__never_started_is_left_alone, setup),
		cmocka_unit_test_setup(test_acquire__behind_the_head_sleeps_with_its_place_kept,
				       setup),
		cmocka_unit_test_setup(test_acquire__behind_the_head_gone_or_ended_drops_its_place,
				       setup),
		cmocka_unit_test_setup(test_acquire__backend_down_keeps_no_place, setup),
		cmocka_unit_test_setup(test_acquire__cancelled_gives_back_its_place_and_is_refused,
				       setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
