/* fair_queue.c -- one event loop's fair-lock queue places, kept alive in
 * one script per lock per refresh period (fair_queue.h).
 *
 * A fair-lock waiter queued behind the head has nothing to retry for: it
 * is told on its own channel when its turn comes. It only has to keep its
 * place, whose deadline in Redis lapses queue_ttl after it was last set (a
 * waiter whose dlockd died must stop blocking the queue). Before, each such
 * waiter re-ran fair_acquire every third of queue_ttl: with N waiters, N
 * scripts per period. Here every lock with sleeping places on this loop
 * has one timer, every third of queue_ttl from the first place kept, that
 * sends ONE locks_fair_refresh with all of them (lua/fair_refresh.lua, one
 * script per few hundred places, so that none takes long): it
 * drops dead heads (telling the new head, as the waiters' fair_acquire
 * did), pushes each place's deadline out, and names the owners that must
 * look again, whom this wakes with waiters_retry():
 *   - a place that is gone (it lapsed -- Redis stalled, a Redisson acquire
 *     moved deadlines -- or the data was lost): fair_acquire queues it again;
 *   - the head, when nobody told it (a Redisson waiter ahead of it took the
 *     lock or gave up, which publish nothing): it must watch the lease.
 * A refresh that fails (Redis down, a script error, the name taken by
 * another kind) wakes every place it carried: each tries for itself, as
 * it would have before.
 *
 * A place joins its lock's list when its waiter sleeps and leaves it when
 * the waiter wakes or leaves (the acquire machine calls keep/drop), so
 * every place kept was refreshed by its own fair_acquire less than a period
 * before the next refresh. One refresh per lock is in flight at a time (a
 * period that finds one still out skips: that one answers or fails within
 * seconds). A place dropped while its refresh is out is kept, without its
 * waiter, until the answer comes, whose owner names are matched against
 * the places in the order sent. */
#include "service/lock/fair_queue.h"

#include "service/lock/backend.h"
#include "service/lock/locks.h"
#include "service/base/list.h"
#include "service/base/loop.h"
#include "service/base/names.h"
#include "service/base/util.h"
#include "service/lock/waiters.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct fair_place {
	struct fair_lock *lk;
	struct list_node link;		/* in lk's places while kept */
	struct waiter *w;		/* NULL once dropped (kept for the answer) */
	bool sent;			/* in the refresh in flight */
	char owner[];
};

/* The places of one lock on this loop. */
struct fair_lock {
	char *name;
	struct name_entry entry;	/* in fq->locks, by name */
	struct fair_queue *fq;
	struct list_node places;	/* struct fair_place, kept, oldest first */
	size_t nplaces;
	struct loop_timer timer;	/* the next refresh */
	struct fair_place **sent;	/* the refresh in flight: its places, in
					 * the order sent; NULL when none */
	size_t nsent;
};

struct fair_queue {
	const struct backend *b;
	struct name_table locks;	/* struct fair_lock, by name */
};

/* ----- The table of locks ----- */

static void refresh_due(struct loop *l, struct loop_timer *t);

static struct fair_lock *lock_get(struct fair_queue *fq, const char *name)
{
	struct name_entry *e = names_find(&fq->locks, name);
	struct fair_lock *lk;

	if (e)
		return container_of(e, struct fair_lock, entry);
	lk = xcalloc(1, sizeof(*lk));
	lk->name = xstrdup(name);
	lk->entry.name = lk->name;
	lk->fq = fq;
	list_init(&lk->places);
	loop_timer_init(&lk->timer, refresh_due);
	names_add(&fq->locks, &lk->entry);
	return lk;
}

/* Forget lk once nothing is kept and no refresh is out. */
static void lock_maybe_free(struct fair_lock *lk)
{
	struct fair_queue *fq = lk->fq;

	if (lk->nplaces || lk->sent)
		return;
	names_remove(&fq->locks, &lk->entry);
	loop_timer_stop(fq->b->loop, &lk->timer);
	free(lk->name);
	free(lk);
}

/* ----- Refreshing ----- */

