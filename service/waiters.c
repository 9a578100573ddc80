/* waiters.c -- HTTP requests suspended until a lock may be free.
 *
 * A channel (one per pub/sub channel being waited on) counts the waiters
 * joined to it and lists the sleeping ones oldest first. The pubsub thread
 * keeps Redis' subscriptions equal to "channels with waiters" by draining
 * the dirty list (waiters_next_change) and reports replies and messages
 * back here. Wake-ups:
 *   - "0" wakes the oldest sleeper (the oldest writer first: after a read
 *     release only a writer can be waiting to win); "1" wakes the oldest
 *     writer if one sleeps (readers queue behind a waiting writer, so only
 *     it can win), else every sleeper; a message that finds
 *     nobody asleep is banked as a permit (bounded by the joined count), so
 *     a waiter between two tries cannot miss it;
 *   - a confirmed (re)subscription wakes all sleepers of the channel: a
 *     release may have happened before it, unseen;
 *   - a channel's retry timer (the holder's lease end: expiry publishes
 *     nothing) wakes the oldest sleeper, or all of them on a read-write
 *     lock's channel, where every reader may enter at once;
 *   - a waiter's deadline timer, or its client hanging up, wakes it alone.
 *
 * Lease ends. Every sleeper must be retried no later than the lease end of
 * whoever holds the lock by then, yet one lease end must not wake them all
 * (a plain lock's: one retry can win). So the channel, not the waiter,
 * carries the retry timer, armed at the earliest lease end anyone reported
 * since it last fired (earlier is only an extra retry; later could oversleep
 * a holder that died), and this holds while a channel has sleepers:
 *     its retry timer is armed, or some joined waiter is awake,
 * because every awake waiter ends in one of the cases that re-arm it:
 *   - it sleeps again, reporting the lease it saw (waiters_sleep);
 *   - it is granted: it reports its own lease (waiters_leave): if it dies
 *     holding the lock, the others are retried when that lease ends;
 *   - it gives up (deadline, hang-up) reporting the lease it last saw, or
 *     none: then if it was the last one awake and no timer is armed, the
 *     oldest sleeper is woken at once to look (one script run).
 * A lease can also get shorter without anyone here trying: a heartbeat
 * with a smaller ttl_ms. Served by this dlockd, it reports the new end
 * (waiters_lease_ends). Whichever instance serves it, a plain lock's renew
 * script publishes "0" when it shortens the lease, so one sleeper here
 * retries and reports the new end; fair-lock heads and read-write waiters
 * look again at every queue refresh anyway. (A Redisson partial unlock
 * re-applies its own lease silently: a dlockd waiter then retries at the
 * end of the lease it saw last.)
 * One mutex guards everything; resume callbacks are called with it held
 * and must not call back into this module. */
#include "waiters.h"

#include "heap.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

enum timer_type { TIMER_DEADLINE, TIMER_RETRY };

struct timer {
	struct heap_node node;
	enum timer_type type;
};

struct channel {
	char *name;
	struct channel *hnext;		/* hash bucket chain */
	struct channel *dnext;		/* dirty list */
	bool dirty;			/* on the dirty list */
	bool subscribed;		/* SUBSCRIBE sent on this pubsub connection */
	unsigned inflight;		/* (UN)SUBSCRIBE replies still to come */
	uint64_t epoch;			/* bumped at each confirmed subscription */
	unsigned refs;			/* joined waiters */
	unsigned permits;		/* wakes banked while nobody slept */
	bool timer_all;			/* the retry timer wakes every sleeper */
	struct waiter *head, *tail;	/* sleepers, oldest first */
	unsigned nsleeping;		/* ... and how many */
	struct timer retry;		/* the holder's lease end: retry the oldest
					 * sleeper (all, with timer_all) */
};

struct waiter {
	struct channel *ch;
	struct waiter *prev, *next;	/* in ch's sleepers while sleeping */
	struct timer deadline;		/* armed while sleeping */
	int64_t deadline_ms;		/* monotonic */
	int fd;				/* client socket; -1 = not watched */
	waiter_resume_fn resume;
	void *ctx;
	uint64_t epoch_seen;		/* ch->epoch when it last (re)tried */
	bool sleeping;
	bool writer;			/* preferred by a "0" */
	enum waiter_wake reason;
};

