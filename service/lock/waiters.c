/* waiters.c -- HTTP requests suspended until a lock may be free, one
 * struct waiters per event loop.
 *
 * A channel (one per pub/sub channel this loop's requests wait on) counts
 * the waiters joined to it and lists the sleeping ones oldest first. The
 * loop's first waiter on a channel asks the subscriber for it and its last
 * one gives it back (waiters_subscribe_fn); the subscriber tells the loop,
 * through its mailbox, when the subscription is live, every message, and
 * when its connection dropped (waiters_deliver_*). Wake-ups:
 *   - on a semaphore's channel (WAITER_COUNTED) a message "<n>" wakes
 *     the n oldest sleepers (permits came back), banking what is left;
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
 *   - "-<ms>" wakes nobody: a fair lock's next in line is told the lease
 *     of the holder that just took the lock, and its retry timer is armed
 *     at that lease's end (one script run less per hand-off than waking
 *     it to read the lease);
 *   - a waiter's deadline timer, or its client hanging up, wakes it alone;
 *     so does waiters_retry() (a fair-lock waiter whose queue place the
 *     loop's refresh found gone: fair_queue.c).
 * Watchers (WAITER_WATCH: a GET waiting for the lock to change, watch.c)
 * sleep on a list of their own and take no part in the above: every
 * message and confirmation of their channel wakes all of them, and each
 * has one timer, at the earlier of its deadline and the time it asked to
 * look again (a lease ending: expiry publishes nothing). A message that
 * comes while a watcher is awake is not lost: the channel counts its
 * messages, and a watcher that goes to sleep having missed one is woken
 * at once (it may have read the lock before that message's change).
 * Watchers neither take permits nor count for the lease-end rules below.
 * Every loop that has waiters on a channel hears each of its messages, and
 * applies the rules above to its own sleepers only -- but a plain lock's
 * "0", which only one try can win, is taken by one loop alone: the first
 * to handle it that has a waiter to wake (see "One wake for all loops").
 * Read-write locks' and semaphores' messages wake in every loop, so one
 * release costs a script run per loop there. Neither is FIFO over the
 * loops: each loop's oldest, not the oldest of all.
 *
 * Lease ends. Every sleeper must be retried no later than the lease end of
 * whoever holds the lock by then, yet one lease end must not wake them all
 * (a plain lock's: one retry can win). So the channel, not the waiter,
 * carries the retry timer, armed at the earliest lease end anyone reported
 * since it last fired (earlier is only an extra retry; later could oversleep
 * a holder that died), and this holds, in every loop, while a channel has
 * sleepers there:
 *     its retry timer is armed, or some joined waiter is awake,
 * because every awake waiter ends in one of the cases that re-arm it:
 *   - it sleeps again, reporting the lease it saw (waiters_sleep);
 *   - it is granted: it reports its own lease (waiters_leave): if it dies
 *     holding the lock, the others are retried when that lease ends;
 *   - it gives up (deadline, hang-up) reporting the lease it last saw, or
 *     none: then if it was the last one awake and no timer is armed, the
 *     oldest sleeper is woken at once to look (one script run).
 * A waiter's report reaches only its own loop's channel; the other loops'
 * sleepers of the same lock are covered by their own awake waiters and
 * timers, as if they were another dlockd.
 * A lease can also get shorter without anyone here trying: a heartbeat
 * with a smaller ttl_ms. Served by this dlockd, it reports the new end
 * (waiters_lease_ends), which reaches every loop. Whichever instance
 * serves it, a plain lock's renew script publishes "0" when it shortens
 * the lease, so one sleeper per loop retries and reports the new end; a
 * fair lock's tells its queue head the new lease ("-<ms>", below);
 * read-write waiters look again at every queue refresh anyway. (A Redisson partial unlock re-applies its own lease
 * silently: a dlockd waiter then retries at the end of the lease it saw
 * last.)
 * A fair-lock waiter queued behind its queue's head is the one sleeper
 * with no retry time: it is alone on its own channel, told there when its
 * turn comes ("-<ms>" when the head before it takes the lock: the lease
 * end it is to watch), and the loop's queue refresh (fair_queue.c) wakes
 * it with waiters_retry() should it have to look for another reason.
 *
 * Threads. Everything about a struct waiters happens on its loop's thread,
 * without a mutex: its timers are the loop's, its sleepers' client sockets
 * are watched by the loop (LOOP_HANGUP), and what other threads have to say
 * (the subscriber's deliveries, another loop's lease ends, shutdown) is
 * posted to the loop's mailbox. A wake never calls resume at once: the
 * waiter goes on the ready list, which a task the loop runs before it
 * sleeps drains (as Redis' blocked.c hands unblocked clients to
 * beforeSleep), so the request has always suspended its connection and
 * returned to the loop before its resume runs. The only shared state is
 * the registry of every loop's struct waiters (its mutex guards the list
 * only) and two atomics: the waiter count and the shutdown flag. */
#include "service/lock/waiters.h"

#include "service/base/list.h"
#include "service/base/loop.h"
#include "service/base/names.h"
#include "service/base/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many of a channel's last told owners it remembers for
 * waiters_join_covered(): more told within one first try than this make
 * the joining waiter try again, as it always did. */
#define TOLD_MARKS 8

/* A lease told in a message ("-<ms>") is retried this long after its end,
 * as locks.c's retries after a lease end Redis reported: a timer of whole
 * milliseconds can come a millisecond early and find it not quite over. */
#define LEASE_TOLD_MARGIN_MS 2

/* An owner told on a channel (owner_told_here): the loop's mark then, and
 * a hash of the owner (a collision only costs a try). */
