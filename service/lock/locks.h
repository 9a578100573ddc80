/* locks.h -- the lock domain: acquire, release, renew and read locks kept in
 * Redis. Callers pass names and owners; keys, channels and scripts are this
 * module's business. Every operation runs on the Redis connection of the
 * backend it is given (the calling event loop's) and answers through a
 * callback, on that loop. */
#ifndef DLOCKD_LOCKS_H
#define DLOCKD_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/lock/lock_result.h"
#include "service/lock/lock_view.h"

struct backend;

enum lock_kind {
	LOCK_KIND_LOCK,		/* exclusive lock (Redisson RLock) */
	LOCK_KIND_FAIR,		/* FIFO fair lock (Redisson RFairLock) */
	LOCK_KIND_READ,		/* read side of a read-write lock (RReadWriteLock) */
	LOCK_KIND_WRITE,	/* write side of a read-write lock */
	LOCK_KIND_SEMAPHORE,	/* permits that expire (RPermitExpirableSemaphore) */
	LOCK_KIND_COUNT
};

/* How a waiter of a kind is woken (flags for waiters_join). */
enum lock_wait_flags {
	LOCK_WAIT_WRITER = 1 << 0,	/* preferred when one waiter is woken */
	LOCK_WAIT_TIMER_ALL = 1 << 1,	/* a lease-end timer wakes every waiter */
	LOCK_WAIT_COUNTED = 1 << 3,	/* a message "<n>" wakes n waiters (permits) */
};

/* A semaphore's limit (its number of permits), at most. */
#define LOCKS_SEMAPHORE_LIMIT_MAX 10000
/* A holder value's size in bytes, at most. */
#define LOCKS_VALUE_MAX 1024

/* What an acquire carries besides owner and lease; NULL: nothing. */
struct lock_extras {
	int64_t limit;		/* a semaphore's: the permits the caller expects
				 * (the semaphore is made with them) */
	const char *value;	/* the holder value to keep with the holding;
				 * NULL: none given (a repeat keeps its own) */
	int64_t place_ms;	/* a semaphore's waiter: how long its place (the
				 * count of who waits) lasts, its wait left; 0:
				 * the queue places' life (--queue-ttl-ms) */
	int64_t ends_ms;	/* the lease never runs past this, in Redis'
				 * clock (a session's end: session_info's
				 * ends_ms); 0: no bound */
};

/* How locks_acquire() acquires. */
enum lock_acquire_flags {
	LOCK_QUEUE = 1 << 0,		/* the caller is going to wait: take (or
					 * refresh) its place in the kind's queue */
	LOCK_REENTRANT = 1 << 1,	/* an owner that holds it already adds a hold
					 * (Redisson's RLock); without, its acquire is a
					 * repeat: same token, same holds, lease
					 * max(remaining, ttl) */
};


/* Set how long a waiter's queue place (fair locks, waiting writers) lives
 * unless it is refreshed: a waiter whose dlockd died stops blocking others
 * after this. Call once before any thread uses the module. */
void locks_configure(int64_t queue_ttl_ms);
/* How often a queue place must be refreshed: a third of its life. */
int64_t locks_queue_refresh_ms(void);
/* Cap the live read holds of a read-write lock: per_owner for one owner,
 * per_lock for all its readers (Redisson's included); a read acquire that
 * would add one past either is refused (LOCK_TOO_MANY_HOLDS). Every call
 * on a read-write lock costs Redis one PTTL per read hold, so these bound
 * what it costs. Call once before any thread uses the module. */
void locks_set_read_hold_caps(int64_t per_owner, int64_t per_lock);
/* Cap the live places of a fair lock's queue, and the live waiting writers
 * of a read-write lock: an acquire that would queue past it is refused
 * (LOCK_QUEUE_FULL). A fair waiter leaving walks the queue in Redis, and
 * every waiting writer retries on its own, so this bounds what one client
 * can pile up. Call once before any thread uses the module. */
void locks_set_fair_queue_cap(int64_t cap);
/* Put every Redis key and channel of lock N under the name <prefix>N, as
 * Redisson's NameMapper does (NULL or "": none); names in results stay N.
 * Call once before any thread uses the module; prefix must outlive it. */