static struct {
	pthread_mutex_t lock;
	struct channel **buckets;
	size_t nbuckets, nchannels;
	struct channel *dirty_head, *dirty_tail;
	struct heap timers;
	int hup_epfd;
	unsigned nwaiters;
	bool shutting_down;
	void (*notify)(void);
} W = { .lock = PTHREAD_MUTEX_INITIALIZER, .hup_epfd = -1 };

/* ----- Channel table ----- */

static size_t hash_name(const char *s)
{
	size_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static struct channel *channel_find(const char *name)
{
	struct channel *ch = W.buckets[hash_name(name) & (W.nbuckets - 1)];

	while (ch && strcmp(ch->name, name))
		ch = ch->hnext;
	return ch;
}

static void table_grow(void)
{
	size_t n = W.nbuckets * 2;
	struct channel **b = xcalloc(n, sizeof(*b));

	for (size_t i = 0; i < W.nbuckets; i++) {
		struct channel *ch = W.buckets[i], *next;

		for (; ch; ch = next) {
			size_t k = hash_name(ch->name) & (n - 1);

			next = ch->hnext;
			ch->hnext = b[k];
			b[k] = ch;
		}
	}
	free(W.buckets);
	W.buckets = b;
	W.nbuckets = n;
}

static struct channel *channel_get(const char *name)
{
	struct channel *ch = channel_find(name);
	size_t k;

	if (ch)
		return ch;
	if (W.nchannels >= W.nbuckets)
		table_grow();
	ch = xcalloc(1, sizeof(*ch));
	ch->name = xstrdup(name);
	ch->retry.type = TIMER_RETRY;
	heap_node_init(&ch->retry.node);
	k = hash_name(name) & (W.nbuckets - 1);
	ch->hnext = W.buckets[k];
	W.buckets[k] = ch;
	W.nchannels++;
	return ch;
}

static void channel_free(struct channel *ch)
{
	struct channel **pp = &W.buckets[hash_name(ch->name) & (W.nbuckets - 1)];

	while (*pp != ch)
		pp = &(*pp)->hnext;
	*pp = ch->hnext;
	W.nchannels--;
	heap_remove(&W.timers, &ch->retry.node);
	free(ch->name);
	free(ch);
}

/* Free ch if nothing refers to it any more: no waiters, no subscription,
 * no reply pending, not queued for the pubsub thread. */
static void channel_maybe_free(struct channel *ch)
{
	if (!ch->refs && !ch->subscribed && !ch->inflight && !ch->dirty)
		channel_free(ch);
}

static bool channel_confirmed(const struct channel *ch)
{
	return ch->subscribed && ch->inflight == 0;
}

/* Queue ch for the pubsub thread; returns true when the caller must notify. */
static bool channel_mark_dirty(struct channel *ch)
{
	if (ch->dirty)
		return false;
	ch->dirty = true;
	ch->dnext = NULL;
	if (W.dirty_tail)
		W.dirty_tail->dnext = ch;
	else
		W.dirty_head = ch;
	W.dirty_tail = ch;
	return true;
}

/* ----- Sleeping and waking (W.lock held) ----- */

static void sleeper_unlink(struct waiter *w)
{
	struct channel *ch = w->ch;

	if (w->prev)
		w->prev->next = w->next;
	else
		ch->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		ch->tail = w->prev;
	w->prev = w->next = NULL;
	w->sleeping = false;
	ch->nsleeping--;
	heap_remove(&W.timers, &w->deadline.node);
	if (w->fd >= 0)
		epoll_ctl(W.hup_epfd, EPOLL_CTL_DEL, w->fd, NULL);
}

static void wake(struct waiter *w, enum waiter_wake reason)
{
	sleeper_unlink(w);
	w->reason = reason;
	w->epoch_seen = w->ch->epoch;
	w->resume(w->ctx);
}

static unsigned wake_all(struct channel *ch, enum waiter_wake reason)
{
	unsigned n = 0;

	while (ch->head) {
		wake(ch->head, reason);
		n++;
	}
	return n;
}

/* Have ch's sleepers retried at at_ms (monotonic) at the latest: the
 * earlier of that and the time already armed. Returns true when the
 * pubsub thread must be told (its next timeout came earlier). */
static bool arm_retry(struct channel *ch, int64_t at_ms)
{
	if (at_ms <= 0)
		return false;
	if (heap_armed(&ch->retry.node) && ch->retry.node.at_ms <= at_ms)
		return false;
	heap_set(&W.timers, &ch->retry.node, at_ms);
	return ch->retry.node.idx == 0;
}

/* A waiter of ch left, and others are joined: keep the sleepers covered
 * (see the top of this file) by the lease end it saw (0: none) -- armed
 * even if nobody sleeps yet: those awake may have tried before that lease
 * began and report an older one -- or, when it saw none and nobody else is
 * awake to report one, by having the oldest look now. Returns
 * arm_retry()'s answer. */
static bool keep_covered(struct channel *ch, int64_t lease_end_ms)
{
	if (lease_end_ms > 0)
		return arm_retry(ch, lease_end_ms);
	if (ch->head && ch->nsleeping == ch->refs && !heap_armed(&ch->retry.node))
		wake(ch->head, WAKE_RETRY);
	return false;
}

/* The oldest sleeping writer of ch, or NULL. */
static struct waiter *oldest_writer(const struct channel *ch)
{
	struct waiter *w = ch->head;

	while (w && !w->writer)
		w = w->next;
	return w;
}

/* ----- Request side ----- */

struct waiter *waiters_join(const char *channel, int fd, waiter_resume_fn resume,
			    void *ctx, int64_t deadline_ms, unsigned flags, bool *confirmed)
{
	struct waiter *w = xcalloc(1, sizeof(*w));
	struct channel *ch;
	bool notify = false;

	w->fd = fd;
	w->resume = resume;
	w->ctx = ctx;
	w->deadline_ms = deadline_ms;
	w->writer = flags & WAITER_WRITER;
	w->deadline.type = TIMER_DEADLINE;
	heap_node_init(&w->deadline.node);

	pthread_mutex_lock(&W.lock);
	ch = channel_get(channel);
	w->ch = ch;
	ch->timer_all |= (flags & WAITER_TIMER_ALL) != 0;
	ch->refs++;
	W.nwaiters++;
	if (!ch->subscribed || ch->refs == 1)
		notify = channel_mark_dirty(ch);
	w->epoch_seen = ch->epoch;
	*confirmed = channel_confirmed(ch);
	pthread_mutex_unlock(&W.lock);
	if (notify && W.notify)
		W.notify();
	return w;
}

void waiters_sleep(struct waiter *w, int64_t retry_at_ms)
{
	struct channel *ch = w->ch;
	bool notify = false;

	pthread_mutex_lock(&W.lock);
	w->sleeping = true;
	w->prev = ch->tail;
	w->next = NULL;
	if (ch->tail)
		ch->tail->next = w;
	else
		ch->head = w;
	ch->tail = w;
	ch->nsleeping++;
	heap_set(&W.timers, &w->deadline.node, w->deadline_ms);
	notify = w->deadline.node.idx == 0;
	notify |= arm_retry(ch, retry_at_ms);
	if (w->fd >= 0) {
		struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = w };

		epoll_ctl(W.hup_epfd, EPOLL_CTL_ADD, w->fd, &ev);
	}

	if (W.shutting_down) {
		wake(w, WAKE_SHUTDOWN);
	} else if (channel_confirmed(ch) && ch->epoch != w->epoch_seen) {
		wake(w, WAKE_RETRY);	/* (re)subscribed since its last try */
	} else if (ch->permits) {
		ch->permits--;
		wake(w, WAKE_RETRY);	/* a release came while it was trying */
	} else if (now_ms() >= w->deadline_ms) {
		wake(w, WAKE_DEADLINE);
	}
	pthread_mutex_unlock(&W.lock);
	if (notify && W.notify)
		W.notify();
}

