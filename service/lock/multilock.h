/* multilock.h -- take several locks for a session, all or none: a phase
 * machine in a context its caller owns (an HTTP request embeds it). It
 * knows locks, the acquire machine and sessions, not HTTP: it ends with
 * an outcome and calls done; the caller answers from the outcome and,
 * once the request is over, calls multilock_end().
 *
 * The entries are taken in one global order (kind, then name: the caller
 * sorts them), each without waiting. At the first refusal, what this call
 * took is taken back (released: only the holdings it added; one the
 * session had before stays), and the machine waits for the lock in the
 * way with the acquire machine (subscribe, then retry: the same waiting as
 * any PUT) while it holds nothing; once that one is granted it tries the
 * whole set again. So it never waits while holding, and two calls over
 * overlapping sets cannot deadlock. Every grant's lease is the session's
 * lease left, read again before each pass; once all are held, each is
 * noted in the session. Every call is made on the caller's loop. */
#ifndef DLOCKD_MULTILOCK_H
#define DLOCKD_MULTILOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "service/lock/acquire.h"
#include "service/base/loop.h"
#include "service/lock/sessions.h"

struct backend;

/* One lock of the set. */
/* An entry's take-back: none, tried (again while Redis could not be
 * told), or given up on (a script failure: trying again will not help);
 * MULTI_UNDO_FORGET: released, its removal from the session's record
 * still to be told to Redis (again, as a release). */
enum { MULTI_UNDO_NONE, MULTI_UNDO_RETRY, MULTI_UNDO_STUCK, MULTI_UNDO_REPEAT,
       MULTI_UNDO_FORGET };

struct multilock_entry {
	enum lock_kind kind;
	const char *name;		/* borrowed: must outlive the call */
	int64_t limit;			/* a semaphore's */
	/* the machine's */
	bool taken;			/* this call added the holding (or may have:
					 * its acquire had no answer) */
	bool had;			/* the session listed it at the last read */
	int64_t change;			/* taken: the grant's change number, which
					 * the take-back undoes (locks_undo); 0:
					 * unknown or stale, released instead */
	int64_t repeat;			/* held by the session already: the number
					 * of this call's repeat of it, which the
					 * take-back undoes too (0: none) */
	unsigned char undo;		/* MULTI_UNDO_*: being taken back */
	struct multilock *m;		/* while undo: the machine */
	int64_t token;			/* held: its fencing token */
	int64_t ttl_ms;			/* held: its lease left */
};

enum multilock_outcome {
	MULTI_NO_OUTCOME,
	MULTI_GRANTED,		/* every entry held and noted in the session */
	MULTI_REFUSED,		/* none taken by this call: result and state of
				 * the entry blocker say why (LOCK_HELD: still in
				 * the way at the deadline) */
	MULTI_SESSION,		/* the session refused (session_result:
				 * LOCK_NOT_HELD no such session,
				 * LOCK_TOO_MANY_HOLDS past its cap,
				 * LOCK_NOT_OWNER entry blocker is held by the
				 * session's id outside the session, or a
				 * failure): none taken by this call */
	MULTI_STANDING,		/* what this call took could not all be taken
				 * back (Redis could not be told, for
				 * MULTILOCK_UNDO_MS): standing entries (undo
				 * not MULTI_UNDO_NONE) may hold to their
				 * lease end, at most the session's; each was
				 * recorded in the session (if Redis took
				 * that), so the session's end frees it;
				 * undo_fault says why, NULL no reply */
	MULTI_GONE,		/* the client hung up while it waited */
	MULTI_SHUTDOWN,		/* dlockd is stopping */
};

struct multilock {
	/* Inputs: set before multilock_start(), unchanged after. */
	const struct backend *b;
	const char *session;		/* the session id; the owner of every entry */
	const char *principal;		/* the auth token's name, "" with auth off */
	int64_t holdings_cap;		/* the most holdings the session may have */
	struct multilock_entry *e;	/* sorted by (kind, name), no duplicates */
	unsigned n;
	int64_t wait_ms;
	int fd;				/* client socket watched while waiting; -1 none */
	void (*done)(void *ctx);
	void *done_ctx;

	/* Outcome: valid once done has run. */
	enum multilock_outcome outcome;
	unsigned blocker;		/* MULTI_REFUSED: the entry in the way */
	enum lock_result result;
	struct lock_state state;
	int64_t holder_ttl_ms;		/* MULTI_REFUSED with LOCK_HELD: the holder's
					 * lease left, -1 none */
	enum lock_result session_result;	/* MULTI_SESSION */
	int64_t session_count;		/* LOCK_TOO_MANY_HOLDS: the holdings counted */
	unsigned standing;		/* MULTI_STANDING: how many entries */
	const char *undo_fault;		/* MULTI_STANDING: the last failure (static) */

	/* The machine's own. */
	int phase;
	bool session_ended;	/* multilock_session_ended() was called */
	int64_t deadline_ms;
	int64_t left_ms;		/* the session's lease left at this pass */
	int64_t ends_ms;		/* ... and its end, Redis' clock (0: unknown) */
	unsigned i;			/* the entry being tried */
	unsigned pending;		/* undos or notes in flight */
	enum multilock_outcome after;	/* what to end with once taken back */
	struct acquire acq;		/* waiting for the blocker */
	bool acq_used;
	struct loop_task task;		/* goes on after the acquire machine's done */
	struct loop_timer undo_timer;	/* the next try of a take-back */
	int64_t undo_until_ms;		/* no try of a take-back starts after this */
	int64_t undo_pause_ms;		/* before the next try */
};

/* How long a take-back Redis could not be told of is tried again. */
#define MULTILOCK_UNDO_MS 10000

/* Start m; its inputs are set, the rest zeroed. done runs later, once. */
void multilock_start(struct multilock *m);
/* m's session has ended (heard by a session watch): a wait stops at once
 * and m finishes with MULTI_SESSION, session_result LOCK_NOT_HELD; a
 * pass under way finds the session gone by itself. */
void multilock_session_ended(struct multilock *m);
/* m's session was read alive (a session watch): lease_ms left, ending at
 * ends_ms in Redis' clock (0: unknown). What m asks from now on (the
 * lock it waits for, the takes of its next pass) is asked with them. */
void multilock_session_renewed(struct multilock *m, int64_t lease_ms, int64_t ends_ms);
/* The request that owns m is over; delivered says its answer reached the
 * client. A grant not delivered is taken back (what this call took; the
 * session forgets it at its next heartbeat). A zeroed m is left alone. */
void multilock_end(struct multilock *m, bool delivered);

#endif
