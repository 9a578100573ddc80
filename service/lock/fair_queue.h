/* fair_queue.h -- keeps the queue places of one event loop's sleeping
 * fair-lock waiters alive: per lock, one locks_fair_refresh() every
 * locks_queue_refresh_ms() for all of them, instead of one fair_acquire
 * per waiter. Waiters it hears must look again (their place is gone, the
 * refresh failed, or they became head unannounced) are woken with
 * waiters_retry().
 *
 * One struct fair_queue per event loop, owned by the loop's backend; every
 * call is made on that loop's thread. */
#ifndef DLOCKD_FAIR_QUEUE_H
#define DLOCKD_FAIR_QUEUE_H

struct backend;
struct fair_queue;
struct fair_place;
struct waiter;

/* The refresher of b's loop, sending on b's Redis connection (b must
 * outlive it). */
struct fair_queue *fair_queue_new(const struct backend *b);
/* Free fq once its loop has stopped and its Redis connection is freed
 * (every refresh in flight has had its answer). */
void fair_queue_free(struct fair_queue *fq);

/* Keep owner's place in fair lock name's queue while waiter w sleeps
 * (name and owner are copied); w is woken with waiters_retry() when it must
 * look again. Drop it with fair_queue_drop() before w wakes up to try or
 * leaves. */
struct fair_place *fair_queue_keep(struct fair_queue *fq, const char *name, const char *owner,
				   struct waiter *w);
/* Stop keeping p (it is freed; NULL is ignored). */
void fair_queue_drop(struct fair_place *p);

#endif