struct told_mark {
	uint64_t mark;
	uint32_t owner;
};

struct channel {
	char *name;
	struct name_entry entry;	/* in ws->channels, by name */
	struct waiters *ws;
	bool live;			/* the subscription is confirmed (the
					 * subscriber said so, and has not said
					 * its connection dropped since) */
	uint64_t epoch;			/* bumped at each confirmation */
	unsigned refs;			/* joined waiters (watchers apart) */
	unsigned nwatch;		/* joined watchers */
	unsigned permits;		/* wakes banked while nobody slept */
	uint64_t msgs;			/* messages heard on it (watchers compare) */
	uint64_t heard;			/* the loop's mark (marks) of the last
					 * confirmation, message or drop heard */
	struct told_mark told[TOLD_MARKS];	/* the last owners told, a ring */
	unsigned told_next;		/* ... where the next one goes */
	struct claims *claims;		/* the loops' shared record of the "0"s
					 * one of them took (one_wake) */
	bool timer_all;			/* the retry timer wakes every sleeper */
	bool counted;			/* a message is a count of permits freed
					 * (WAITER_COUNTED: a semaphore's) */
	bool writers;			/* a writer (WAITER_WRITER) joined it: a
					 * "0" or "1" looks for the oldest one */
	struct list_node sleepers;	/* struct waiter, oldest first */
	unsigned nsleeping;		/* ... and how many */
	struct list_node watchers;	/* sleeping watchers, apart */
	struct loop_timer retry;	/* the holder's lease end: retry the oldest
					 * sleeper (all, with timer_all) */
};

struct waiter {
	struct channel *ch;
	struct list_node link;		/* in ch's sleepers (or watchers) while
					 * sleeping, in the ready list while ready */
	struct loop_timer deadline;	/* armed while sleeping (a watcher's: at
					 * the earlier of its deadline and its
					 * retry_at_ms) */
	int64_t deadline_ms;		/* monotonic; 0 = none (watchers only) */
	int64_t retry_at_ms;		/* a watcher's own look-again time; 0 = none */
	int fd;				/* client socket; -1 = not watched */
	waiter_resume_fn resume;
	void *ctx;
	uint64_t epoch_seen;		/* ch->epoch when it last (re)tried */
	uint64_t msgs_seen;		/* a watcher's: ch->msgs when it last woke */
	bool sleeping;
	bool ready;			/* woken, resume not yet called */
	bool claimed;			/* ... by a wake that was its loop's to
					 * give (one_wake): hand it on if it
					 * leaves before its resume */
	bool took;			/* its last wake was such a one: the
					 * other loops hear the lease end it
					 * then sees (waiters_sleep) */
	bool writer;			/* preferred by a "0" */
	bool watch;			/* a watcher (WAITER_WATCH) */
	enum waiter_wake reason;
	char *owner;			/* whom it waits for (waiters_set_owner), or NULL */
	struct owner_sleepers *os;	/* its owner's count while it sleeps */
};

/* How many sleepers of one channel wait for one owner, in the loop's
 * table keyed "<channel>\x1f<owner>": a grant tells an owner's other
 * waiters (owner_told_here), and walking every sleeper of the lock to find
 * none was an O(n) walk per hand-off. Two pairs that happen to make the
 * same key only cost a walk. */
struct owner_sleepers {
	struct name_entry entry;
	unsigned n;
	char key[];
};

struct waiters {
	struct loop *loop;
	waiters_subscribe_fn subscribe;
	void *sub;
	struct name_table channels;	/* struct channel, by name */
	struct name_table owners;	/* struct owner_sleepers, by key */
	unsigned nwaiters;		/* joined here */
	struct list_node ready;		/* woken waiters, oldest wake first */
	struct loop_task resume_task;	/* drains the ready list */
	uint64_t marks;			/* counts what its channels heard
					 * (waiters_mark) */
	struct waiters *rnext;		/* in the registry */
	/* its waiters with an owner (waiters_set_owner): read by the other
	 * loops, which post it a told owner only when there are some */
	atomic_uint owned;
};

/* Every loop's struct waiters. */
static struct {
	pthread_mutex_t lock;		/* guards list only */
	struct waiters *list;
	atomic_uint nwaiters;		/* joined, over all loops */
	atomic_uint nwatchers;		/* ... of which watchers */
	atomic_uint owned;		/* ... with an owner (struct waiters' owned) */
	atomic_bool shutting_down;
} R = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ----- One wake for all loops ----- */

/* A "0" on a plain lock's channel frees the lock for one waiter: only one
 * try can win. Every loop with waiters on the channel hears it, and only
 * the first to handle it that has someone to wake (a sleeper, or an awake
 * waiter to bank a permit for) wakes anyone; the others only tell their
 * watchers. Before, each loop woke its oldest sleeper, and all but one of
 * those tries lost: (--threads - 1) scripts per hand-off. The loops share
 * a record per channel name of the messages (numbered by the subscriber)
 * one of them took; a loop so far behind that the record forgot a number
 * takes it again, which costs one try more, never a wake less.
 * A wake so taken that comes to nothing -- the permit it banked dropped
 * when its waiter left without trying again, the sleeper it woke gone
 * before its try -- is handed on (hand_on): to a sleeper of the same loop,
 * else to the other loops, each of which wakes one as before.
 * A read-write lock's channel keeps a wake per loop ("0" looks for the
 * oldest writer: a loop with readers only could not use it), and a
 * semaphore's counts are shared out by each loop as before. */
#define CLAIMS_KEPT 64

