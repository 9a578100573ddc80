/* leavers.h -- the queue places one event loop's waiters give back (fair
 * locks, waiting writers), sent together: per lock, one dequeue script per
 * loop turn for all its leavers, so that a crowd hanging up at once keeps
 * the loop's Redis connection busy for a few scripts, not thousands.
 *
 * One struct leavers per event loop, owned by the loop's backend; every
 * call is made on that loop's thread. */
#ifndef DLOCKD_LEAVERS_H
#define DLOCKD_LEAVERS_H

#include "service/lock/locks.h"

struct backend;
struct leavers;

/* The leavers of b's loop, sent on b's Redis connection (b must outlive
 * it). */
struct leavers *leavers_new(const struct backend *b);
/* Send what is still to be sent, then free ls: call it before the loop's
 * Redis connection is freed (which answers what it still carries). */
void leavers_free(struct leavers *ls);

/* locks_dequeue(), sent before the loop sleeps next with the other
 * leavers of (kind, name); done (NULL: a failure is only logged) hears the
 * outcome of their script. */
void leavers_add(struct leavers *ls, enum lock_kind kind, const char *name, const char *owner,
		 lock_done_fn done, void *ctx);

#endif
