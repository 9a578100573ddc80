/* waiters.h -- requests waiting for a lock, keyed by the pub/sub channel
 * that announces its release. A waiter is joined once per request and then
 * sleeps and wakes as often as it must retry; every wake calls its resume
 * function exactly once. Thread-safe: called from the event loops and from the
 * pubsub thread. */
#ifndef DLOCKD_WAITERS_H
#define DLOCKD_WAITERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Set up; notify is called (without locks held) whenever the pubsub thread
 * has subscription changes to send or an earlier timer to watch. */
int waiters_init(void (*notify)(void));
/* Free everything; only once no thread uses the module any more. */
void waiters_release(void);

/* ----- Called for a request ----- */

/* Flags of a waiter (the same values as enum lock_wait_flags). */
enum waiter_flags {
	WAITER_WRITER = 1 << 0,		/* a "0" wakes the oldest writer before others */
	WAITER_TIMER_ALL = 1 << 1,	/* the channel's retry timer wakes every sleeper */
};

/* Register a waiter on channel, watching client socket fd (-1: none) for
 * hang-up while it sleeps, with its wait ending at deadline_ms (monotonic).
 * The channel is subscribed if it is not yet. *confirmed is true when the
 * subscription is already live, so the caller must retry once before
 * sleeping (a release between its first try and now was not missed only if
 * it tries again). Free the waiter with waiters_leave(). */
struct waiter *waiters_join(const char *channel, int fd, waiter_resume_fn resume,
			    void *ctx, int64_t deadline_ms, unsigned flags, bool *confirmed);

/* Sleep until woken; the caller has suspended its connection, because
 * resume may run at once, from this thread or another. retry_at_ms
 * (monotonic, 0 = none) asks for a retry then even without a message, for
 * when the holder's lease runs out: the channel's sleepers are covered by
 * one retry timer, armed at the earliest such time reported since it last
 * fired, which wakes the oldest sleeper (every sleeper with
 * WAITER_TIMER_ALL). */
void waiters_sleep(struct waiter *w, int64_t retry_at_ms);

/* Why w was last woken; resets it to WAKE_NONE. */
enum waiter_wake waiters_wake_reason(struct waiter *w);

/* Forget w (the request is done) and free it. lease_end_ms (monotonic,
 * 0 = unknown) is when the lease of the lock's holder ends as w last saw
 * it -- its own lease when w was granted, the holder's when it gave up --
 * so that the channel's other sleepers are retried by then: a waiter that
 * won and dies holding the lock publishes nothing. */
void waiters_leave(struct waiter *w, int64_t lease_end_ms);

/* The holder of the lock announced on channel has a lease that now ends at
 * at_ms (monotonic): a heartbeat may have shortened it. Its sleepers are
 * retried by then; nothing happens when nobody waits on channel. */
void waiters_lease_ends(const char *channel, int64_t at_ms);

/* Wake every sleeper with WAKE_SHUTDOWN; later sleeps wake at once. */
void waiters_shutdown(void);
/* Joined waiters, sleeping or not. */
unsigned waiters_count(void);

/* ----- Called by the pubsub thread ----- */

/* Next subscription change to send: returns 1 and sets *name (caller frees)
 * and *subscribe, or 0 when there is none. */
int waiters_next_change(char **name, bool *subscribe);
void waiters_on_subscribed(const char *channel);
void waiters_on_unsubscribed(const char *channel);
/* A message: "0" wakes the oldest sleeper, "1" every sleeper; but where a
 * writer sleeps, both wake just the oldest writer ("1": readers queue
 * behind a waiting writer, so nobody else could win). */
void waiters_on_message(const char *channel, const char *payload, size_t len);
/* The subscriber connection was lost: every channel must be subscribed
 * again, and its sleepers retried once it is. */
void waiters_on_disconnect(void);
/* Milliseconds until the next timer is due; -1 when none is armed. */
int waiters_next_timeout_ms(void);
/* Fire the due timers: deadlines, lease-expiry retries. */
void waiters_run_timers(void);
/* An epoll fd that turns readable when a sleeping client hangs up;
 * waiters_check_hangups() then wakes those waiters. */
int waiters_hangup_fd(void);
void waiters_check_hangups(void);

#endif
