/* acquire.h -- one acquire of a lock, waiting for it if asked: a phase
 * machine in a context its caller owns (an HTTP request embeds it), driven
 * by the outcomes of the acquire script, the waiter's wakes and the giving
 * back of a queue place. It knows locks and waiters, not HTTP: it ends
 * with an outcome and calls done; the caller answers from the outcome.
 *
 * The caller fills the inputs, calls acquire_start(), and waits (its
 * connection suspended) until done runs; then it reads the outcome, answers,
 * and once the request is over calls acquire_end(), which takes back a grant
 * whose answer did not reach the client. The phases are listed in
 * acquire.c. Every call is made on the caller's event loop thread. */
#ifndef DLOCKD_ACQUIRE_H
#define DLOCKD_ACQUIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "service/lock/locks.h"
#include "service/lock/waiters.h"

struct backend;
struct fair_place;

/* Where the machine is (acquire.c explains each phase and its moves). */
enum acquire_phase {
	ACQUIRE_IDLE,		/* not started (a zeroed context) */
	ACQUIRE_TRYING,		/* the acquire script is in flight */
	ACQUIRE_SLEEPING,	/* joined the lock's channel, asleep until a wake */
	ACQUIRE_GIVING_BACK,	/* refused: returning a queue place before answering */
	ACQUIRE_DONE,		/* the outcome is in; done has run */
};

/* How it ended: set when done runs. */
enum acquire_outcome {
	ACQUIRE_NO_OUTCOME,	/* not over yet */
	ACQUIRE_GRANTED,	/* held: state has token, holds and lease (ttl_ms) */
	ACQUIRE_REFUSED,	/* not held: result (not LOCK_OK) and state say why,
				 * holder_ttl_ms the holder's lease left on LOCK_HELD */
	ACQUIRE_GONE,		/* the client hung up while it waited */
	ACQUIRE_SHUTDOWN,	/* dlockd is stopping */
};

/* The machine's collaborators: the lock domain and the loop's waiters, as
 * locks.h and waiters.h declare them, with the channel and the wait flags
 * of (kind, name, owner) worked out inside join. acquire_ops_real calls the
 * real ones (acquire_ops.c); unit tests inject outcomes through their own. */
struct acquire_ops {
	void (*try_acquire)(const struct backend *b, enum lock_kind kind, const char *name,
			    const char *owner, const char *principal, int64_t ttl_ms,
			    unsigned flags, const struct lock_extras *x, lock_done_fn done,
			    void *ctx);
	void (*dequeue)(const struct backend *b, enum lock_kind kind, const char *name,
			const char *owner, lock_done_fn done, void *ctx);
	void (*undo)(const struct backend *b, enum lock_kind kind, const char *name,
		     const char *owner, int64_t change, lock_done_fn done, void *ctx);
	struct waiter *(*join)(const struct backend *b, enum lock_kind kind, const char *name,
			       const char *owner, int fd, waiter_resume_fn resume, void *ctx,
			       int64_t deadline_ms, bool *confirmed);
	/* before the first try of an acquire that may wait: its mark for
	 * covered, ended by expect_done (waiters_expect_join); NULL: none */
	uint64_t (*expect_join)(const struct backend *b);
	void (*expect_done)(const struct backend *b);
	/* w, just joined a live channel, need not try again
	 * (waiters_join_covered) */
	bool (*covered)(const struct waiter *w, uint64_t mark);
	void (*sleep)(struct waiter *w, int64_t retry_at_ms);
	enum waiter_wake (*wake_reason)(struct waiter *w);
	void (*leave)(struct waiter *w, int64_t lease_end_ms);
	/* a waiter queued behind a fair lock's head (st->refresh_place) has
	 * the loop keep its place while it sleeps (fair_queue.h) */
	struct fair_place *(*keep_place)(const struct backend *b, const char *name,
					 const char *owner, struct waiter *w);
	void (*drop_place)(struct fair_place *p);
	int64_t (*now_ms)(void);	/* monotonic */
	/* owner was told it holds (kind, name): its other waiters retry */
	void (*told)(const struct backend *b, enum lock_kind kind, const char *name,
		     const char *owner);
};

/* The real collaborators (locks_*, waiters_* on b's loop). */
extern const struct acquire_ops acquire_ops_real;