enum waiter_wake waiters_wake_reason(struct waiter *w)
{
	enum waiter_wake r;

	pthread_mutex_lock(&W.lock);
	r = w->reason;
	w->reason = WAKE_NONE;
	pthread_mutex_unlock(&W.lock);
	return r;
}

void waiters_leave(struct waiter *w, int64_t lease_end_ms)
{
	struct channel *ch = w->ch;
	bool notify = false;

	pthread_mutex_lock(&W.lock);
	if (w->sleeping)
		sleeper_unlink(w);
	W.nwaiters--;
	if (--ch->refs == 0) {
		ch->permits = 0;
		heap_remove(&W.timers, &ch->retry.node);
		notify = channel_mark_dirty(ch);	/* unsubscribe, then free */
	} else {
		if (ch->permits > ch->refs)
			ch->permits = ch->refs;
		if (!W.shutting_down)
			notify = keep_covered(ch, lease_end_ms);
	}
	pthread_mutex_unlock(&W.lock);
	free(w);
	if (notify && W.notify)
		W.notify();
}

void waiters_lease_ends(const char *channel, int64_t at_ms)
{
	struct channel *ch;
	bool notify = false;

	pthread_mutex_lock(&W.lock);
	ch = channel_find(channel);
	if (ch && ch->refs && at_ms > 0)
		notify = arm_retry(ch, at_ms);
	pthread_mutex_unlock(&W.lock);
	if (notify && W.notify)
		W.notify();
}

