/* lock_view.h -- what a lock is now, as one status script read it: its
 * holdings, a fair lock's queue places and the state's index (the view an
 * inspect answers and a watch compares), decoded from the script's reply
 * (lua/lock_status.lua, lua/rw_status.lua), copied, shared and freed.
 * A view never changes once decoded: the watches that share one read
 * share one view (lock_view_ref), and whoever answers them may keep one
 * rendering of it with it (memo), made once for all of them. A view and
 * its references stay on the thread that decoded it. */
#ifndef DLOCKD_LOCK_VIEW_H
#define DLOCKD_LOCK_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/lock/lock_result.h"

struct redisReply;

/* One holding of a lock, as an inspect reads it. */
struct lock_holding {
	char *owner;		/* the owner id (a writer's without ":write") */
	char *principal;	/* the name of the auth token it was made under;
				 * NULL: none (auth off, a Redisson client) */
	int64_t holds;
	int64_t token;		/* its fencing token; 0: unknown (a holding dlockd
				 * did not make: a Redisson client's) */
	int64_t ttl_ms;		/* its lease left (a reader's: its longest live
				 * read hold's); -1: no expiry */
	enum lock_mode side;	/* read-write locks: READ or WRITE; else NONE */
	char *value;		/* the holder value; NULL: none */
	bool foreign;		/* a semaphore's permit a Redisson client holds:
				 * owner is its id in hex */
};

/* A place in a fair lock's queue. */
struct lock_place {
	char *owner;
	int64_t ttl_ms;		/* until its deadline, in Redis' clock: the place
				 * is dropped then unless its waiter refreshes it */
};

/* What a lock is now, as one script read it. */
struct lock_view {
	bool locked;
	enum lock_mode mode;	/* read-write locks */
	int64_t ttl_ms;		/* the lock's lease left; 0 free, -1 no expiry */
	int64_t index;		/* the state's index: the fencing token of its
				 * holding (a read-write lock's writer, else its
				 * newest reader), 1 when that holding has none
				 * known, 0 when free. Any change of holder
				 * changes it */
	int64_t changes_in_ms;	/* the earliest lease end of a holding, in ms
				 * from the read: the state may change by itself
				 * then (expiry publishes nothing); -1: never */
	size_t nholders;
	struct lock_holding *holders;	/* in the hash's order */
	size_t nplaces;
	struct lock_place *places;	/* fair locks: the first live places, in
					 * queue order */
	int64_t queued;		/* fair locks: live places in all */
	bool semaphore;		/* the fields below are set */
	int64_t limit;		/* its permits in all; 0: no semaphore */
	int64_t available;	/* free now (below 0 after the limit was lowered) */
	int64_t waiting;	/* waiters on every dlockd */
	int64_t out;		/* permits out (holders lists the first) */
	bool asked_held;	/* the owner the read asked about holds a permit,
				 * listed or not */
	unsigned shares;	/* references but the first (lock_view_ref) */
	void *memo;		/* a rendering its reader keeps with it, freed by
				 * memo_free with the view; NULL: none. The view
				 * itself never reads it */
	void (*memo_free)(void *memo);
};

/* The view a status script's reply r gives (rw: a read-write lock's,
 * rw_status.lua), the caller's to free with lock_view_free; NULL when r is
 * not shaped as the scripts promise. */
struct lock_view *lock_view_decode(const struct redisReply *r, bool rw);
/* The same of a semaphore's status (sem_status.lua). */
struct lock_view *lock_view_decode_semaphore(const struct redisReply *r);
void lock_view_free(struct lock_view *v);
/* One more reference to v (NULL for NULL): each is given back with
 * lock_view_free, and the last one frees v (and its memo). */
struct lock_view *lock_view_ref(struct lock_view *v);
/* A copy of v without its memo (NULL for NULL), the caller's to free with
 * lock_view_free. */
struct lock_view *lock_view_dup(const struct lock_view *v);
/* The holding of owner on side in v, or NULL. */
const struct lock_holding *lock_view_holding(const struct lock_view *v, const char *owner,
					     enum lock_mode side);

#endif
