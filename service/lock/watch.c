/* watch.c -- the watch phase machine (watch.h): read the lock and, while
 * its index is the caller's and the wait is not over, sleep on its watch
 * channels and look again when woken.
 *
 *   IDLE      --start: with an index and wait_ms, join the
 *               channels (WAITER_WATCH); read -----------------> READING
 *   READING   --read: failed -----------------------------------> DONE failed
 *             --read: a wake meant stop (gone, shutdown) ------> DONE gone / shutdown
 *             --read: changed, not waiting, or the wait over --> DONE read
 *             --read: unchanged, and woken while reading ------> READING
 *             --read: unchanged: sleep, the first watcher's
 *               timer at the earliest lease end read -----------> SLEEPING
 *             --woken: note it (again, or stop) ----------------> READING
 *   SLEEPING  --woken: retry, deadline -------------------------> READING
 *             --woken: gone / shutdown --------------------------> DONE gone / shutdown
 *
 * A watch of two channels (dlockd's state channel and the kind's Redisson
 * one; a fair lock's without an owner) has a watcher on each; only the
 * first carries the deadline and watches the client's socket. A wake of
 * either is a wake of the watch; a wake that comes while it reads (the
 * other watcher still slept) makes it read once more, and a message that
 * comes while a watcher is awake wakes it as soon as it sleeps again
 * (waiters.c), so no change after a read goes unseen.
 *
 * Subscribe, then read: the channels are joined before the first read. If
 * one was not live yet, that read may miss a change made before the
 * subscription; its confirmation wakes the watcher (at once, if it came
 * during the read), which reads again. A stale index is answered by the
 * first read, subscribed or not.
 *
 * done runs exactly once, from a callback (a read's outcome, a wake),
 * never from inside watch_start().
 *
 * Reads are shared: the watches of one loop that want a read of the same
 * lock in the same turn of the loop get one (struct shared_read), sent
 * as the turn ends. A watch joins only a read not sent yet, so the read
 * it gets was sent after whatever woke it, as its own would have been.
 * A message or a lease end seen by many watches of a lock (one client
 * can open thousands) costs a read per loop, not one per watch. Its
 * watches share the one view it decoded (lock_view_ref), so that their
 * answers can share one rendering of it (the view's memo). */
#include "service/lock/watch.h"

#include "service/lock/backend.h"
#include "service/base/loop.h"
#include "service/base/names.h"
#include "service/base/util.h"
#include "service/lock/waiters.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A lease-end look comes this long after the end Redis reported (both
 * count whole milliseconds: at the end itself the lease may not be quite
 * over). */
#define EXPIRY_MARGIN_MS 2

static atomic_uint nwatches;

static void read_state(struct watch *w);

/* ----- Leaving ----- */

static void leave_channels(struct watch *w)
{
	if (w->nw)
		atomic_fetch_sub(&nwatches, 1);
	while (w->nw > 0) {
		waiters_leave(w->w[--w->nw], 0);
		w->w[w->nw] = NULL;
	}
}

static void finish_watch(struct watch *w, enum watch_outcome outcome)
{
	leave_channels(w);
	w->phase = WATCH_DONE;
	w->outcome = outcome;
	w->done(w->done_ctx);
}

/* ----- Callbacks ----- */

/* Why the watch was woken: the strongest reason any of its watchers has
 * (each is reset); WAKE_NONE for a resume whose wake was taken already. */
static enum waiter_wake wake_reason(struct watch *w)
{
	enum waiter_wake why = WAKE_NONE;

	for (int i = 0; i < w->nw; i++) {
		enum waiter_wake r = waiters_wake_reason(w->w[i]);

		if (r > why)	/* NONE < RETRY < DEADLINE < GONE < SHUTDOWN */
			why = r;
	}
	return why;
}

static void on_wake(void *ctx)
{
	struct watch *w = ctx;
	enum waiter_wake why = wake_reason(w);

	if (why == WAKE_NONE)
		return;
	if (w->phase == WATCH_READING) {
		/* its other watcher was asleep: the read in flight may
		 * predate what woke it */
		if (why == WAKE_GONE || why == WAKE_SHUTDOWN)
			w->stop = why == WAKE_GONE ? WATCH_GONE : WATCH_SHUTDOWN;
		else
			w->again = true;
		return;
	}
	assert(w->phase == WATCH_SLEEPING);
	w->slept_ms += now_ms() - w->sleep_since_ms;
	switch (why) {
	case WAKE_GONE:
		finish_watch(w, WATCH_GONE);
		return;
	case WAKE_SHUTDOWN:
		finish_watch(w, WATCH_SHUTDOWN);
		return;
	default:
		read_state(w);	/* a message, a lease end, the deadline: look */
		return;
	}
}

static void sleep_until_woken(struct watch *w, const struct lock_view *v, int64_t now)
{
	int64_t retry_at = v->changes_in_ms >= 0 ? now + v->changes_in_ms + EXPIRY_MARGIN_MS : 0;

	w->phase = WATCH_SLEEPING;
	w->sleep_since_ms = now;
	waiters_sleep(w->w[0], retry_at);
	for (int i = 1; i < w->nw; i++)
		waiters_sleep(w->w[i], 0);
}

static void on_read(void *ctx, enum lock_result r, const struct lock_state *st,
		    struct lock_view *v)
{
	struct watch *w = ctx;
	int64_t now = now_ms();

