/* listing.h -- the locks held, every kind, a page at a time (GET /locks):
 * found by walking Redis' keys with SCAN, on every master of a cluster. */
#ifndef DLOCKD_LISTING_H
#define DLOCKD_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/lock/locks.h"

struct backend;

#define LOCKS_LIST_MAX 1000	/* locks per page, at most */
#define LOCKS_CURSOR_MAX 256	/* a cursor's length, at most */

struct lock_holder {
	const char *owner;
	const char *value;	/* its holder value; NULL: none */
	int64_t holds;
	enum lock_mode side;	/* read-write locks: LOCK_MODE_READ or _WRITE;
				 * else LOCK_MODE_NONE */
};

/* One lock held, as a listing shows it. */
struct lock_entry {
	const char *name;	/* as the API knows it (without --key-prefix) */
	bool rw;		/* a read-write lock; else a lock or a fair lock,
				 * which Redis keeps alike (Redisson's layout) */
	bool semaphore;		/* a semaphore: holders are its permits' owners
				 * (a Redisson permit's id in hex) */
	int64_t limit;		/* ... and its limit */
	enum lock_mode mode;	/* read-write locks: read or write */
	int64_t ttl_ms;		/* lease left (-1: none; a semaphore's longest) */
	size_t nholders;
	const struct lock_holder *holders;
};

/* One page of a listing; valid during the callback only. */
struct lock_page {
	size_t n;
	const struct lock_entry *locks;	/* in no particular order */
	const char *cursor;	/* where the next page starts; NULL: no more */
};

/* A listing's outcome: LOCK_OK with page, or LOCK_BACKEND_DOWN /
 * LOCK_SCRIPT_ERROR with st->fault and page NULL. */
typedef void (*lock_list_fn)(void *ctx, enum lock_result r, const struct lock_state *st,
			     const struct lock_page *page);

/* List the locks held (every kind) whose names start with prefix ("":
 * all), at most limit (1..LOCKS_LIST_MAX) of them, from cursor (NULL or
 * "": the start; else a page's cursor) on. It walks Redis' keys with SCAN
 * (MATCH <key prefix><prefix>*) on b's connection, and a page
 * ends between two of SCAN's batches after a bounded number of calls, so
 * it may hold fewer than limit locks (none, even) and still have a
 * cursor. A lock held from the first page to the last is in one of them
 * (SCAN's promise; one Redis' table was resized under may come twice).
 * Returns -1 (done is not called) when cursor is not one this module
 * made. */
int locks_list(const struct backend *b, const char *prefix, unsigned limit, const char *cursor,
	       lock_list_fn done, void *ctx);

#endif