struct claims {
	char *name;
	struct name_entry entry;	/* in C.by_name */
	unsigned users;			/* loops with the channel open */
	/* messages taken, a ring of CLAIMS_KEPT (0: none); allocated at the
	 * first take while two loops or more have the channel open: a
	 * channel of one loop (a fair lock's waiter's own) needs none */
	uint64_t *seq;
	unsigned next;
};

static struct {
	pthread_mutex_t lock;		/* a leaf: guards the table and its entries */
	struct name_table by_name;	/* struct claims */
	bool ready;
} C = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct claims *claims_open(const char *name)
{
	struct name_entry *e;
	struct claims *c;

	pthread_mutex_lock(&C.lock);
	if (!C.ready) {
		names_init(&C.by_name);
		C.ready = true;
	}
	e = names_find(&C.by_name, name);
	if (e) {
		c = container_of(e, struct claims, entry);
	} else {
		c = xcalloc(1, sizeof(*c));
		c->name = xstrdup(name);
		c->entry.name = c->name;
		names_add(&C.by_name, &c->entry);
	}
	c->users++;
	pthread_mutex_unlock(&C.lock);
	return c;
}

static void claims_close(struct claims *c)
{
	pthread_mutex_lock(&C.lock);
	if (--c->users == 0) {
		names_remove(&C.by_name, &c->entry);
		free(c->seq);
		free(c->name);
		free(c);
	}
	pthread_mutex_unlock(&C.lock);
}

/* Take message seq for this loop: false when another loop took it. With
 * no other loop on the channel now, none can take it after this one: a
 * loop that opens it later was not sent it (or, reopening it before it
 * handled it, takes it again: a try more, never a wake less). */
static bool claims_take(struct claims *c, uint64_t seq)
{
	bool taken = false;

	pthread_mutex_lock(&C.lock);
	if (c->users < 2) {
		pthread_mutex_unlock(&C.lock);
		return true;
	}
	if (!c->seq)
		c->seq = xcalloc(CLAIMS_KEPT, sizeof(*c->seq));
	for (unsigned i = 0; i < CLAIMS_KEPT && !taken; i++)
		taken = c->seq[i] == seq;
	if (!taken) {
		c->seq[c->next] = seq;
		c->next = (c->next + 1) % CLAIMS_KEPT;
	}
	pthread_mutex_unlock(&C.lock);
	return !taken;
}

/* ----- Channel table ----- */

static struct channel *channel_lookup(struct waiters *ws, const char *name)
{
	struct name_entry *e = names_find(&ws->channels, name);

	return e ? container_of(e, struct channel, entry) : NULL;
}

static void on_retry_timer(struct loop *l, struct loop_timer *t);

/* ch, made (and asked of the subscriber) if this loop has none. */
static struct channel *channel_open(struct waiters *ws, const char *name)
{
	struct channel *ch = channel_lookup(ws, name);

	if (ch)
		return ch;
	ch = xcalloc(1, sizeof(*ch));
	ch->name = xstrdup(name);
	ch->entry.name = ch->name;
	ch->ws = ws;
	list_init(&ch->sleepers);
	list_init(&ch->watchers);
	loop_timer_init(&ch->retry, on_retry_timer);
	ch->claims = claims_open(name);
	names_add(&ws->channels, &ch->entry);
	ws->subscribe(ws->sub, ws, name, true);
	return ch;
}

/* The last waiter of ch left: give the channel back and forget it. What the
 * subscriber still sends about it finds no channel and is dropped; should a
 * waiter join it again, the channel starts anew, not live. */
static void channel_free(struct channel *ch)
{
	struct waiters *ws = ch->ws;

	names_remove(&ws->channels, &ch->entry);
	loop_timer_stop(ws->loop, &ch->retry);
	claims_close(ch->claims);
	ws->subscribe(ws->sub, ws, ch->name, false);
	free(ch->name);
	free(ch);
}

/* ----- Sleeping and waking ----- */

/* The first waiter of a list of them (a channel's sleepers or watchers,
 * a loop's ready list), or NULL. */
#define first_of(list) list_entry_or_null(list_first(list), struct waiter, link)

static void ready_unlink(struct waiter *w)
{
	struct waiters *ws = w->ch->ws;

	(void)ws;
	list_remove(&w->link);
	w->ready = false;
}

/* Call the resume function of every woken waiter, in the order woken: a
 * task of the loop, so never from inside a waiters_* call. A resume may
 * call back into waiters (even wake others: they are resumed in this pass). */
static void run_resumes(struct loop *l, void *data)
{
	struct waiters *ws = data;
	struct waiter *w;

	(void)l;
	while ((w = first_of(&ws->ready))) {
		ready_unlink(w);
		w->claimed = false;	/* it tries now: the wake is used */
		w->resume(w->ctx);
	}
}

/* key (a buffer of len) for channel and owner; false if it does not fit,
 * and then nobody sleeps under it. */
static bool owner_key(char *key, size_t len, const char *channel, const char *owner)
{
	return (size_t)snprintf(key, len, "%s\x1f%s", channel, owner) < len;
}

/* w (with an owner) is asleep: count it under its owner's key. */
static void owner_index(struct waiter *w)
{
	struct name_table *t = &w->ch->ws->owners;
	size_t len = strlen(w->ch->name) + 1 + strlen(w->owner) + 1;
	struct owner_sleepers *os = xmalloc(sizeof(*os) + len);
	struct name_entry *e;

	owner_key(os->key, len, w->ch->name, w->owner);
	if ((e = names_find(t, os->key))) {
		free(os);
		os = container_of(e, struct owner_sleepers, entry);
	} else {
		os->entry.name = os->key;
		os->n = 0;
		names_add(t, &os->entry);
	}
	os->n++;
	w->os = os;
}

