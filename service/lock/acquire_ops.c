/* acquire_ops.c -- the acquire machine's real collaborators (acquire.h):
 * the lock domain's scripts, the loop's waiters and its fair-queue
 * refresher, on the event loop whose backend the request runs on. The
 * only place the acquire path calls locks_acquire/dequeue/undo,
 * waiters_* and fair_queue_*; the machine itself
 * (acquire.c) goes through this table so that its unit test can inject
 * outcomes. */
#include "service/lock/acquire.h"

#include "service/lock/backend.h"
#include "service/lock/fair_queue.h"
#include "service/lock/leavers.h"
#include "service/lock/locks.h"
#include "service/base/util.h"
#include "service/lock/waiters.h"

#include <stdlib.h>

_Static_assert((unsigned)LOCK_WAIT_WRITER == (unsigned)WAITER_WRITER &&
	       (unsigned)LOCK_WAIT_TIMER_ALL == (unsigned)WAITER_TIMER_ALL &&
	       (unsigned)LOCK_WAIT_COUNTED == (unsigned)WAITER_COUNTED,
	       "lock wait flags are waiter flags");

/* Join the channel that announces (kind, name)'s release, on b's loop. */
static struct waiter *join(const struct backend *b, enum lock_kind kind, const char *name,
			   const char *owner, int fd, waiter_resume_fn resume, void *ctx,
			   int64_t deadline_ms, bool *confirmed)
{
	char *channel = locks_wait_channel(kind, name, owner);
	struct waiter *w = waiters_join(b->waiters, channel, fd, resume, ctx, deadline_ms,
					locks_wait_flags(kind), confirmed);

	waiters_set_owner(w, owner);
	free(channel);
	return w;
}

static uint64_t expect_join(const struct backend *b)
{
	return waiters_expect_join(b->waiters);
}

static void expect_done(const struct backend *b)
{
	waiters_expect_done(b->waiters);
}

/* owner holds (kind, name) and knows it: wake its other waiters there. */
static void told(const struct backend *b, enum lock_kind kind, const char *name,
		 const char *owner)
{
	char *channel;

	if (!waiters_owners_waiting())
		return;		/* the common case: no channel name to build */
	channel = locks_wait_channel(kind, name, owner);
	waiters_owner_told(b->waiters, channel, owner);
	free(channel);
}

/* Have b's loop keep owner's place in fair lock name's queue. */
static struct fair_place *keep_place(const struct backend *b, const char *name,
				     const char *owner, struct waiter *w)
{
	return fair_queue_keep(b->fair, name, owner, w);
}

/* Give owner's queue place back with the other leavers of b's loop. */
static void dequeue(const struct backend *b, enum lock_kind kind, const char *name,
		    const char *owner, lock_done_fn done, void *ctx)
{
	leavers_add(b->leavers, kind, name, owner, done, ctx);
}

const struct acquire_ops acquire_ops_real = {
	.try_acquire = locks_acquire,
	.dequeue = dequeue,
	.undo = locks_undo,
	.join = join,
	.expect_join = expect_join,
	.expect_done = expect_done,
	.covered = waiters_join_covered,
	.sleep = waiters_sleep,
	.wake_reason = waiters_wake_reason,
	.leave = waiters_leave,
	.keep_place = keep_place,
	.drop_place = fair_queue_drop,
	.now_ms = now_ms,
	.told = told,
};
