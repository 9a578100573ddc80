/* acquire.c -- the acquire phase machine (acquire.h): try, and while the
 * lock is held and the wait not over, join the lock's channel, sleep,
 * wake, try again; leave with an outcome.
 *
 * One driver, step(), is re-entered by every event and switched on the
 * phase; each event is valid in one phase only:
 *
 *   IDLE        --start------------------------------------> TRYING
 *   TRYING      --tried: granted (leave the waiter, its own
 *                 lease end) -------------------------------> DONE granted
 *               --tried: held, or Redis down while already
 *                 waiting, and the deadline ahead:
 *                   not joined yet: join; channel live -----> TRYING
 *                   else sleep until lease end / +250 ms;
 *                   queued behind a fair lock's head: with
 *                   the place kept by the loop (keep) ------> SLEEPING
 *               --tried: anything else (refused; leave the
 *                 waiter with the holder's lease end):
 *                   holding a queue place: give it back ----> GIVING_BACK
 *                   else ---------------------------------> DONE refused
 *   SLEEPING    --woken (drop the kept place first):
 *                 retry, deadline (a last try) ------------> TRYING
 *               --woken: gone / shutdown (leave, give the
 *                 queue place back unawaited) -------------> DONE gone / shutdown
 *   GIVING_BACK --dequeued ---------------------------------> DONE refused
 *   SLEEPING    --cancelled (acquire_cancel: leave, give
 *                 the place back) -------------------------> GIVING_BACK / DONE refused
 *   TRYING      --cancelled: marked; tried and not granted
 *                 ends as cancelled, not sleeping ---------> GIVING_BACK / DONE refused
 *
 * Subscribe, then retry: a release published between the first try and
 * the subscription would be missed, so a waiter that joins tries once more
 * after the channel is live -- at once if it already is, else when the
 * confirmation wakes it. Not when the channel was live already before the
 * first try was sent and has heard nothing since (ops->covered): then any
 * release after that try is still to be heard, and the waiter sleeps at
 * once (each newcomer to a hot lock saves that script run). A new request
 * gets LOCK_BACKEND_DOWN answered at once; one already waiting keeps
 * retrying every BACKEND_RETRY_MS until its deadline (it is also woken
 * when the subscriber reconnects).
 *
 * Queue places. A waiter queued behind a fair lock's head has nothing to
 * retry for (it is told on its own channel when its turn comes) but its
 * place must be refreshed: while it sleeps, the loop's refresher keeps it
 * together with every other such place of the lock (keep_place), and
 * wakes it if it must look again. The place is kept exactly while the
 * machine sleeps: dropped at every wake and when the request ends.
 *
 * Leaving, a waiter tells the channel when the lease it last saw ends --
 * its own once granted, the holder's when refused, unknown otherwise -- so
 * the other sleepers are retried by then (a winner that dies holding the
 * lock publishes nothing). A refusal is answered only once the queue place
 * is given back, so that whoever hears "locked" finds nobody queued on its
 * behalf.
 *
 * done runs exactly once, from a callback (a try's outcome, a wake, a
 * dequeue), never from inside acquire_start(). */
#include "service/lock/acquire.h"

#include <assert.h>
#include <stddef.h>

/* While Redis is unreachable a waiter retries this often (it is also woken
 * when the subscriber reconnects). */
#define BACKEND_RETRY_MS 250

/* What re-enters step(). */
enum acquire_event {
	EV_START,	/* acquire_start() */
	EV_TRIED,	/* the acquire script's outcome is in a->result, a->state */
	EV_WOKEN,	/* the waiter was woken: ops->wake_reason() says why */
	EV_DEQUEUED,	/* the queue place is given back (or that failed: logged) */
};

static void step(struct acquire *a, enum acquire_event ev);

/* ----- Callbacks: each stores its news and re-enters step() ----- */

static void tried(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct acquire *a = ctx;

	a->result = r;
	a->state = *st;
	step(a, EV_TRIED);
}

static void woken(void *ctx)
{
	step(ctx, EV_WOKEN);
}

static void dequeued(void *ctx, enum lock_result r, const struct lock_state *st)
{
	(void)r;
	(void)st;
	step(ctx, EV_DEQUEUED);
}