static void owner_unindex(struct waiter *w)
{
	struct owner_sleepers *os = w->os;

	if (!os)
		return;
	w->os = NULL;
	if (--os->n == 0) {
		names_remove(&w->ch->ws->owners, &os->entry);
		free(os);
	}
}

static void sleeper_unlink(struct waiter *w)
{
	struct channel *ch = w->ch;
	struct waiters *ws = ch->ws;

	list_remove(&w->link);
	w->sleeping = false;
	if (!w->watch)
		ch->nsleeping--;
	owner_unindex(w);
	loop_timer_stop(ws->loop, &w->deadline);
	if (w->fd >= 0)	/* parked: it may sleep again on this connection */
		loop_park(ws->loop, w->fd);
}

/* w (sleeping) is awake from now on; its resume runs before the loop
 * sleeps next. */
static void wake(struct waiter *w, enum waiter_wake reason)
{
	struct waiters *ws = w->ch->ws;

	sleeper_unlink(w);
	w->reason = reason;
	w->claimed = false;
	w->epoch_seen = w->ch->epoch;
	w->msgs_seen = w->ch->msgs;
	w->ready = true;
	list_append(&ws->ready, &w->link);
	loop_defer(ws->loop, &ws->resume_task);
}

static unsigned wake_all(struct channel *ch, enum waiter_wake reason)
{
	unsigned n = 0;

	struct waiter *w;

	while ((w = first_of(&ch->sleepers))) {
		wake(w, reason);
		n++;
	}
	return n;
}

/* Every sleeping watcher of ch: whatever ch says, the lock may have
 * changed. */
static void wake_watchers(struct channel *ch, enum waiter_wake reason)
{
	struct waiter *w;

	while ((w = first_of(&ch->watchers)))
		wake(w, reason);
}

/* Have ch's sleepers retried at at_ms (monotonic) at the latest: the
 * earlier of that and the time already armed. */
static void arm_retry(struct channel *ch, int64_t at_ms)
{
	if (at_ms <= 0)
		return;
	if (loop_timer_armed(&ch->retry) && ch->retry.node.at_ms <= at_ms)
		return;
	loop_timer_set(ch->ws->loop, &ch->retry, at_ms);
}

/* A waiter of ch left, and others are joined: keep the sleepers covered
 * (see the top of this file) by the lease end it saw (0: none) -- armed
 * even if nobody sleeps yet: those awake may have tried before that lease
 * began and report an older one -- or, when it saw none and nobody else is
 * awake to report one, by having the oldest look now. */
static void keep_covered(struct channel *ch, int64_t lease_end_ms)
{
	if (lease_end_ms > 0)
		arm_retry(ch, lease_end_ms);
	else if (!list_empty(&ch->sleepers) && ch->nsleeping == ch->refs &&
		 !loop_timer_armed(&ch->retry))
		wake(first_of(&ch->sleepers), WAKE_RETRY);
}

/* The oldest sleeping writer of ch, or NULL; at once on a channel no
 * writer ever joined (a plain lock's: a walk of every sleeper per release
 * was an O(n) walk per hand-off). */
static struct waiter *oldest_writer(const struct channel *ch)
{
	if (!ch->writers)
		return NULL;
	for (struct list_node *n = list_first(&ch->sleepers); n; n = list_next(&ch->sleepers, n)) {
		struct waiter *w = list_entry(n, struct waiter, link);

		if (w->writer)
			return w;
	}
	return NULL;
}

static void on_deadline(struct loop *l, struct loop_timer *t)
{
	struct waiter *w = container_of(t, struct waiter, deadline);

	(void)l;
	/* a watcher's timer may be its look-again time, before its deadline */
	if (w->watch && (w->deadline_ms <= 0 || now_ms() < w->deadline_ms))
		wake(w, WAKE_RETRY);
	else
		wake(w, WAKE_DEADLINE);
}

/* Arm w's timer: its deadline, or for a watcher the earlier of that and
 * its look-again time (either may be 0: none). */
static void arm_deadline(struct waiter *w)
{
	int64_t at = w->deadline_ms;

	if (w->retry_at_ms > 0 && (at <= 0 || w->retry_at_ms < at))
		at = w->retry_at_ms;
	if (at > 0)
		loop_timer_set(w->ch->ws->loop, &w->deadline, at);
	else
		loop_timer_stop(w->ch->ws->loop, &w->deadline);
}

static void on_retry_timer(struct loop *l, struct loop_timer *t)
{
	struct channel *ch = container_of(t, struct channel, retry);

	(void)l;
	if (ch->timer_all)
		wake_all(ch, WAKE_RETRY);
	else if (!list_empty(&ch->sleepers))
		wake(first_of(&ch->sleepers), WAKE_RETRY);
}

/* The client socket of a sleeping waiter hung up (or half-closed). */
static void on_hangup(struct loop *l, int fd, unsigned events, void *data)
{
	struct waiter *w = data;

	(void)l;
	(void)fd;
	(void)events;
	if (w->sleeping)
		wake(w, WAKE_GONE);
}

/* ----- Request side ----- */

