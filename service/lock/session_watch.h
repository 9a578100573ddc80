/* session_watch.h -- learn at once that a session ended, for what waits on
 * its behalf (a waiting acquire with session=<id>): by the message its
 * end publishes (lua/session_end.lua), whichever dlockd instance ended
 * it, or at its lease end, when a read tells an ended session from one a
 * heartbeat renewed (then it waits for the new lease end). No polling:
 * one read per wake. Every call is made on b's loop. */
#ifndef DLOCKD_SESSION_WATCH_H
#define DLOCKD_SESSION_WATCH_H

#include <stdint.h>

struct backend;
struct session_watch;

/* Session id has ended (DELETE, or its lease ran out): called at most
 * once, later, from b's loop. */
typedef void (*session_ended_fn)(void *ctx);
/* Session id was read alive: lease_ms left, ending at ends_ms in Redis'
 * clock (0: not known, on a Cluster), so that what waits for it asks
 * its grants with the lease a heartbeat gave since, not the one read
 * before the wait. */
typedef void (*session_renewed_fn)(void *ctx, int64_t lease_ms, int64_t ends_ms);

/* Watch session id, whose lease was read to be lease_ms now; ended(ctx)
 * when it ends, renewed(ctx, ...) (NULL: not told) each time it is read
 * alive. The read comes a little before the lease end it knows, so that a
 * grant is not asked with an end about to pass while a heartbeat moved
 * it; not renewed by then, it is read again at that end. Stop it with
 * session_watch_stop(). */
struct session_watch *session_watch_start(const struct backend *b, const char *id,
					  int64_t lease_ms, session_ended_fn ended,
					  session_renewed_fn renewed, void *ctx);
/* Stop watching (NULL: nothing); ended is not called after. */
void session_watch_stop(struct session_watch *w);

/* The channel a session's end is published on; the caller frees it. */
char *session_watch_channel(const char *id);

#endif
