/* locks.h -- the lock domain: acquire, release, renew and read locks kept in
 * Redis. Callers pass names and owners; keys, channels and scripts are this
 * module's business. All calls run on the calling thread's Redis connection. */
#ifndef DLOCKD_LOCKS_H
#define DLOCKD_LOCKS_H

#include <stdbool.h>
#include <stdint.h>

enum lock_kind {
	LOCK_KIND_LOCK,		/* reentrant exclusive lock (Redisson RLock) */
	LOCK_KIND_COUNT
};

enum lock_result {
	LOCK_OK,		/* done: acquired, released, renewed or read */
	LOCK_HELD,		/* acquire: another owner holds it */
	LOCK_NOT_HELD,		/* release/renew: nobody holds it */
	LOCK_NOT_OWNER,		/* release/renew: another owner holds it */
	LOCK_WRONG_KIND,	/* the name is in use as another kind of lock */
	LOCK_BACKEND_DOWN,	/* Redis unreachable or answering errors */
};

struct lock_state {
	int64_t token;		/* acquire: fencing token of this acquisition */
	int64_t holds;		/* holds of the owner (after the operation) */
	int64_t ttl_ms;		/* lease left; on LOCK_HELD the holder's; -1 = no expiry */
	bool locked;		/* status: anyone holds it */
};

enum lock_result locks_acquire(enum lock_kind kind, const char *name, const char *owner,
			       int64_t ttl_ms, struct lock_state *out);
/* Release one hold; out->holds is what the owner still holds (0: free). */
enum lock_result locks_release(enum lock_kind kind, const char *name, const char *owner,
			       struct lock_state *out);
/* Free the lock whoever holds it; out->locked tells whether it was held. */
enum lock_result locks_force_release(enum lock_kind kind, const char *name,
				     struct lock_state *out);
enum lock_result locks_renew(enum lock_kind kind, const char *name, const char *owner,
			     int64_t ttl_ms, struct lock_state *out);
/* owner may be NULL; then out->holds is 0. */
enum lock_result locks_status(enum lock_kind kind, const char *name, const char *owner,
			      struct lock_state *out);

/* The pub/sub channel a waiter for (kind, name, owner) listens on; the
 * caller frees it. */
char *locks_wait_channel(enum lock_kind kind, const char *name, const char *owner);

/* Redisson's hash-tag rules (reference §0.1); the caller frees the result.
 * prefix:{name}, or prefix:name when name already contains '{'. */
char *locks_prefix_name(const char *prefix, const char *name);
/* {name}:suffix, or name:suffix when name already contains '{'. */
char *locks_suffix_name(const char *name, const char *suffix);

#endif
