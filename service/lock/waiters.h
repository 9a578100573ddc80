/* waiters.h -- requests waiting for a lock, on one event loop, keyed by
 * the pub/sub channel that announces its release.
 *
 * Each event loop has its own struct waiters: its channels, its sleepers,
 * their timers (a waiter's deadline, a channel's lease-end retry) armed on
 * the loop, and their clients' sockets watched by the loop for hang-up.
 * Every call is made on that loop's thread, and nothing here takes a
 * mutex, except the few marked "any thread". The subscriber (pubsub.c,
 * its own thread) keeps Redis' subscriptions equal to the union of every
 * loop's channels (it hears of changes through the subscribe function
 * given to waiters_new) and hands each loop the confirmations and
 * messages of its channels through the loop's mailbox
 * (waiters_deliver_*), as Redis' blocked.c hands unblocked clients to
 * beforeSleep. A wake never runs the resume function from inside a
 * waiters_* call: it runs from a task the loop runs before it sleeps.
 *
 * Lock order: the "any thread" calls take the registry's mutex (the list
 * of every loop's struct waiters) and, under it, post to each loop, which
 * takes that loop's mailbox mutex (a leaf): registry -> mailbox. Nothing
 * is called back with either held. */
#ifndef DLOCKD_WAITERS_H
#define DLOCKD_WAITERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct waiters;
struct waiter;

enum waiter_wake {
	WAKE_NONE,	/* not woken since the last waiters_wake_reason() */
	WAKE_RETRY,	/* may be free now: release message, lease expiry,
			 * subscription (re)confirmed: try again */
	WAKE_DEADLINE,	/* its wait is over: try a last time and answer */
	WAKE_GONE,	/* the client hung up: forget it */
	WAKE_SHUTDOWN,	/* dlockd is stopping: answer 503 */
};

typedef void (*waiter_resume_fn)(void *ctx);

/* How a loop's waiters tell the subscriber which channels they need: on
 * the loop's thread, when the loop's first waiter joins channel (want) and
 * when its last leaves (!want). It must not call back into ws. */
typedef void (*waiters_subscribe_fn)(void *sub, struct waiters *ws, const char *channel,
				     bool want);

/* The waiters of loop l (which must outlive them), registered for
 * waiters_lease_ends(), waiters_shutdown_all() and waiters_count_all();
 * subscribe(sub, ...) is how they ask for channels. Free with
 * waiters_free(). */
struct waiters *waiters_new(struct loop *l, waiters_subscribe_fn subscribe, void *sub);
/* Free ws once every waiter has left, its loop has stopped (loop_run()
 * returned: nothing posted to it is pending) and no thread will deliver to
 * it any more (the subscriber is stopped), and before its loop is freed. */
void waiters_free(struct waiters *ws);

/* Flags of a waiter (the same values as enum lock_wait_flags). */
enum waiter_flags {
	WAITER_WRITER = 1 << 0,		/* a "0" wakes the oldest writer before others */
	WAITER_TIMER_ALL = 1 << 1,	/* the channel's retry timer wakes every sleeper */
	WAITER_WATCH = 1 << 2,		/* a watcher (GET ...?wait_ms: waits for the lock
					 * to change, never to take it): woken by every
					 * message and confirmation of its channel and by
					 * its own timer, apart from the acquirers, whose
					 * wakes, permits and retry timer it never takes
					 * or owes; it may have no deadline (0) */
	WAITER_COUNTED = 1 << 3,	/* a semaphore's: a message "<n>" wakes the n
					 * oldest sleepers (n permits came back) */
};

/* Register a waiter on channel, watching client socket fd (-1: none) for
 * hang-up while it sleeps, with its wait ending at deadline_ms (monotonic).
 * The channel is subscribed if it is not yet. *confirmed is true when the
 * subscription is already live, so the caller must retry once before
 * sleeping (a release between its first try and now was not missed only
 * if it tries again) -- unless waiters_join_covered() says nothing can
 * have been missed. Free the waiter with waiters_leave(). */
struct waiter *waiters_join(struct waiters *ws, const char *channel, int fd,
			    waiter_resume_fn resume, void *ctx, int64_t deadline_ms,
			    unsigned flags, bool *confirmed);

/* w waits on behalf of owner (a lock owner id, copied): see
 * waiters_owner_told(). Acquirers only. */
void waiters_set_owner(struct waiter *w, const char *owner);

/* A first try that may be followed by waiters_join() (an acquire that
 * will wait if refused): call before it is sent, for the mark that
 * waiters_join_covered() takes, and end it with waiters_expect_done()
 * once the waiter has joined and has its owner (or will never join).
 * Meanwhile the loop counts as having a waiter with an owner, so that a
 * grant to that owner on another loop is posted here. */
