/* leavers.c -- one event loop's queue places given back, one script per
 * lock per loop turn (leavers.h).
 *
 * A waiter that leaves a fair lock's queue or stops waiting to write
 * (deadline, hang-up) gives its place back with a dequeue script. One
 * script each made a crowd hanging up at once -- one client closing
 * thousands of waiting connections -- cost thousands of scripts, each
 * walking the queue, queued on the loop's one Redis connection ahead of
 * every other client's calls there: those waited about a second. Here a
 * leaver joins its lock's list and a task the loop runs before it sleeps
 * sends each list in scripts of up to LEAVE_MAX owners (FAIR_LEAVE_MAX
 * for a fair lock, whose script walks the queue once per leaver)
 * (locks_dequeue_many), whose answer goes to every leaver of it. So a
 * turn's leavers cost one script per lock per few hundred of them.
 *
 * A place is given back at the end of the turn its waiter left in, before
 * whatever comes in later turns (a retry of the same owner, a new request
 * on the same connection); a leaver's refusal is answered only once its
 * place is back, as before. */
#include "service/lock/leavers.h"

#include "service/base/list.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/names.h"
#include "service/base/util.h"
#include "service/lock/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Owners one dequeue script is given, at most: this bounds its argument
 * and, for a fair lock, its time. fair_dequeue.lua walks the queue (LREM)
 * once per leaver: ~0.3 ms a walk of 10,000 queued on a loaded machine,
 * so a few a script keep each script short, whatever a crowd hanging up
 * costs in all (its scripts take turns with other clients' calls). */
#define LEAVE_MAX 256
#define FAIR_LEAVE_MAX 4

static size_t leave_max(enum lock_kind kind)
{
	return kind == LOCK_KIND_FAIR ? FAIR_LEAVE_MAX : LEAVE_MAX;
}

struct leaver {
	struct list_node link;		/* in its lock's leavers, or a batch's */
	lock_done_fn done;
	void *ctx;
	char owner[];
};

/* The leavers of one lock since the last send. */
struct leave_lock {
	struct name_entry entry;	/* in ls->locks, by key */
	struct list_node link;		/* in ls->pending, in the order first left */
	enum lock_kind kind;
	struct list_node leavers;	/* struct leaver, in the order left */
	char *name;			/* points into key */
	char key[];			/* "<kind>:<name>": a name is of one kind,
					 * but a wrong guess must not mix scripts */
};

struct leavers {
	const struct backend *b;
	struct name_table locks;	/* struct leave_lock, by key */
	struct list_node pending;	/* the same, in the order first left */
	struct loop_task flush;
};

/* One script's leavers, waiting for its answer. */
struct leave_batch {
	enum lock_kind kind;
	struct list_node leavers;
	size_t n;
	char name[];
};

static void on_left(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct leave_batch *bt = ctx;
	struct list_node *n;

	if (r != LOCK_OK && r != LOCK_NOT_HELD)
		log_warn("giving back %zu queue place%s of %s '%s' failed (%d); they end by "
			 "themselves", bt->n, bt->n == 1 ? "" : "s", locks_kind_label(bt->kind),
			 bt->name, (int)r);
	while ((n = list_pop(&bt->leavers))) {
		struct leaver *lv = list_entry(n, struct leaver, link);

		if (lv->done)
			lv->done(lv->ctx, r, st);
		free(lv);
	}
	free(bt);
}

/* Send lk's leavers, leave_max() a script, and free lk (out of the table). */
static void lock_send(struct leavers *ls, struct leave_lock *lk)
{
	const char *owners[LEAVE_MAX];
	size_t max = leave_max(lk->kind);

	while (!list_empty(&lk->leavers)) {
		size_t len = strlen(lk->name) + 1, k = 0;
		struct leave_batch *bt = xcalloc(1, sizeof(*bt) + len);
		struct list_node *n;

		bt->kind = lk->kind;
		memcpy(bt->name, lk->name, len);
		list_init(&bt->leavers);
		while (k < max && (n = list_pop(&lk->leavers))) {
			struct leaver *lv = list_entry(n, struct leaver, link);

			list_append(&bt->leavers, &lv->link);
			owners[k++] = lv->owner;
		}
		bt->n = k;
		/* owners point into the leavers, which live until on_left */
		locks_dequeue_many(ls->b, lk->kind, lk->name, owners, k, on_left, bt);
	}
	free(lk);
}

/* Send every lock's leavers. The table is emptied first: a leaver added
 * meanwhile (an answer's done, if Redis answered at once) starts a new
 * list, sent in the next pass. */
static void flush_all(struct leavers *ls)
{
	struct list_node batch, *n;

	list_init(&batch);
	while ((n = list_pop(&ls->pending))) {
		struct leave_lock *lk = list_entry(n, struct leave_lock, link);

		names_remove(&ls->locks, &lk->entry);
		list_append(&batch, &lk->link);
	}
	while ((n = list_pop(&batch)))
		lock_send(ls, list_entry(n, struct leave_lock, link));
}

static void on_flush(struct loop *l, void *data)
{
	(void)l;
	flush_all(data);
}

void leavers_add(struct leavers *ls, enum lock_kind kind, const char *name, const char *owner,
		 lock_done_fn done, void *ctx)
{
	size_t klen = strlen(name) + 3, olen = strlen(owner) + 1;
	char *key = xmalloc(klen);
	struct name_entry *e;
	struct leave_lock *lk;
	struct leaver *lv;

	LOOP_ASSERT_THREAD(ls->b->loop);
	snprintf(key, klen, "%d:%s", (int)kind, name);
	e = names_find(&ls->locks, key);
	if (e) {
		lk = container_of(e, struct leave_lock, entry);
	} else {
		lk = xcalloc(1, sizeof(*lk) + klen);
		memcpy(lk->key, key, klen);
		lk->name = strchr(lk->key, ':') + 1;
		lk->kind = kind;
		lk->entry.name = lk->key;
		list_init(&lk->leavers);
		names_add(&ls->locks, &lk->entry);
		list_append(&ls->pending, &lk->link);
	}
	free(key);
	lv = xcalloc(1, sizeof(*lv) + olen);
	memcpy(lv->owner, owner, olen);
	lv->done = done;
	lv->ctx = ctx;
	list_append(&lk->leavers, &lv->link);
	loop_defer(ls->b->loop, &ls->flush);
}

struct leavers *leavers_new(const struct backend *b)
{
	struct leavers *ls = xcalloc(1, sizeof(*ls));

	ls->b = b;
	names_init(&ls->locks);
	list_init(&ls->pending);
	loop_task_init(&ls->flush, on_flush, ls);
	return ls;
}

void leavers_free(struct leavers *ls)
{
	if (!ls)
		return;
	loop_cancel(ls->b->loop, &ls->flush);
	flush_all(ls);		/* the connection answers them as it frees */
	names_release(&ls->locks);
	free(ls);
}
