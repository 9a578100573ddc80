/* session_watch.c -- a session's end, heard (session_watch.h). The watch
 * is a watcher (WAITER_WATCH) on the channel dlockd_session:{S}:ended,
 * which lua/session_end.lua publishes on when a session is ended, with
 * its own timer at the session's lease end (expiry publishes nothing).
 * Every wake -- a message, the subscription confirmed, the timer -- reads
 * the session: ended, it says so; alive, it tells the caller the lease
 * (and end) it read and sleeps until a little before that end (the first
 * time; at it if it has not moved since). Reading once the subscription
 * is live covers an end between the caller's read and the subscription. */
#include "service/lock/session_watch.h"

#include "service/base/util.h"
#include "service/lock/backend.h"
#include "service/lock/locks_redis.h"
#include "service/lock/sessions.h"
#include "service/lock/waiters.h"

#include <stdbool.h>
#include <stdlib.h>

/* While Redis does not answer, the session is read again this often. */
#define SW_RETRY_MS 250
/* The timer comes this long after the lease end Redis reported (PTTL and
 * the timers count whole milliseconds). */
#define SW_MARGIN_MS 2
/* ... and, for a session that may be renewed meanwhile, this long before
 * it (at most half the lease left): a grant for it is asked with the end
 * last read, which must not pass while a heartbeat has moved it (the
 * grant would be cut short, or too short to be of use). */
#define SW_EARLY_MS 1000

struct session_watch {
	const struct backend *b;
	char *id;
	struct waiter *w;
	session_ended_fn ended;
	session_renewed_fn renewed;
	void *ctx;
	int64_t ends_at;	/* the lease end last read, in now_ms() */
	bool reading;		/* a read is in flight */
	bool stopped;		/* session_watch_stop ran: free when it lands */
};

char *session_watch_channel(const char *id)
{
	return xasprintf("%sdlockd_session:{%s}:ended", locks_key_prefix(), id);
}

static void sw_free(struct session_watch *sw)
{
	free(sw->id);
	free(sw);
}

/* Sleep until the next read of a session with lease_ms left: a little
 * before that end when it is new (a heartbeat may have moved it by
 * then), at that end when it was read before (it has not: ended, or
 * renewed at the last moment). */
static void sw_sleep(struct session_watch *sw, int64_t lease_ms)
{
	int64_t now = now_ms(), ends = now + lease_ms, early = lease_ms / 2;

	if (early > SW_EARLY_MS)
		early = SW_EARLY_MS;
	if (ends > sw->ends_at + SW_MARGIN_MS && early > 0) {
		sw->ends_at = ends;
		waiters_sleep(sw->w, ends - early);
		return;
	}
	sw->ends_at = ends;
	waiters_sleep(sw->w, ends + SW_MARGIN_MS);
}

static void sw_on_read(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct session_watch *sw = ctx;

	sw->reading = false;
	if (sw->stopped) {
		sw_free(sw);
		return;
	}
	if (r == LOCK_NOT_HELD) {
		waiters_leave(sw->w, 0);
		sw->w = NULL;
		sw->ended(sw->ctx);	/* may stop sw: nothing of it after */
		return;
	}
	if (r != LOCK_OK) {
		waiters_sleep(sw->w, now_ms() + SW_RETRY_MS);
		return;
	}
	sw_sleep(sw, s->lease_ms);
	if (sw->renewed)
		sw->renewed(sw->ctx, s->lease_ms, s->ends_ms);	/* may stop sw: nothing of it after */
}

static void sw_read(struct session_watch *sw)
{
	sw->reading = true;
	sessions_read(sw->b, sw->id, "*", sw_on_read, sw);
}

static void sw_on_wake(void *ctx)
{
	struct session_watch *sw = ctx;

	/* a shutdown wakes it too: the waiting acquire hears of it itself */
	if (waiters_wake_reason(sw->w) != WAKE_SHUTDOWN && !sw->reading)
		sw_read(sw);
}

struct session_watch *session_watch_start(const struct backend *b, const char *id,
					  int64_t lease_ms, session_ended_fn ended,
					  session_renewed_fn renewed, void *ctx)
{
	struct session_watch *sw = xcalloc(1, sizeof(*sw));
	char *channel = session_watch_channel(id);
	bool live;

	*sw = (struct session_watch){ .b = b, .id = xstrdup(id), .ended = ended,
				      .renewed = renewed, .ctx = ctx };
	sw->w = waiters_join(b->waiters, channel, -1, sw_on_wake, sw, 0, WAITER_WATCH, &live);
	free(channel);
	if (live)
		sw_read(sw);	/* an end published before it joined went unheard */
	else
		sw_sleep(sw, lease_ms);
	return sw;
}

void session_watch_stop(struct session_watch *sw)
{
	if (!sw)
		return;
	if (sw->w)
		waiters_leave(sw->w, 0);
	sw->w = NULL;
	if (sw->reading)
		sw->stopped = true;
	else
		sw_free(sw);
}