struct waiter *waiters_join(struct waiters *ws, const char *channel, int fd,
			    waiter_resume_fn resume, void *ctx, int64_t deadline_ms,
			    unsigned flags, bool *confirmed)
{
	struct waiter *w;

	LOOP_ASSERT_THREAD(ws->loop);
	w = xcalloc(1, sizeof(*w));
	struct channel *ch = channel_open(ws, channel);

	w->ch = ch;
	w->fd = fd;
	w->resume = resume;
	w->ctx = ctx;
	w->deadline_ms = deadline_ms;
	w->writer = flags & WAITER_WRITER;
	ch->writers |= w->writer;
	w->watch = flags & WAITER_WATCH;
	loop_timer_init(&w->deadline, on_deadline);
	if (w->watch) {
		ch->nwatch++;
		atomic_fetch_add(&R.nwatchers, 1);
	} else {
		ch->timer_all |= (flags & WAITER_TIMER_ALL) != 0;
		ch->counted |= (flags & WAITER_COUNTED) != 0;
		ch->refs++;
	}
	ws->nwaiters++;
	atomic_fetch_add(&R.nwaiters, 1);
	w->epoch_seen = ch->epoch;
	w->msgs_seen = ch->msgs;
	*confirmed = ch->live;
	return w;
}

/* FNV-1a: the told ring's hash of an owner. */
static uint32_t owner_hash(const char *owner)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)owner; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

/* ch heard something a waiter that tried before must try again for. */
static void heard(struct channel *ch)
{
	ch->heard = ++ch->ws->marks;
}

uint64_t waiters_expect_join(struct waiters *ws)
{
	LOOP_ASSERT_THREAD(ws->loop);
	atomic_fetch_add(&ws->owned, 1);
	atomic_fetch_add(&R.owned, 1);
	return ws->marks;
}

void waiters_expect_done(struct waiters *ws)
{
	atomic_fetch_sub(&ws->owned, 1);
	atomic_fetch_sub(&R.owned, 1);
}

bool waiters_join_covered(const struct waiter *w, uint64_t mark)
{
	const struct channel *ch = w->ch;
	uint32_t h;

	if (!ch->live || ch->heard > mark || !w->owner)
		return false;
	/* the oldest remembered owner told after mark: some may be lost */
	if (ch->told[ch->told_next].mark > mark)
		return false;
	h = owner_hash(w->owner);
	for (unsigned i = 0; i < TOLD_MARKS; i++)
		if (ch->told[i].mark > mark && ch->told[i].owner == h)
			return false;
	return true;
}

void waiters_set_owner(struct waiter *w, const char *owner)
{
	if (!w->owner) {
		atomic_fetch_add(&w->ch->ws->owned, 1);
		atomic_fetch_add(&R.owned, 1);
	}
	owner_unindex(w);
	free(w->owner);
	w->owner = xstrdup(owner);
	if (w->sleeping && !w->watch)	/* indexed while asleep, whenever it got its owner */
		owner_index(w);
}

/* w has left its channel: free it, and uncount its owner. */
static void waiter_free(struct waiters *ws, struct waiter *w)
{
	if (w->owner) {
		atomic_fetch_sub(&ws->owned, 1);
		atomic_fetch_sub(&R.owned, 1);
	}
	free(w->owner);
	free(w);
}

/* What a loop is told from another thread (struct note, below). */
enum note_kind {
	NOTE_CONFIRMED, NOTE_MESSAGE, NOTE_DISCONNECT, NOTE_LEASE_END, NOTE_OWNER_TOLD,
	NOTE_HANDED_ON,
};

static void lease_ends_elsewhere(struct waiters *ws, const char *channel, int64_t at_ms);
static void post_note(struct waiters *ws, enum note_kind kind, const char *channel,
		      const char *payload, size_t len, int64_t at_ms);

/* Does a "0" on ch wake one waiter over all loops (see "One wake for all
 * loops")? A plain or fair lock's channel: not a read-write lock's (where
 * the loop's writer is looked for: WAITER_TIMER_ALL, WAITER_WRITER), not a
 * semaphore's (a count). */
static bool one_wake(const struct channel *ch)
{
	return !ch->counted && !ch->writers && !ch->timer_all;
}

/* waiters_sleep() of a watcher: it sleeps apart from the channel's other
 * sleepers, on its own timer, and looks again at once if anything came on
 * the channel since it last woke (or joined): it may have read the lock
 * before that. */
static void watch_sleep(struct waiter *w, int64_t retry_at_ms)
{
	struct channel *ch = w->ch;
	struct waiters *ws = ch->ws;
	int64_t now = now_ms();

	w->retry_at_ms = retry_at_ms;
	if (w->ready)
		return;		/* a wake is on its way already */
	if (w->sleeping) {
		arm_deadline(w);	/* asleep still: only its time moves */
		return;
	}
	w->sleeping = true;
	list_append(&ch->watchers, &w->link);
	arm_deadline(w);
	if (w->fd >= 0)
		loop_watch(ws->loop, w->fd, LOOP_HANGUP, on_hangup, w);

	if (atomic_load(&R.shutting_down))
		wake(w, WAKE_SHUTDOWN);
	else if ((ch->live && ch->epoch != w->epoch_seen) || ch->msgs != w->msgs_seen)
		wake(w, WAKE_RETRY);
	else if (w->deadline_ms > 0 && now >= w->deadline_ms)
		wake(w, WAKE_DEADLINE);
	else if (retry_at_ms > 0 && now >= retry_at_ms)
		wake(w, WAKE_RETRY);
}

