/* watch.h -- one read of a lock's state, waiting first, if asked, until
 * that state differs from the one the caller last saw (a long poll:
 * GET /locks/{name}?index=T&wait_ms=N). A phase machine in a context its
 * caller owns (an HTTP request embeds it), driven by the outcomes of the
 * status script and the wakes of its watchers (waiters.h, WAITER_WATCH).
 * It knows locks and waiters, not HTTP: it ends with an outcome and calls
 * done; the caller answers from the outcome, then calls watch_end().
 *
 * A state's index (lock_view.index) is the fencing token of its holding,
 * 0 when free. The machine reads the lock; while the index read is the
 * caller's and the wait is not over, it sleeps on the lock's watch
 * channels (locks_watch_channels) and on a timer at the earliest lease
 * end it read (expiry publishes nothing), and reads again when woken.
 * Subscribe, then read: it joins the channels before its first read, and
 * reads again once they are live if they were not, so that no change
 * between a read and a live subscription goes unseen. Every call is made
 * on the caller's event loop thread. */
#ifndef DLOCKD_WATCH_H
#define DLOCKD_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "service/lock/locks.h"

struct backend;
struct waiter;

enum watch_phase {
	WATCH_IDLE,		/* not started (a zeroed context) */
	WATCH_READING,		/* the status script is in flight */
	WATCH_SLEEPING,		/* on its channels and timer, until a wake */
	WATCH_DONE,		/* the outcome is in; done has run */
};

enum watch_outcome {
	WATCH_NO_OUTCOME,	/* not over yet */
	WATCH_READ,		/* view holds the state read last; changed says
				 * whether its index differs from the caller's */
	WATCH_FAILED,		/* result (not LOCK_OK) and state say why */
	WATCH_GONE,		/* the client hung up while it waited */
	WATCH_SHUTDOWN,		/* dlockd is stopping */
};

struct watch {
	/* Inputs: set by the caller before watch_start(), unchanged after. */
	const struct backend *b;	/* the caller's event loop's */
	enum lock_kind kind;
	const char *name;		/* borrowed: must outlive the watch */
	const char *owner;		/* a semaphore's owner asked about (the
					 * view's asked_held), NULL: none;
					 * borrowed as name */
	int64_t index;			/* the index the caller last saw; -1 = none:
					 * read once, never wait */
	int64_t wait_ms;		/* how long to wait for a change; 0 = none */
	int fd;				/* client socket watched for hang-up while
					 * asleep; -1 = none */
	void (*done)(void *ctx);	/* the outcome is in: called once, from the
					 * loop, never from inside watch_start() */
	void *done_ctx;

	/* Outcome: valid once done has run. */
	enum watch_outcome outcome;
	enum lock_result result;	/* the last read's */
	struct lock_state state;	/* the last read's (fault is static) */
	struct lock_view *view;		/* WATCH_READ: the watch's reference to
					 * the view of its read (shared with the
					 * other watches of it), given back by
					 * watch_end() */
	bool changed;			/* index given and view->index differs */

	/* The machine's own. */
	enum watch_phase phase;
	int64_t deadline_ms;		/* monotonic: start + wait_ms */
	int64_t slept_ms;		/* time spent SLEEPING so far (the request's
					 * latency leaves it out) */
	int64_t sleep_since_ms;		/* monotonic: SLEEPING since */
	struct waiter *w[2];		/* its watchers, one per channel */
	int nw;
	bool again;			/* woken while reading: read once more */
	enum watch_outcome stop;	/* woken GONE/SHUTDOWN while reading */
};

/* Start w's first read; w's inputs are set and the rest of it is zeroed.
 * done runs later, once, when w->outcome is in. */
void watch_start(struct watch *w);

/* The request that owns w is over: leave its channels (if a closed
 * connection ends it early) and free its view. w must not be freed while
 * its read is in flight (WATCH_READING): that call's callback still comes.
 * A zeroed, never started w is left alone. */
void watch_end(struct watch *w);

/* Watches waiting now, over all loops (any thread). */
unsigned watch_count_all(void);

#endif