uint64_t waiters_expect_join(struct waiters *ws);
void waiters_expect_done(struct waiters *ws);

/* w (an acquirer with its owner set) joined a channel that has been live
 * since mark (waiters_expect_join(), before its first try was sent) and
 * heard nothing since -- no message, no (re)confirmation, no grant to w's
 * owner: whatever changed the lock after that try is still to be heard,
 * with w joined, so w may sleep without trying again (one script run less
 * for every waiter that finds the lock's channel live). False: try again
 * (the subscription may have missed a release between the try and the
 * join). */
bool waiters_join_covered(const struct waiter *w, uint64_t mark);

/* Sleep until woken; resume(ctx) runs once per wake, later, from the loop.
 * retry_at_ms (monotonic, 0 = none) asks for a retry then even without a
 * message, for when the holder's lease runs out: the channel's sleepers
 * are covered by one retry timer, armed at the earliest such time reported
 * since it last fired, which wakes the oldest sleeper (every sleeper with
 * WAITER_TIMER_ALL).
 * A watcher (WAITER_WATCH) is woken at retry_at_ms by a timer of its own
 * (WAKE_RETRY; WAKE_DEADLINE from its deadline on), and at once if any
 * message or confirmation came on its channel since it last woke or
 * joined. Asleep already, it only moves its timer to retry_at_ms. */
void waiters_sleep(struct waiter *w, int64_t retry_at_ms);

/* Wake w alone to try again now (WAKE_RETRY), if it sleeps: for what
 * learns, apart from its channel, that it must look (its queue place is
 * gone). A waiter already woken keeps that wake. */
void waiters_retry(struct waiter *w);

/* Why w was last woken; resets it to WAKE_NONE. */
enum waiter_wake waiters_wake_reason(struct waiter *w);

/* Forget w (the request is done) and free it; a wake already on its way
 * is cancelled (its resume will not run). lease_end_ms (monotonic, 0 = unknown) is when the lease of
 * the lock's holder ends as w last saw it -- its own lease when w was
 * granted, the holder's when it gave up -- so that the channel's other
 * sleepers are retried by then. */
void waiters_leave(struct waiter *w, int64_t lease_end_ms);

/* The holder of the lock announced on channel has a lease that now ends at
 * at_ms (monotonic): a heartbeat may have shortened it. Sleepers on channel,
 * in this loop and (posted) in every other loop, are retried by then. */
void waiters_lease_ends(struct waiters *ws, const char *channel, int64_t at_ms);

/* owner was granted the lock announced on channel, and told so: the
 * sleepers of channel that wait for the same owner, in this loop and
 * (posted) in every other, retry now. They are a client's second request
 * for what its first one got (a retry sent while the first still waited):
 * the acquire is idempotent, so they are answered the same grant at once
 * instead of at their deadline. */
void waiters_owner_told(struct waiters *ws, const char *channel, const char *owner);
/* Whether any loop has a waiter with an owner: without one,
 * waiters_owner_told has nobody to wake (its caller need not build the
 * channel's name). Any thread. */
bool waiters_owners_waiting(void);

/* ----- Any thread ----- */

/* Wake every sleeper of every loop with WAKE_SHUTDOWN; later sleeps wake
 * at once. */
void waiters_shutdown_all(void);
/* waiters_shutdown_all() was called: dlockd is stopping. */
bool waiters_shutting_down(void);
/* Joined waiters over all loops, sleeping or not, watchers included. */
unsigned waiters_count_all(void);
/* ... of which watchers (WAITER_WATCH). */
unsigned waiters_count_watchers(void);

/* ----- Any thread (the subscriber's): each is posted to ws's loop, and
 * dropped if that loop has stopped ----- */

/* The subscription of channel is live (again): its sleepers retry. */
void waiters_deliver_confirmed(struct waiters *ws, const char *channel);
/* A message: "0" wakes the oldest sleeper, "1" every sleeper; but where a
 * writer sleeps, both wake just the oldest writer. "-<ms>" (a fair lock's
 * next in line told the lease of the holder that just took it) wakes
 * nobody: the channel's sleepers are retried when that lease ends. On a plain lock's
 * channel a "0" wakes one waiter over all loops: the loops it is delivered
 * to with the same seq (the subscriber's number for it) share it, and the
 * first to handle it that has a waiter takes it. Any message wakes every
 * sleeping watcher of the channel. */
void waiters_deliver_message(struct waiters *ws, const char *channel, const char *payload,
			     size_t len, uint64_t seq);
/* The subscriber connection was lost: no channel is live until confirmed
 * again. */
void waiters_deliver_disconnect(struct waiters *ws);
/* The subscription of channel alone was lost (a cluster node's
 * connection, or the node gave the slot away): it is not live until
 * confirmed again. */
void waiters_deliver_lost(struct waiters *ws, const char *channel);

#endif