void locks_set_key_prefix(const char *prefix);

/* An operation's outcome; st is valid during the call only. */
typedef void (*lock_done_fn)(void *ctx, enum lock_result r, const struct lock_state *st);

/* The operations below send their script on b's Redis connection and
 * return at once; done is called exactly once, later, on b's loop
 * (LOCK_BACKEND_DOWN when Redis did not answer or cannot serve now,
 * LOCK_SCRIPT_ERROR when the script failed). */

/* principal, in the calls below, is the name of the auth token the
 * request came with ("" with auth off): a holding made under one name is
 * refused to every other (LOCK_NOT_OWNER, why LOCK_WHY_PRINCIPAL),
 * whatever owner id the caller sends. Only the name reaches Redis, never
 * the token. */

/* Take the lock, or repeat or (LOCK_REENTRANT) re-enter the owner's
 * holding of it (enum lock_acquire_flags). With LOCK_QUEUE, a caller that
 * is going to wait takes (or refreshes) its place in the lock's queue
 * where the kind has one; call again at st->retry_ms to keep it (or,
 * st->refresh_place, have locks_fair_refresh() keep it). */
void locks_acquire(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, const char *principal, int64_t ttl_ms, unsigned flags,
		   const struct lock_extras *x, lock_done_fn done, void *ctx);
/* Set semaphore name's limit (made with it when there is none): the free
 * permits move by the difference, the permits out stay out. st->others is
 * the limit that was in force (0: none), st->holds the permits free now. */
void locks_set_limit(const struct backend *b, const char *name, int64_t limit,
		     lock_done_fn done, void *ctx);
/* Take back the acquire (grant, repeat or re-entry) of owner's holding
 * that Redis numbered change (st->change of its LOCK_OK): a grant's
 * holding goes, a re-entry's hold goes, a repeat's or re-entry's longer
 * lease is put back -- but only while change is the holding's last, so a
 * later repeat, re-entry, renewal or release (answered, and standing) is
 * never undone. done hears LOCK_OK with st->undone true when it was taken
 * back or nothing of it stands (the holding is gone), false when a later
 * call changed the holding, and st->gone when the owner's holding is
 * gone after it; or the failure (Redis
 * not reached: it may have been taken back or not), once tries again
 * every 100 ms for 2 s did not reach it either. done may be NULL: then a failure is only
 * logged. */
void locks_undo(const struct backend *b, enum lock_kind kind, const char *name,
		const char *owner, int64_t change, lock_done_fn done, void *ctx);
/* A queued caller (st->queued) stops waiting without the lock: give its
 * place back so nobody waits behind it. done may be NULL: then a failure
 * is only logged (the place goes stale by itself). */
void locks_dequeue(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, lock_done_fn done, void *ctx);
/* locks_dequeue() for n owners of one lock in one script (its cost grows
 * with the queue, not with n: callers send a few hundred at a time);
 * done is called once, for all of them. */
void locks_dequeue_many(const struct backend *b, enum lock_kind kind, const char *name,
			const char *const *owners, size_t n, lock_done_fn done, void *ctx);
/* The outcome of a locks_fair_refresh(): r is LOCK_OK, or the refresh did
 * not happen (LOCK_BACKEND_DOWN, LOCK_SCRIPT_ERROR, LOCK_WRONG_KIND); on
 * LOCK_OK the n owners in retry (valid during the call only, in the order
 * they were given) must try again now with locks_acquire(): their place is
 * gone, or they are the queue's head and were not told. */
typedef void (*lock_refresh_fn)(void *ctx, enum lock_result r, const char *const *retry,
				size_t n);
/* Keep the queue places of the n owners waiting for fair lock name (each
 * queued behind the head, st->refresh_place) for another queue life, in
 * scripts of a few hundred of them each, one after another (so that no
 * script takes long however many wait); dead heads are dropped on the way
 * and the new head told. done is called once, for all of them. */
void locks_fair_refresh(const struct backend *b, const char *name, const char *const *owners,
			size_t n, lock_refresh_fn done, void *ctx);