void waiters_shutdown(void)
{
	pthread_mutex_lock(&W.lock);
	W.shutting_down = true;
	for (size_t i = 0; i < W.nbuckets; i++)
		for (struct channel *ch = W.buckets[i]; ch; ch = ch->hnext)
			wake_all(ch, WAKE_SHUTDOWN);
	pthread_mutex_unlock(&W.lock);
}

unsigned waiters_count(void)
{
	unsigned n;

	pthread_mutex_lock(&W.lock);
	n = W.nwaiters;
	pthread_mutex_unlock(&W.lock);
	return n;
}

/* ----- Pubsub side ----- */

int waiters_next_change(char **name, bool *subscribe)
{
	int found = 0;

	pthread_mutex_lock(&W.lock);
	while (!found && W.dirty_head) {
		struct channel *ch = W.dirty_head;

		W.dirty_head = ch->dnext;
		if (!W.dirty_head)
			W.dirty_tail = NULL;
		ch->dirty = false;
		if (ch->refs && !ch->subscribed) {
			ch->subscribed = true;
			*subscribe = true;
			found = 1;
		} else if (!ch->refs && ch->subscribed) {
			ch->subscribed = false;
			*subscribe = false;
			found = 1;
		}
		if (found) {
			ch->inflight++;
			*name = xstrdup(ch->name);
		} else {
			channel_maybe_free(ch);
		}
	}
	pthread_mutex_unlock(&W.lock);
	return found;
}

/* Redis confirmed a SUBSCRIBE or UNSUBSCRIBE of channel: once none is in
 * flight, the waiters retry (a release may have come before the
 * subscription); after an unsubscribe the channel may go. */
static void on_confirmed(const char *channel, bool unsubscribed)
{
	struct channel *ch;

	pthread_mutex_lock(&W.lock);
	ch = channel_find(channel);
	if (ch && ch->inflight) {
		ch->inflight--;
		if (channel_confirmed(ch)) {
			ch->epoch++;
			wake_all(ch, WAKE_RETRY);
		}
		if (unsubscribed)
			channel_maybe_free(ch);
	}
	pthread_mutex_unlock(&W.lock);
}

void waiters_on_subscribed(const char *channel)
{
	on_confirmed(channel, false);
}

void waiters_on_unsubscribed(const char *channel)
{
	on_confirmed(channel, true);
}