/* The refresh of lk is answered: wake the places named in retry (all of
 * them when it failed), then let go of it. */
static void on_refreshed(void *ctx, enum lock_result r, const char *const *retry, size_t n)
{
	struct fair_lock *lk = ctx;
	size_t j = 0;

	for (size_t i = 0; i < lk->nsent; i++) {
		struct fair_place *p = lk->sent[i];
		bool wake = r != LOCK_OK;

		/* retry lists owners in the order sent */
		if (!wake && j < n && !strcmp(retry[j], p->owner)) {
			wake = true;
			j++;
		}
		if (wake && p->w)
			waiters_retry(p->w);
		p->sent = false;
		if (!p->w)
			free(p);	/* dropped while the refresh was out */
	}
	free(lk->sent);
	lk->sent = NULL;
	lk->nsent = 0;
	lock_maybe_free(lk);
}

static void refresh_due(struct loop *l, struct loop_timer *t)
{
	struct fair_lock *lk = container_of(t, struct fair_lock, timer);
	const char **owners;
	size_t n = 0;

	loop_timer_set(l, &lk->timer, now_ms() + locks_queue_refresh_ms());
	if (lk->sent)
		return;		/* the last one is still out */
	lk->sent = xmalloc(lk->nplaces * sizeof(*lk->sent));
	owners = xmalloc(lk->nplaces * sizeof(*owners));
	for (struct list_node *at = list_first(&lk->places); at; at = list_next(&lk->places, at)) {
		struct fair_place *p = list_entry(at, struct fair_place, link);

		p->sent = true;
		lk->sent[n] = p;
		owners[n++] = p->owner;
	}
	lk->nsent = n;
	locks_fair_refresh(lk->fq->b, lk->name, owners, n, on_refreshed, lk);
	free(owners);
}

/* ----- API ----- */

struct fair_place *fair_queue_keep(struct fair_queue *fq, const char *name, const char *owner,
				   struct waiter *w)
{
	struct fair_lock *lk;
	size_t len = strlen(owner) + 1;
	struct fair_place *p;

	LOOP_ASSERT_THREAD(fq->b->loop);
	lk = lock_get(fq, name);
	p = xcalloc(1, sizeof(*p) + len);
	memcpy(p->owner, owner, len);
	p->lk = lk;
	p->w = w;
	list_append(&lk->places, &p->link);
	lk->nplaces++;
	if (!loop_timer_armed(&lk->timer))
		loop_timer_set(fq->b->loop, &lk->timer, now_ms() + locks_queue_refresh_ms());
	return p;
}

void fair_queue_drop(struct fair_place *p)
{
	struct fair_lock *lk;

	if (!p)
		return;
	lk = p->lk;
	LOOP_ASSERT_THREAD(lk->fq->b->loop);
	list_remove(&p->link);
	lk->nplaces--;
	p->w = NULL;
	if (!p->sent)
		free(p);	/* else on_refreshed frees it */
	if (!lk->nplaces)
		loop_timer_stop(lk->fq->b->loop, &lk->timer);
	lock_maybe_free(lk);
}

struct fair_queue *fair_queue_new(const struct backend *b)
{
	struct fair_queue *fq = xcalloc(1, sizeof(*fq));

	fq->b = b;
	names_init(&fq->locks);
	return fq;
}

void fair_queue_free(struct fair_queue *fq)
{
	if (!fq)
		return;
	/* every waiter has left and every refresh was answered: no lock is
	 * left; whatever is (a waiter that never left) is let go */
	names_each_safe(&fq->locks, e, next) {
		struct fair_lock *lk = container_of(e, struct fair_lock, entry);

		for (size_t k = 0; k < lk->nsent; k++)
			if (!lk->sent[k]->w)
				free(lk->sent[k]);	/* dropped: in no list */
		struct list_node *n;

		while ((n = list_pop(&lk->places)))
			free(list_entry(n, struct fair_place, link));
		loop_timer_stop(fq->b->loop, &lk->timer);
		free(lk->sent);
		free(lk->name);
		free(lk);
	}
	names_release(&fq->locks);
	free(fq);
}