/* Release one hold; st->holds is what the owner still holds (0: free).
 * done may be NULL: then only a failure is logged. */
void locks_release(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, const char *principal, lock_done_fn done, void *ctx);
/* locks_release(), tried again every 100 ms while Redis cannot be told
 * (LOCK_BACKEND_DOWN: unreachable, refused as late, no reply), for up to
 * patience_ms: the take-back of a grant whose answer must not leave it
 * standing. No wait for replicas. */
void locks_release_patient(const struct backend *b, enum lock_kind kind, const char *name,
			   const char *owner, const char *principal, int64_t patience_ms,
			   lock_done_fn done, void *ctx);
/* Free the lock whoever holds it; st->locked tells whether it was held. */
void locks_force_release(const struct backend *b, enum lock_kind kind, const char *name,
			 lock_done_fn done, void *ctx);
/* Set the lease of owner's holding to ttl_ms, but never past ends_ms (a
 * session's end in Redis' clock, which a relative lease sent over a slow
 * way would pass by the delay; 0: no bound). */
void locks_renew(const struct backend *b, enum lock_kind kind, const char *name,
		 const char *owner, const char *principal, int64_t ttl_ms, int64_t ends_ms,
		 lock_done_fn done, void *ctx);
/* For a call that renews many holdings at once (session_renew.c). */
#define LOCKS_RENEW_KEYS_MAX 4
/* The keys of kind's renewal of lock name, as its renew script names
 * them, into keys (at most LOCKS_RENEW_KEYS_MAX, each the caller's to
 * free); returns how many. */
size_t locks_renew_keys(enum lock_kind kind, const char *name, char **keys);
/* The lease a grant or renewal of pttl ms sent at sent_ms (now_ms()) can
 * count on now: Redis started it no later; 0 when none is left. */
int64_t locks_lease_left(long long pttl, int64_t sent_ms);

/* ----- Inspecting and watching ----- */

/* An inspect's outcome. On LOCK_OK, v is the caller's (free it with
 * lock_view_free) and st has locked, ttl_ms and mode; otherwise v is NULL
 * and st says why (LOCK_WRONG_KIND, LOCK_BACKEND_DOWN, LOCK_SCRIPT_ERROR). */
typedef void (*lock_view_fn)(void *ctx, enum lock_result r, const struct lock_state *st,
			     struct lock_view *v);
/* Read lock name (a read-write lock for LOCK_KIND_READ and _WRITE) in one
 * script: holders with their holds, fencing tokens, token names and
 * leases; a fair lock's queue. A read-write lock's expired read holds are
 * dropped on the way. A semaphore's view says whether owner (NULL: none)
 * holds a permit, listed or not (lock_view.asked_held). */
void locks_inspect(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, lock_view_fn done, void *ctx);

/* The channels a watcher of lock name listens on (both are set, the caller
 * frees them; returns how many): dlockd_lock_state:{N}, on which dlockd's
 * scripts say when a holding started or ended, and the kind's Redisson
 * channel (a fair lock's without an owner: its release speaks there when
 * nobody queues), where Redisson clients' releases are heard and a
 * release script that publishes there anyway says the holding ended. */
int locks_watch_channels(enum lock_kind kind, const char *name, char *channels[2]);


/* ----- Names ----- */

#define LOCKS_NAME_MAX 200	/* a lock name's length, at most */

/* Is c allowed in lock names and owner ids (A-Z a-z 0-9 . _ : -)? */
static inline bool locks_id_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == ':' || c == '-';
}

/* The pub/sub channel a waiter for (kind, name, owner) listens on; the
 * caller frees it. A fair lock's owner NULL: the channel its release
 * speaks on when nobody queues (a plain lock's). */
char *locks_wait_channel(enum lock_kind kind, const char *name, const char *owner);
/* enum lock_wait_flags for waiters of kind. */
unsigned locks_wait_flags(enum lock_kind kind);
/* "lock", "fairlock", "read", "write": for messages and logs. */
const char *locks_kind_label(enum lock_kind kind);

#endif