/* ----- Moves ----- */

static void try_once(struct acquire *a)
{
	unsigned flags = (a->wait_ms > 0 ? LOCK_QUEUE : 0) | (a->reentrant ? LOCK_REENTRANT : 0);

	if (!a->waiter && !a->expecting && a->wait_ms > 0 && a->ops->expect_join) {
		a->mark = a->ops->expect_join(a->b);	/* a first try that may wait */
		a->expecting = true;
	}
	a->phase = ACQUIRE_TRYING;
	/* the wait left, and a second for the leaving to reach Redis */
	a->extras.place_ms = a->wait_ms > 0 ? a->deadline_ms - a->ops->now_ms() + 1000 : 0;
	a->ops->try_acquire(a->b, a->kind, a->name, a->owner, a->principal, a->ttl_ms, flags,
			    &a->extras, tried, a);
}

/* The loop no longer keeps a's queue place (a is awake, or leaving). */
static void drop_place(struct acquire *a)
{
	if (a->place) {
		a->ops->drop_place(a->place);
		a->place = NULL;
	}
}

/* Stop waiting, telling the channel when the lease a last saw ends
 * (monotonic, 0 = unknown). */
static void leave(struct acquire *a, int64_t lease_end_ms)
{
	drop_place(a);
	if (a->waiter) {
		a->ops->leave(a->waiter, lease_end_ms);
		a->waiter = NULL;
	}
}

/* Give back a's queue place, if it holds one; done (NULL: nobody waits
 * for it, a failure is only logged) hears when Redis has it. Returns true
 * when a place is being given back. */
static bool give_back(struct acquire *a, lock_done_fn done)
{
	if (!a->queued)
		return false;
	a->queued = false;
	a->ops->dequeue(a->b, a->kind, a->name, a->owner, done, done ? a : NULL);
	return true;
}

/* The first try's expectation of a join is over: joined, or never. */
static void expect_end(struct acquire *a)
{
	if (a->expecting) {
		a->expecting = false;
		a->ops->expect_done(a->b);
	}
}

static void finish_acquire(struct acquire *a, enum acquire_outcome outcome)
{
	expect_end(a);
	a->phase = ACQUIRE_DONE;
	a->outcome = outcome;
	a->done(a->done_ctx);
}

/* Leave (lease_end_ms as in leave()) and answer a refusal once the queue
 * place, if any, is given back. */
static void end_refused(struct acquire *a, int64_t lease_end_ms)
{
	leave(a, lease_end_ms);
	if (give_back(a, dequeued)) {
		a->phase = ACQUIRE_GIVING_BACK;
		return;
	}
	finish_acquire(a, ACQUIRE_REFUSED);
}

/* TRYING: the try's outcome is in. */
static void on_tried(struct acquire *a)
{
	const struct lock_state *st = &a->state;
	enum lock_result r = a->result;
	int64_t now = a->ops->now_ms();
	int64_t retry_at;
	bool confirmed;

	a->queued |= st->queued;
	if (r == LOCK_UNCONFIRMED)
		a->queued = false;	/* granted, then undone: out of any queue */
	if (r == LOCK_OK) {
		a->queued = false;	/* the grant took it out of any queue */
		a->grant_pending = st->added;
		a->grant_change = st->change;
		leave(a, st->ttl_ms > 0 ? now + st->ttl_ms : 0);
		finish_acquire(a, ACQUIRE_GRANTED);
		return;
	}
	if (r == LOCK_HELD)
		a->holder_ttl_ms = st->ttl_ms;
	if (a->cancel != LOCK_OK) {
		a->result = a->cancel;	/* the caller stopped the wait meanwhile */
		end_refused(a, r == LOCK_HELD && st->retry_ms > 0 ? now + st->retry_ms : 0);
		return;
	}
	if ((r == LOCK_HELD || (r == LOCK_BACKEND_DOWN && a->waiter)) && now < a->deadline_ms) {
		if (!a->waiter) {
			a->waiter = a->ops->join(a->b, a->kind, a->name, a->owner, a->fd, woken, a,
						 a->deadline_ms, &confirmed);
			if (confirmed && a->expecting && a->ops->covered &&
			    a->ops->covered(a->waiter, a->mark))
				confirmed = false;	/* nothing missed: sleep now */
			expect_end(a);
			if (confirmed) {
				try_once(a);
				return;
			}
		}
		retry_at = 0;
		if (r == LOCK_BACKEND_DOWN)
			retry_at = now + BACKEND_RETRY_MS;
		else if (st->retry_ms > 0)
			retry_at = now + st->retry_ms;
		a->phase = ACQUIRE_SLEEPING;
		a->sleep_since_ms = now;
		if (r == LOCK_HELD && st->refresh_place)
			a->place = a->ops->keep_place(a->b, a->name, a->owner, a->waiter);
		a->ops->sleep(a->waiter, retry_at);
		return;
	}
	end_refused(a, r == LOCK_HELD && st->retry_ms > 0 ? now + st->retry_ms : 0);
}