struct acquire {
	/* Inputs: set by the caller before acquire_start(), unchanged after. */
	const struct acquire_ops *ops;	/* &acquire_ops_real, or a test's */
	const struct backend *b;	/* the caller's event loop's */
	enum lock_kind kind;
	const char *name;		/* borrowed: must outlive the acquire */
	const char *owner;		/* borrowed: must outlive the acquire */
	const char *principal;		/* the auth token's name, "" with auth off
					 * (locks.h); borrowed like owner */
	bool reentrant;			/* a holder's acquire adds a hold
					 * (LOCK_REENTRANT) instead of repeating */
	int64_t ttl_ms;			/* the lease asked for */
	struct lock_extras extras;	/* a semaphore's limit, a holder value
					 * (borrowed like owner) */
	int64_t wait_ms;		/* how long to wait for it; 0 = try once */
	int fd;				/* client socket watched for hang-up while
					 * asleep; -1 = none */
	void (*done)(void *ctx);	/* the outcome is in: called once, from the
					 * loop, never from inside acquire_start() */
	void *done_ctx;

	/* Outcome: valid once done has run. */
	enum acquire_outcome outcome;
	enum lock_result result;	/* the last try's */
	struct lock_state state;	/* the last try's (fault is static) */
	int64_t holder_ttl_ms;		/* the holder's lease left at the last
					 * LOCK_HELD; -1 = no expiry */

	/* The machine's own. */
	enum acquire_phase phase;
	int64_t deadline_ms;		/* monotonic: start + wait_ms */
	int64_t slept_ms;		/* time spent SLEEPING so far (the request's
					 * latency leaves it out) */
	int64_t sleep_since_ms;		/* monotonic: SLEEPING since */
	struct waiter *waiter;		/* joined on the lock's channel, or NULL */
	struct fair_place *place;	/* asleep with its queue place kept by the
					 * loop's refresh, or NULL */
	bool queued;			/* holds a queue place (fair lock, waiting
					 * writer) to give back if it leaves unserved */
	bool grant_pending;		/* granted with a hold added (st.added), and
					 * the answer not known to be delivered:
					 * acquire_end() takes that grant back
					 * (a repeat added none: it is left alone) */
	int64_t grant_change;		/* ... its number in Redis (st.change) */
	enum lock_result cancel;	/* acquire_cancel's result; LOCK_OK: none */
	bool expecting;			/* between expect_join and expect_done */
	uint64_t mark;			/* expect_join's, before the first try */
};

/* Start a's first try; a's inputs are set and the rest of it is zeroed.
 * done runs later, once, when a->outcome is in. */
void acquire_start(struct acquire *a);

/* Stop a's wait for a reason of the caller's (the session it acquires
 * for ended): it leaves the lock's channel and gives back its queue
 * place, then done runs with ACQUIRE_REFUSED and result r (not LOCK_OK).
 * A try in flight ends so once it is answered, unless it granted: then
 * the grant is the outcome, as ever. Nothing once the outcome is in. */
void acquire_cancel(struct acquire *a, enum lock_result r);

/* The lease a's tries from now on ask (ttl_ms, and the end it never
 * passes, extras.ends_ms; 0: none): a session's, renewed while a waits.
 * A try in flight keeps what it was sent with. */
void acquire_set_lease(struct acquire *a, int64_t ttl_ms, int64_t ends_ms);

/* The request that owns a is over; delivered says its answer reached the
 * client. A grant that added a hold (a new holding, a counted re-entry)
 * is taken back when its answer was not delivered (nobody learns of it)
 * -- that grant only (locks_undo): if the owner's retry, heartbeat or
 * release changed the holding since, that call's answer stands and
 * nothing is undone; a repeat added none and is left as it is. A grant
 * delivered wakes the owner's other waiters on the lock (ops->told): a
 * client's retry sent while its first request waited is answered the
 * same grant at once. Returns true when a grant is being taken back, for
 * the caller to count and log. A request that
 * ends while a waits (only when its connection is closed under it) stops
 * waiting and gives back its queue place without a word. a must not be
 * freed while a Redis call of it is in flight (TRYING, GIVING_BACK): that
 * call's callback still comes (a suspended connection is not closed, but
 * MHD_stop_daemon closes every one). A zeroed, never started a is left
 * alone. */
bool acquire_end(struct acquire *a, bool delivered);

#endif
