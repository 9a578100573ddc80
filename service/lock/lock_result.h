/* lock_result.h -- what a lock operation comes to: the result, the mode
 * found, why it was refused and the state it leaves (struct lock_state).
 * Types only, shared by locks.c (which decodes the scripts' replies into
 * them), the helpers it lends the listing (locks_redis.h) and, through
 * locks.h, every caller. */
#ifndef DLOCKD_LOCK_RESULT_H
#define DLOCKD_LOCK_RESULT_H

#include <stdbool.h>
#include <stdint.h>

enum lock_mode {
	LOCK_MODE_NONE,		/* nobody holds it */
	LOCK_MODE_READ,		/* readers hold it */
	LOCK_MODE_WRITE,	/* a writer holds it */
};

enum lock_result {
	LOCK_OK,		/* done: acquired, released, renewed or read */
	LOCK_HELD,		/* acquire: another owner holds it */
	LOCK_NOT_HELD,		/* release/renew: nobody holds it */
	LOCK_NOT_OWNER,		/* release/renew: another owner holds it; any
				 * operation: the owner holds it under another
				 * principal (why LOCK_WHY_PRINCIPAL) */
	LOCK_WRONG_KIND,	/* the name is in use as another kind of lock */
	LOCK_BACKEND_DOWN,	/* Redis unreachable, or it cannot serve now (busy,
				 * loading, a replica, out of memory, refused):
				 * nothing changed; st->why says which */
	LOCK_SCRIPT_ERROR,	/* the script failed in Redis (a bug, or data it
				 * cannot read): nothing known to have changed;
				 * logged with Redis' words */
	LOCK_UNCONFIRMED,	/* acquire (--redis-sync-replicas): granted, but
				 * too few replicas acknowledged it in time, or
				 * the connection was lost first; st->undone
				 * says whether it was taken back */
	LOCK_TOO_MANY_HOLDS,	/* read acquire: the hold would pass a cap on
				 * read holds (locks_set_read_hold_caps): why
				 * LOCK_WHY_OWNER_HOLDS or LOCK_WHY_LOCK_HOLDS,
				 * others the holds counted; no hold added */
	LOCK_QUEUE_FULL,	/* fair or write acquire that would queue: the
				 * queue (the waiting writers) has st->others
				 * live places, its cap or more
				 * (locks_set_fair_queue_cap); not queued */
	LOCK_LIMIT_MISMATCH,	/* semaphore acquire: the caller's limit is not
				 * the one in force (st->others); nothing written */
	LOCK_RESULT_COUNT
};

/* What stands in the way, when there is more to say than the result: the
 * values are the "why" codes the scripts return (lua/ headers). */
enum lock_why {
	LOCK_WHY_NONE = 0,		/* another owner holds it */
	LOCK_WHY_QUEUE = 1,		/* fair lock free, but st->others queued waiters go first */
	LOCK_WHY_WRITER_WAITING = 2,	/* a writer waits: new readers queue behind it */
	LOCK_WHY_READERS = 3,		/* st->others readers hold it */
	LOCK_WHY_OTHER_READERS = 4,	/* the caller reads, and so do st->others more */
	LOCK_WHY_WRITER = 5,		/* another owner holds the write side */
	LOCK_WHY_NOT_A_LOCK = 6,	/* LOCK_WRONG_KIND: the name holds data that is not
					 * a lock (a hash without TTL, another type, a
					 * fencing counter that is not a number) */
	LOCK_WHY_PRINCIPAL = 7,		/* LOCK_NOT_OWNER: the owner holds it, but under
					 * another auth token's name */
	LOCK_WHY_OWNER_HOLDS = 8,	/* LOCK_TOO_MANY_HOLDS: the owner has st->others
					 * read holds, its cap */
	LOCK_WHY_LOCK_HOLDS = 9,	/* LOCK_TOO_MANY_HOLDS: the lock has st->others
					 * read holds (every reader's), its cap */
	LOCK_WHY_NO_PERMIT = 10,	/* LOCK_HELD: every permit of a semaphore (st->others,
					 * its limit) is out */
};

struct lock_state {
	int64_t token;		/* acquire: fencing token of the holding, the same
				 * for its repeats and re-entries */
	int64_t holds;		/* holds of the owner (after the operation) */
	bool added;		/* acquire granted: a hold was added (a new
				 * holding or a counted re-entry); false for a
				 * repeat */
	int64_t change;		/* acquire granted: the number Redis gave this
				 * change of the holding, which locks_undo()
				 * takes back only while it is the holding's
				 * last; 0: none known */
	bool undone;		/* LOCK_UNCONFIRMED, locks_undo(): the change
				 * was taken back, or the holding is gone --
				 * nothing of it stands; false: it may stand (a
				 * later call changed the holding, or Redis
				 * could not be told) */
	bool gone;		/* locks_undo(), LOCK_UNCONFIRMED undone: the
				 * owner's holding is gone after the undo */
	int64_t ttl_ms;		/* lease left; on LOCK_HELD the holder's; -1 = no expiry */
	int64_t retry_ms;	/* LOCK_HELD: try again after this long even if no
				 * message comes (the holder's lease ends, or the
				 * caller's queue place needs refreshing); 0 = never */
	bool locked;		/* anyone holds it (after the operation) */
	bool queued;		/* LOCK_HELD with queue: the caller holds a place in
				 * a queue; give it back with locks_dequeue() */
	bool refresh_place;	/* LOCK_HELD, queued in a fair lock's queue behind
				 * its head: nothing to retry for (retry_ms is 0:
				 * it is told on its channel when its turn comes),
				 * but the place must be kept alive every
				 * locks_queue_refresh_ms() with locks_fair_refresh() */
	enum lock_mode mode;	/* inspect of a read-write lock */
	enum lock_why why;	/* LOCK_HELD, LOCK_NOT_OWNER, LOCK_WRONG_KIND: why */
	int64_t others;		/* the count why speaks of */
	const char *fault;	/* LOCK_BACKEND_DOWN, LOCK_SCRIPT_ERROR: what went
				 * wrong, for people (static); NULL = Redis could
				 * not be reached. LOCK_NOT_HELD: why, when it is
				 * not the usual "lease ran out or released" */
};
#endif
