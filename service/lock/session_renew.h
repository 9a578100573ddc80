/* session_renew.h -- a session's heartbeat of its holdings: all of them
 * renewed to one lease in as few Redis calls as the topology allows, one
 * script (lua/session_renew.lua) per hash slot that holds any of them --
 * on standalone Redis or Sentinel one for all -- each holding by its
 * kind's own renewal. Only sessions.c uses it; it runs on b's loop. */
#ifndef DLOCKD_SESSION_RENEW_H
#define DLOCKD_SESSION_RENEW_H

#include <stddef.h>
#include <stdint.h>

#include "service/lock/locks.h"

struct backend;

/* One holding to renew. */
struct session_renew_item {
	enum lock_kind kind;
	const char *label;	/* its kind as lua/session_renew.lua names it
				 * (sessions_kind_label) */
	const char *name, *owner;
	int64_t token;		/* its fencing token when it was taken */
	bool gone;		/* out: found gone, not renewed */
};

/* Holdings one script renews, at most: a heartbeat of the most holdings a
 * session may have (--max-session-holdings) is cut into scripts of this
 * many, so no script runs long. On a Cluster, fewer (15: each holding's
 * lock is a declared key, session_renew.c says why); there names in one
 * slot are few anyway. */
#define SESSION_RENEW_CHUNK 32

/* The holdings are renewed, or not: r is LOCK_OK, or the first failure
 * (LOCK_BACKEND_DOWN, LOCK_SCRIPT_ERROR), when some may be renewed and
 * others not; items as given, with gone set. */
typedef void (*session_renew_fn)(void *ctx, enum lock_result r,
				 struct session_renew_item *items, size_t n);

/* Renew the n holdings items to ttl_ms under token name principal, none
 * past ends_ms, the session's lease end in Redis' clock (0: not known); a
 * holding found gone (released, its lease over, taken over, or another
 * holding of its owner: its fencing token is not items[i].token) is not
 * renewed and gets items[i].gone. A renewal only makes a holding's lease
 * longer (a late one never cuts what a later heartbeat gave); once the
 * session's lease is over, none is renewed. ttl_ms 0 renews
 * nothing: gone then marks only the holdings of another fencing token (a
 * session's end releases the others). items, their strings and principal
 * must last until done runs, later, once, on b's loop; n is 1 or more. */
void session_renew_holdings(const struct backend *b, struct session_renew_item *items,
			    size_t n, const char *principal, int64_t ttl_ms, int64_t ends_ms,
			    session_renew_fn done, void *ctx);

#endif