	assert(w->phase == WATCH_READING);
	w->result = r;
	w->state = *st;
	lock_view_free(w->view);
	w->view = v;
	if (w->stop != WATCH_NO_OUTCOME) {
		finish_watch(w, w->stop);
		return;
	}
	if (r != LOCK_OK) {
		finish_watch(w, WATCH_FAILED);
		return;
	}
	w->changed = w->index >= 0 && v->index != w->index;
	if (w->changed || w->nw == 0 || now >= w->deadline_ms) {
		finish_watch(w, WATCH_READ);
		return;
	}
	if (w->again) {
		read_state(w);
		return;
	}
	sleep_until_woken(w, v, now);
}

/* ----- Reads shared by the watches of a loop ----- */

/* One read of a lock for the watches of one loop that want one in the
 * same turn: made by the first, joined by the others until it is sent,
 * as the turn ends; then each hears its outcome. Every watch in it is
 * READING until then, so each outlives it. */
struct shared_read {
	struct name_entry entry;	/* in unsent, by key, until sent */
	struct loop_task send;
	const struct backend *b;
	enum lock_kind kind;
	const char *name;		/* after key */
	const char *owner;		/* the owner they ask about, after name; or NULL */
	struct watch **w;		/* its watches, in the order they joined */
	size_t n, cap;
	char key[];			/* "<kind>:<name>" (then "\n<owner>" if
					 * any), name, owner */
};

/* The reads this thread's loop has not sent yet, by key; NULL when none. */
static __thread struct name_table *unsent;

static void on_shared_read(void *ctx, enum lock_result r, const struct lock_state *st,
			   struct lock_view *v)
{
	struct shared_read *sr = ctx;

	/* each watch frees the view it is given: a reference to the one
	 * view, so that its answer may be made once for all (lock_view.h) */
	for (size_t i = 0; i < sr->n; i++)
		on_read(sr->w[i], r, st, i + 1 < sr->n ? lock_view_ref(v) : v);
	free(sr->w);
	free(sr);
}

static void send_shared_read(struct loop *l, void *data)
{
	struct shared_read *sr = data;

	(void)l;
	names_remove(unsent, &sr->entry);
	if (unsent->n == 0) {
		names_release(unsent);
		free(unsent);
		unsent = NULL;
	}
	locks_inspect(sr->b, sr->kind, sr->name, sr->owner, on_shared_read, sr);
}

/* w's read key, "<kind>:<name>" (then "\n<owner>" if any): in buf when it
 * fits (thousands of watches of a change look theirs up in one turn),
 * else malloc'd. */
static char *read_key(const struct watch *w, char *buf, size_t size)
{
	const char *sep = w->owner ? "\n" : "", *owner = w->owner ? w->owner : "";
	int n = snprintf(buf, size, "%d:%s%s%s", (int)w->kind, w->name, sep, owner);

	if (n >= 0 && (size_t)n < size)
		return buf;
	return xasprintf("%d:%s%s%s", (int)w->kind, w->name, sep, owner);
}

/* w wants a read: join the one this turn sends for its lock, or make it. */
static void join_shared_read(struct watch *w)
{
	char buf[320], *key = read_key(w, buf, sizeof(buf));
	struct name_entry *e;
	struct shared_read *sr;

	if (!unsent) {
		unsent = xmalloc(sizeof(*unsent));
		names_init(unsent);
	}
	e = names_find(unsent, key);
	if (e) {
		sr = container_of(e, struct shared_read, entry);
	} else {
		size_t len = strlen(key) + 1, nlen = strlen(w->name) + 1;
		size_t olen = w->owner ? strlen(w->owner) + 1 : 0;
		char *copy;

		/* key, then copies of name and owner: a watch may end before
		 * the read is sent */
		sr = xcalloc(1, sizeof(*sr) + len + nlen + olen);
		memcpy(sr->key, key, len);
		copy = sr->key + len;
		sr->name = memcpy(copy, w->name, nlen);
		if (w->owner)
			sr->owner = memcpy(copy + nlen, w->owner, olen);
		sr->entry.name = sr->key;
		sr->b = w->b;
		sr->kind = w->kind;
		names_add(unsent, &sr->entry);
		loop_task_init(&sr->send, send_shared_read, sr);
		loop_defer(w->b->loop, &sr->send);
	}
	if (key != buf)
		free(key);
	if (sr->n == sr->cap) {
		sr->cap = sr->cap ? 2 * sr->cap : 4;
		sr->w = xrealloc(sr->w, sr->cap * sizeof(*sr->w));
	}
	sr->w[sr->n++] = w;
}

/* ----- Moves ----- */

static void read_state(struct watch *w)
{
	w->phase = WATCH_READING;
	w->again = false;
	join_shared_read(w);
}

/* Join the lock's watch channels, the first with w's deadline and the
 * client's socket. */
static void join_channels(struct watch *w)
{
	char *channels[2];
	int n = locks_watch_channels(w->kind, w->name, channels);
	bool live;

	for (int i = 0; i < n; i++) {
		w->w[i] = waiters_join(w->b->waiters, channels[i], i == 0 ? w->fd : -1, on_wake, w,
				       i == 0 ? w->deadline_ms : 0, WAITER_WATCH, &live);
		free(channels[i]);
	}
	w->nw = n;
	atomic_fetch_add(&nwatches, 1);
}

/* ----- API ----- */

void watch_start(struct watch *w)
{
	assert(w->phase == WATCH_IDLE && w->done);
	w->outcome = WATCH_NO_OUTCOME;
	w->deadline_ms = now_ms() + w->wait_ms;
	if (w->index >= 0 && w->wait_ms > 0)
		join_channels(w);
	read_state(w);
}

void watch_end(struct watch *w)
{
	if (w->phase == WATCH_IDLE)
		return;
	leave_channels(w);
	lock_view_free(w->view);
	w->view = NULL;
	w->phase = WATCH_DONE;
}

unsigned watch_count_all(void)
{
	return atomic_load(&nwatches);
}