void waiters_sleep(struct waiter *w, int64_t retry_at_ms)
{
	struct channel *ch = w->ch;
	struct waiters *ws = ch->ws;

	LOOP_ASSERT_THREAD(ws->loop);
	if (w->watch) {
		watch_sleep(w, retry_at_ms);
		return;
	}
	arm_retry(ch, retry_at_ms);
	if (w->took) {
		/* it tried on a wake its loop took for all loops: the others,
		 * whose sleepers were not woken, hear the lease end it saw (a
		 * heartbeat elsewhere may have shortened it: its "0" reached
		 * this loop alone) */
		w->took = false;
		if (retry_at_ms > 0 && !atomic_load(&R.shutting_down))
			lease_ends_elsewhere(ws, ch->name, retry_at_ms);
	}
	if (w->sleeping || w->ready)
		return;		/* a wake is on its way already */
	w->sleeping = true;
	list_append(&ch->sleepers, &w->link);
	ch->nsleeping++;
	if (w->owner)
		owner_index(w);
	loop_timer_set(ws->loop, &w->deadline, w->deadline_ms);
	if (w->fd >= 0)
		loop_watch(ws->loop, w->fd, LOOP_HANGUP, on_hangup, w);

	if (atomic_load(&R.shutting_down)) {
		wake(w, WAKE_SHUTDOWN);
	} else if (ch->live && ch->epoch != w->epoch_seen) {
		wake(w, WAKE_RETRY);	/* (re)subscribed since its last try */
	} else if (ch->permits) {
		ch->permits--;
		wake(w, WAKE_RETRY);	/* a release came while it was trying */
		w->claimed = w->took = one_wake(ch);
	} else if (now_ms() >= w->deadline_ms) {
		wake(w, WAKE_DEADLINE);
	}
}

void waiters_retry(struct waiter *w)
{
	LOOP_ASSERT_THREAD(w->ch->ws->loop);
	if (w->sleeping)
		wake(w, WAKE_RETRY);
}

enum waiter_wake waiters_wake_reason(struct waiter *w)
{
	enum waiter_wake r = w->reason;

	w->reason = WAKE_NONE;
	return r;
}

/* One wake on ch: its oldest sleeper (the oldest writer first), else a
 * permit for a waiter awake; false when nobody here can take it. claimed:
 * it was this loop's to give (one_wake), to hand on if it comes to
 * nothing. */
static bool give_wake(struct channel *ch, bool claimed)
{
	struct waiter *w;

	if (!list_empty(&ch->sleepers)) {
		w = oldest_writer(ch);
		if (!w)
			w = first_of(&ch->sleepers);
		wake(w, WAKE_RETRY);
		w->claimed = w->took = claimed;
		return true;
	}
	if (ch->permits < ch->refs) {
		ch->permits++;
		return true;
	}
	return false;
}

/* n wakes ch took (one_wake) came to nothing: give them to whoever is
 * here (a sleeper, or a permit for a waiter awake), else post them to
 * every other loop, where each is given as a message's would be. */
static void hand_on(struct waiters *ws, struct channel *ch, unsigned n)
{
	while (n > 0 && give_wake(ch, true))
		n--;
	if (n == 0 || atomic_load(&R.shutting_down))
		return;
	pthread_mutex_lock(&R.lock);
	for (struct waiters *o = R.list; o; o = o->rnext)
		if (o != ws)
			post_note(o, NOTE_HANDED_ON, ch->name, NULL, 0, n);
	pthread_mutex_unlock(&R.lock);
}

void waiters_leave(struct waiter *w, int64_t lease_end_ms)
{
	struct channel *ch = w->ch;
	struct waiters *ws = ch->ws;
	unsigned lost = 0;	/* wakes this loop took that end here unused */

	LOOP_ASSERT_THREAD(ws->loop);
	if (w->sleeping)
		sleeper_unlink(w);
	if (w->ready) {
		lost += w->claimed;	/* woken, gone before it tried */
		ready_unlink(w);
	}
	ws->nwaiters--;
	atomic_fetch_sub(&R.nwaiters, 1);
	if (w->watch) {
		/* a watcher covers nobody: nothing to hand over */
		ch->nwatch--;
		atomic_fetch_sub(&R.nwatchers, 1);
		if (ch->refs + ch->nwatch == 0)
			channel_free(ch);
		waiter_free(ws, w);
		return;
	}
	/* the lease it saw (its own, once granted) covers the sleepers of the
	 * other loops too: one of them may have tried just before this grant
	 * and be asleep until a queue refresh */
	if (lease_end_ms > 0 && !atomic_load(&R.shutting_down))
		lease_ends_elsewhere(ws, ch->name, lease_end_ms);
	--ch->refs;
	if (ch->permits > ch->refs) {
		if (one_wake(ch))
			lost += ch->permits - ch->refs;	/* banked for a waiter gone */
		ch->permits = ch->refs;
	}
	if (lost)
		hand_on(ws, ch, lost);
	if (ch->refs + ch->nwatch == 0) {
		channel_free(ch);
	} else if (!atomic_load(&R.shutting_down)) {
		keep_covered(ch, lease_end_ms);
	}
	waiter_free(ws, w);
}

/* ----- What other threads post ----- */

/* One delivery to a loop, freed by the loop once handled. */
struct note {
	struct waiters *ws;
	enum note_kind kind;
	int64_t at_ms;			/* NOTE_LEASE_END; NOTE_HANDED_ON: how many */
	uint64_t seq;			/* NOTE_MESSAGE: the subscriber's number */
	size_t len;			/* NOTE_MESSAGE, NOTE_OWNER_TOLD: the payload's */
	char *payload;			/* ... in text, after channel (the owner's id,
					 * for NOTE_OWNER_TOLD) */
	char text[];			/* the channel's name, NUL, the payload */
};

static void lease_ends_here(struct waiters *ws, const char *channel, int64_t at_ms)
{
	struct channel *ch = channel_lookup(ws, channel);

	if (ch && at_ms > 0)
		arm_retry(ch, at_ms);
}