/* SLEEPING: woken. */
static void on_woken(struct acquire *a)
{
	enum waiter_wake why = a->ops->wake_reason(a->waiter);

	drop_place(a);
	switch (why) {
	case WAKE_GONE:
	case WAKE_SHUTDOWN:
		leave(a, 0);
		give_back(a, NULL);
		finish_acquire(a, why == WAKE_GONE ? ACQUIRE_GONE : ACQUIRE_SHUTDOWN);
		return;
	case WAKE_NONE:
	case WAKE_RETRY:
	case WAKE_DEADLINE:	/* the last try: past the deadline it answers */
		try_once(a);
		return;
	}
	assert(0 && "unknown wake reason");
}

/* The driver: every event comes here, and the phase decides. */
static void step(struct acquire *a, enum acquire_event ev)
{
	switch (a->phase) {
	case ACQUIRE_IDLE:
		assert(ev == EV_START);
		try_once(a);
		return;
	case ACQUIRE_TRYING:
		assert(ev == EV_TRIED);
		on_tried(a);
		return;
	case ACQUIRE_SLEEPING:
		assert(ev == EV_WOKEN);
		a->slept_ms += a->ops->now_ms() - a->sleep_since_ms;
		on_woken(a);
		return;
	case ACQUIRE_GIVING_BACK:
		assert(ev == EV_DEQUEUED);
		finish_acquire(a, ACQUIRE_REFUSED);
		return;
	case ACQUIRE_DONE:
		break;
	}
	assert(0 && "an acquire event after the outcome");
}

/* ----- API ----- */

void acquire_start(struct acquire *a)
{
	assert(a->phase == ACQUIRE_IDLE && a->ops && a->done);
	a->outcome = ACQUIRE_NO_OUTCOME;
	a->deadline_ms = a->ops->now_ms() + a->wait_ms;
	step(a, EV_START);
}

void acquire_cancel(struct acquire *a, enum lock_result r)
{
	if (a->phase == ACQUIRE_IDLE || a->phase == ACQUIRE_DONE || a->cancel != LOCK_OK)
		return;
	a->cancel = r;
	if (a->phase != ACQUIRE_SLEEPING)
		return;		/* TRYING: on_tried ends it; GIVING_BACK: ending */
	a->slept_ms += a->ops->now_ms() - a->sleep_since_ms;
	a->result = r;
	end_refused(a, 0);
}

void acquire_set_lease(struct acquire *a, int64_t ttl_ms, int64_t ends_ms)
{
	a->ttl_ms = ttl_ms;
	a->extras.ends_ms = ends_ms;
}

bool acquire_end(struct acquire *a, bool delivered)
{
	bool undone = false;

	if (a->phase == ACQUIRE_IDLE)
		return false;
	expect_end(a);
	leave(a, 0);
	give_back(a, NULL);
	if (a->outcome == ACQUIRE_GRANTED && delivered)
		a->ops->told(a->b, a->kind, a->name, a->owner);
	if (a->grant_pending && !delivered) {
		a->ops->undo(a->b, a->kind, a->name, a->owner, a->grant_change, NULL, NULL);
		undone = true;
	}
	a->grant_pending = false;
	a->phase = ACQUIRE_DONE;
	return undone;
}