void waiters_on_message(const char *channel, const char *payload, size_t len)
{
	struct channel *ch;

	pthread_mutex_lock(&W.lock);
	ch = channel_find(channel);
	if (!ch || len != 1) {
		/* not ours, or not a lock message */
	} else if (payload[0] == '0') {
		struct waiter *w = oldest_writer(ch);

		if (ch->head)
			wake(w ? w : ch->head, WAKE_RETRY);
		else if (ch->permits < ch->refs)
			ch->permits++;
	} else if (payload[0] == '1') {
		struct waiter *w = oldest_writer(ch);

		if (w) {
			/* a waiting writer holds new readers back: only it can win */
			wake(w, WAKE_RETRY);
		} else {
			unsigned woken = wake_all(ch, WAKE_RETRY);

			ch->permits = ch->refs > woken ? ch->refs - woken : 0;
		}
	}
	pthread_mutex_unlock(&W.lock);
}

void waiters_on_disconnect(void)
{
	pthread_mutex_lock(&W.lock);
	for (size_t i = 0; i < W.nbuckets; i++) {
		struct channel *ch = W.buckets[i], *next;

		for (; ch; ch = next) {
			next = ch->hnext;
			ch->subscribed = false;
			ch->inflight = 0;
			if (ch->refs)
				channel_mark_dirty(ch);
			else
				channel_maybe_free(ch);
		}
	}
	pthread_mutex_unlock(&W.lock);
}

int waiters_next_timeout_ms(void)
{
	struct heap_node *top;
	int64_t left = -1;

	pthread_mutex_lock(&W.lock);
	top = heap_top(&W.timers);
	if (top) {
		left = top->at_ms - now_ms();
		if (left < 0)
			left = 0;
		if (left > 60000)
			left = 60000;
	}
	pthread_mutex_unlock(&W.lock);
	return (int)left;
}

void waiters_run_timers(void)
{
	struct heap_node *top;
	int64_t now = now_ms();

	pthread_mutex_lock(&W.lock);
	while ((top = heap_top(&W.timers)) && top->at_ms <= now) {
		struct timer *t = container_of(top, struct timer, node);

		heap_remove(&W.timers, top);
		if (t->type == TIMER_DEADLINE) {
			wake(container_of(t, struct waiter, deadline), WAKE_DEADLINE);
		} else {
			struct channel *ch = container_of(t, struct channel, retry);

			if (ch->timer_all)
				wake_all(ch, WAKE_RETRY);
			else if (ch->head)
				wake(ch->head, WAKE_RETRY);
		}
	}
	pthread_mutex_unlock(&W.lock);
}

int waiters_hangup_fd(void)
{
	return W.hup_epfd;
}

void waiters_check_hangups(void)
{
	struct epoll_event evs[64];
	int n;

	pthread_mutex_lock(&W.lock);
	/* Under the lock: a waiter leaves (and is freed) only with the lock
	 * held and after deregistering, so every pointer returned is live. */
	n = epoll_wait(W.hup_epfd, evs, (int)ARRAY_SIZE(evs), 0);
	for (int i = 0; i < n; i++) {
		struct waiter *w = evs[i].data.ptr;

		if (w->sleeping)
			wake(w, WAKE_GONE);
	}
	pthread_mutex_unlock(&W.lock);
}

/* ----- Set-up ----- */

int waiters_init(void (*notify)(void))
{
	W.nbuckets = 64;
	W.buckets = xcalloc(W.nbuckets, sizeof(*W.buckets));
	W.nchannels = 0;
	W.dirty_head = W.dirty_tail = NULL;
	W.nwaiters = 0;
	W.shutting_down = false;
	W.notify = notify;
	heap_init(&W.timers);
	W.hup_epfd = epoll_create1(EPOLL_CLOEXEC);
	return W.hup_epfd < 0 ? -1 : 0;
}

void waiters_release(void)
{
	for (size_t i = 0; i < W.nbuckets; i++) {
		struct channel *ch = W.buckets[i], *next;

		for (; ch; ch = next) {
			next = ch->hnext;
			free(ch->name);
			free(ch);
		}
	}
	free(W.buckets);
	W.buckets = NULL;
	W.nbuckets = W.nchannels = 0;
	heap_release(&W.timers);
	if (W.hup_epfd >= 0)
		close(W.hup_epfd);
	W.hup_epfd = -1;
}