static void channel_confirmed(struct waiters *ws, const char *channel)
{
	struct channel *ch = channel_lookup(ws, channel);

	if (!ch)
		return;		/* its waiters left meanwhile */
	ch->live = true;
	ch->epoch++;
	heard(ch);
	wake_all(ch, WAKE_RETRY);
	wake_watchers(ch, WAKE_RETRY);
}

/* s[0..n) is n >= 1 decimal digits (n at most 18): their value in *v. */
static bool all_digits(const char *s, size_t n, int64_t *v)
{
	int64_t x = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return true;
}

/* A semaphore's channel: the message is how many permits came back (a
 * Redisson client's, how many are free). Wake that many of the oldest
 * sleepers, banking the rest as permits (at most one per joined waiter);
 * "0" or anything else that is no positive number still wakes the oldest
 * to look, as Redisson's listener does. */
static void counted_message(struct channel *ch, const char *payload, size_t len)
{
	int64_t n = 0;

	/* its first 8 characters, which must be digits */
	if (!all_digits(payload, len < 8 ? len : 8, &n) || n == 0)
		n = 1;
	while (n > 0 && !list_empty(&ch->sleepers)) {
		wake(first_of(&ch->sleepers), WAKE_RETRY);
		n--;
	}
	while (n > 0 && ch->permits < ch->refs) {
		ch->permits++;
		n--;
	}
}

/* A fair lock's grant tells the next in line "-<lease ms>" (the new
 * holder's lease, as a negative number: Redisson's listeners act on 0 and 1
 * alone). The lease in *ms; false for any other payload. */
static bool lease_told(const char *payload, size_t len, int64_t *ms)
{
	return len >= 2 && len <= 11 && payload[0] == '-' && all_digits(payload + 1, len - 1, ms);
}

