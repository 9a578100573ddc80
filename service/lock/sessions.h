/* sessions.h -- sessions: one lease and one heartbeat for many holdings,
 * kept in Redis (any dlockd instance serves any session). A session is
 * made with a lease; a holding taken for it lives as long as it does
 * (the handler takes it with the session's lease left, then records it
 * with sessions_record); a heartbeat renews the session and every holding
 * it records; ending it releases them all. Keys are this module's
 * business. Every call answers through its callback, on b's loop. */
#ifndef DLOCKD_SESSIONS_H
#define DLOCKD_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/lock/locks.h"

struct backend;

/* A session id: 32 hex digits (128 random bits). */
#define SESSIONS_ID_LEN 32

/* Is s (len bytes) shaped as a session id: SESSIONS_ID_LEN lowercase hex
 * digits? */
bool sessions_id_shaped(const char *s, size_t len);

/* One holding a session records. */
struct session_holding {
	enum lock_kind kind;
	const char *name;
	const char *owner;
	int64_t token;		/* its fencing token when it was taken */
	bool gone;		/* heartbeat: found released or taken over, and
				 * dropped from the session; end: its owner took
				 * it again outside the session: not released */
	bool repeat;		/* record: the grant added no hold (the owner's
				 * repeat), so it must be the session's already */
};

/* What a session is; valid during the callback only. */
struct session_info {
	int64_t ttl_ms;		/* the lease every heartbeat renews to */
	int64_t lease_ms;	/* its lease left */
	int64_t created_ms;	/* Redis' clock when it was made */
	int64_t ends_ms;	/* read, and a record that adds: when its lease
				 * ends, in Redis' clock; else 0, and 0 on a
				 * Redis Cluster (its nodes' clocks are not
				 * compared) */
	const char *value, *name, *creator;
	struct session_holding *holdings;
	size_t n;
	int64_t cap_n;		/* sessions_record refused by the cap: holdings */
	const char *fault;	/* LOCK_BACKEND_DOWN: Redis' reason (static), or
				 * NULL when it did not answer */
};

/* r: LOCK_OK; LOCK_NOT_HELD, no such session (never made, ended, or
 * another token name's: not told apart); LOCK_TOO_MANY_HOLDS,
 * sessions_create or sessions_record past its cap (s->cap_n); LOCK_BACKEND_DOWN,
 * LOCK_SCRIPT_ERROR. s is NULL unless r is LOCK_OK, the cap or
 * LOCK_BACKEND_DOWN (s->fault). */
typedef void (*session_fn)(void *ctx, enum lock_result r, const struct session_info *s);

/* The label a holding's kind has in the API: "lock", "fair", "read",
 * "write", "semaphore". */
const char *sessions_kind_label(enum lock_kind kind);
/* The kind whose label is label, into *kind; -1 when none is. */
int sessions_kind_parse(const char *label, enum lock_kind *kind);

/* Make session id (SESSIONS_ID_LEN hex digits) living ttl_ms, created
 * under token name principal ("": auth off); value and name may be "".
 * A token name with cap sessions open already is refused
 * (LOCK_TOO_MANY_HOLDS, s->cap_n: how many it has). */
void sessions_create(const struct backend *b, const char *id, const char *principal,
		     int64_t ttl_ms, const char *value, const char *name, int64_t cap,
		     session_fn done, void *ctx);
/* Read session id for principal ("*": any -- auth off or an admin). */
void sessions_read(const struct backend *b, const char *id, const char *principal,
		   session_fn done, void *ctx);
/* Record holding h of session id (at most cap holdings); s->lease_ms is
 * the session's lease left. LOCK_NOT_HELD: it ended meanwhile (the
 * caller releases the holding). LOCK_NOT_OWNER: h->repeat, and the
 * session has no such holding: its owner holds it outside the session
 * (the caller releases nothing: the holding is not this session's). */
void sessions_record(const struct backend *b, const char *id, const struct session_holding *h,
		     int64_t cap, session_fn done, void *ctx);
/* Drop holding h from session id's record: its holding was given back.
 * done may be NULL (nobody hears). */
void sessions_forget(const struct backend *b, const char *id, const struct session_holding *h,
		     session_fn done, void *ctx);
/* Heartbeat: renew session id (principal as in sessions_read) and then
 * every holding it records, with the session's ttl, in one script per
 * hash slot that holds any (session_renew.h); a holding found gone --
 * released, its lease over, taken over, or its owner's holding now
 * another, with another fencing token -- is not renewed and is dropped
 * from it (s->holdings[i].gone). */
void sessions_heartbeat(const struct backend *b, const char *id, const char *principal,
			session_fn done, void *ctx);
/* End session id (principal as in sessions_read): delete it and release
 * every holding it recorded (whose release publishes: waiters are served
 * at once), but one its owner has taken again outside the session (its
 * fencing token changed: s->holdings[i].gone). s->holdings are what it
 * held. */
void sessions_end(const struct backend *b, const char *id, const char *principal,
		  session_fn done, void *ctx);

/* One open session of an admin's listing; valid during the callback only. */
struct session_entry {
	const char *principal;	/* the token name it was made under ("": auth off) */
	const char *id;
	int64_t lease_ms;	/* its lease left */
};

/* r: LOCK_OK (v: n of them, all: every open session), LOCK_BACKEND_DOWN,
 * LOCK_SCRIPT_ERROR. */
typedef void (*session_list_fn)(void *ctx, enum lock_result r, int64_t all,
				const struct session_entry *v, size_t n);
/* Every open session, of every token name (for an admin): up to max of
 * them, soonest lease end first per token name. */
void sessions_list(const struct backend *b, int64_t max, session_list_fn done, void *ctx);

#endif