static void channel_message(struct waiters *ws, const char *channel, const char *payload,
			    size_t len, uint64_t seq)
{
	struct channel *ch = channel_lookup(ws, channel);
	int64_t lease_ms;

	if (ch) {
		/* whatever it says, the lock may have changed: watchers look */
		ch->msgs++;
		heard(ch);
		wake_watchers(ch, WAKE_RETRY);
	}
	if (ch && ch->counted) {
		counted_message(ch, payload, len);
	} else if (ch && lease_told(payload, len, &lease_ms)) {
		/* the lock was just granted: look again when that lease ends,
		 * not now, to read it */
		arm_retry(ch, now_ms() + lease_ms + LEASE_TOLD_MARGIN_MS);
	} else if (!ch || len != 1) {
		/* not ours, or not a message to acquirers */
	} else if (payload[0] == '0') {
		bool can = !list_empty(&ch->sleepers) || ch->permits < ch->refs;

		/* one loop's to give, where only one can win (one_wake) */
		if (can && (!one_wake(ch) || claims_take(ch->claims, seq)))
			give_wake(ch, one_wake(ch));
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
}

/* Another loop handed n wakes of channel on (hand_on). */
static void handed_on(struct waiters *ws, const char *channel, unsigned n)
{
	struct channel *ch = channel_lookup(ws, channel);

	while (ch && n > 0 && give_wake(ch, true))
		n--;
}

/* Wake the sleepers of channel that wait for owner. */
static void owner_told_here(struct waiters *ws, const char *channel, const char *owner)
{
	struct channel *ch = channel_lookup(ws, channel);
	struct list_node *n, *next;
	char key[1024];

	if (ch) {
		ch->told[ch->told_next].mark = ++ws->marks;
		ch->told[ch->told_next].owner = owner_hash(owner);
		ch->told_next = (ch->told_next + 1) % TOLD_MARKS;
	}
	if (!ch || (owner_key(key, sizeof(key), channel, owner) && !names_find(&ws->owners, key)))
		return;		/* none of its sleepers waits for owner */
	list_each_safe(&ch->sleepers, n, next) {
		struct waiter *w = list_entry(n, struct waiter, link);

		if (w->owner && !strcmp(w->owner, owner))
			wake(w, WAKE_RETRY);
	}
}

/* channel (NULL: every channel) is no longer live. */
static void on_disconnect(struct waiters *ws, const char *channel)
{
	struct channel *ch;

	if (channel) {
		if ((ch = channel_lookup(ws, channel))) {
			ch->live = false;
			heard(ch);
		}
		return;
	}
	names_each(&ws->channels, e) {
		ch = container_of(e, struct channel, entry);
		ch->live = false;
		heard(ch);
	}
}

static void on_shutdown(struct waiters *ws)
{
	names_each(&ws->channels, e) {
		struct channel *ch = container_of(e, struct channel, entry);

		wake_all(ch, WAKE_SHUTDOWN);
		wake_watchers(ch, WAKE_SHUTDOWN);
	}
}

/* On the loop's thread: handle note and free it. */
static void run_note(struct loop *l, void *data)
{
	struct note *n = data;

	(void)l;
	switch (n->kind) {
	case NOTE_CONFIRMED:
		channel_confirmed(n->ws, n->text);
		break;
	case NOTE_MESSAGE:
		channel_message(n->ws, n->text, n->payload, n->len, n->seq);
		break;
	case NOTE_DISCONNECT:
		on_disconnect(n->ws, n->text[0] ? n->text : NULL);
		break;
	case NOTE_LEASE_END:
		lease_ends_here(n->ws, n->text, n->at_ms);
		break;
	case NOTE_OWNER_TOLD:
		owner_told_here(n->ws, n->text, n->payload);
		break;
	case NOTE_HANDED_ON:
		handed_on(n->ws, n->text, (unsigned)n->at_ms);
		break;
	}
	free(n);
}

/* Post a note about channel (NULL: none) to ws's loop. */
static struct note *note_new(struct waiters *ws, enum note_kind kind, const char *channel,
			     const char *payload, size_t len, int64_t at_ms)
{
	size_t clen = channel ? strlen(channel) : 0;
	struct note *n = xcalloc(1, sizeof(*n) + clen + 1 + len + 1);

	n->ws = ws;
	n->kind = kind;
	n->at_ms = at_ms;
	n->len = len;
	memcpy(n->text, channel ? channel : "", clen + 1);
	n->payload = n->text + clen + 1;
	if (len)
		memcpy(n->payload, payload, len);
	n->payload[len] = '\0';
	return n;
}

static void note_send(struct note *n)
{
	if (loop_post(n->ws->loop, run_note, n) < 0)
		free(n);	/* the loop has stopped: nobody waits there */
}

static void post_note(struct waiters *ws, enum note_kind kind, const char *channel,
		      const char *payload, size_t len, int64_t at_ms)
{
	note_send(note_new(ws, kind, channel, payload, len, at_ms));
}

/* Tell every loop but ws's that the lease of channel's lock ends at
 * at_ms: their sleepers may have last seen an older holder, or none. */
static void lease_ends_elsewhere(struct waiters *ws, const char *channel, int64_t at_ms)
{
	pthread_mutex_lock(&R.lock);
	for (struct waiters *o = R.list; o; o = o->rnext)
		if (o != ws)
			post_note(o, NOTE_LEASE_END, channel, NULL, 0, at_ms);
	pthread_mutex_unlock(&R.lock);
}

void waiters_lease_ends(struct waiters *ws, const char *channel, int64_t at_ms)
{
	LOOP_ASSERT_THREAD(ws->loop);
	if (at_ms <= 0)
		return;
	lease_ends_here(ws, channel, at_ms);
	lease_ends_elsewhere(ws, channel, at_ms);
}

/* Only loops with waiters that have an owner are told (most grants find
 * none: no note, no wake of another thread). A loop with none now may get
 * one the next moment, but not one the grant concerns: a waiter of the
 * same owner is counted when it joins, before the try whose refusal put
 * it to sleep, and that refusal came from Redis before this grant. */
bool waiters_owners_waiting(void)
{
	return atomic_load(&R.owned) > 0;
}

void waiters_owner_told(struct waiters *ws, const char *channel, const char *owner)
{
	LOOP_ASSERT_THREAD(ws->loop);
	if (!waiters_owners_waiting())
		return;
	owner_told_here(ws, channel, owner);
	pthread_mutex_lock(&R.lock);
	for (struct waiters *o = R.list; o; o = o->rnext)
		if (o != ws && atomic_load(&o->owned))
			post_note(o, NOTE_OWNER_TOLD, channel, owner, strlen(owner), 0);
	pthread_mutex_unlock(&R.lock);
}

void waiters_deliver_confirmed(struct waiters *ws, const char *channel)
{
	post_note(ws, NOTE_CONFIRMED, channel, NULL, 0, 0);
}

void waiters_deliver_message(struct waiters *ws, const char *channel, const char *payload,
			     size_t len, uint64_t seq)
{
	struct note *n = note_new(ws, NOTE_MESSAGE, channel, payload, len, 0);

	n->seq = seq;
	note_send(n);
}

void waiters_deliver_disconnect(struct waiters *ws)
{
	post_note(ws, NOTE_DISCONNECT, NULL, NULL, 0, 0);
}

void waiters_deliver_lost(struct waiters *ws, const char *channel)
{
	post_note(ws, NOTE_DISCONNECT, channel, NULL, 0, 0);
}

static void run_shutdown(struct loop *l, void *data)
{
	(void)l;
	on_shutdown(data);
}

bool waiters_shutting_down(void)
{
	return atomic_load(&R.shutting_down);
}

void waiters_shutdown_all(void)
{
	atomic_store(&R.shutting_down, true);
	pthread_mutex_lock(&R.lock);
	for (struct waiters *ws = R.list; ws; ws = ws->rnext)
		loop_post(ws->loop, run_shutdown, ws);	/* -1: stopped, nobody waits */
	pthread_mutex_unlock(&R.lock);
}

unsigned waiters_count_all(void)
{
	return atomic_load(&R.nwaiters);
}

unsigned waiters_count_watchers(void)
{
	return atomic_load(&R.nwatchers);
}

/* ----- Set-up ----- */

struct waiters *waiters_new(struct loop *l, waiters_subscribe_fn subscribe, void *sub)
{
	struct waiters *ws = xcalloc(1, sizeof(*ws));

	ws->loop = l;
	ws->subscribe = subscribe;
	ws->sub = sub;
	names_init(&ws->channels);
	names_init(&ws->owners);
	list_init(&ws->ready);
	loop_task_init(&ws->resume_task, run_resumes, ws);
	pthread_mutex_lock(&R.lock);
	ws->rnext = R.list;
	R.list = ws;
	pthread_mutex_unlock(&R.lock);
	return ws;
}

void waiters_free(struct waiters *ws)
{
	struct waiters **pp;

	if (!ws)
		return;
	pthread_mutex_lock(&R.lock);
	for (pp = &R.list; *pp && *pp != ws; pp = &(*pp)->rnext)
		;
	if (*pp)
		*pp = ws->rnext;
	pthread_mutex_unlock(&R.lock);
	loop_cancel(ws->loop, &ws->resume_task);
	/* every waiter has left, so every channel is gone with it */
	names_release(&ws->channels);
	names_release(&ws->owners);
	free(ws);
}
