/* conn_guard.c -- cuts connections that do not deliver a whole request
 * within --idle-timeout-s of connecting or of their previous answer.
 *
 * MHD's own connection timeout counts inactivity, so a client trickling a
 * header byte a second (slowloris) would hold its connection for ever.
 * Every connection is watched from MHD's "started" notification to its
 * "closed" one; while one of its requests is being handled (or waits for a
 * lock) it is exempt. A timer of the loop fires once a second and shuts
 * the socket of every overdue connection down; MHD then reads the end of
 * the stream and closes the connection the usual way. Everything runs on
 * the loop's thread, MHD's "closed" notification (sent before it closes
 * the descriptor) included, so a number is never cut after its reuse. */
#include "api/conn_guard.h"

#include "service/base/list.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/util.h"

#include <stdlib.h>
#include <sys/socket.h>

#define SWEEP_EVERY_MS 1000

struct guard_watch {
	int fd;
	bool busy;		/* a request is being handled */
	int64_t idle_since;	/* now_ms() of connect or of the last answer; 0 = cut */
	struct list_node link;	/* in the guard's watched connections */
};

struct guard {
	struct loop *loop;
	struct loop_timer sweep;
	struct list_node watched;	/* struct guard_watch */
	int64_t timeout_ms;
	unsigned long cut;
};

static void cut_idle(struct loop *l, struct loop_timer *t)
{
	struct guard *g = container_of(t, struct guard, sweep);
	int64_t now = now_ms();

	for (struct list_node *n = list_first(&g->watched); n; n = list_next(&g->watched, n)) {
		struct guard_watch *w = list_entry(n, struct guard_watch, link);

		if (!w->busy && w->idle_since && now - w->idle_since > g->timeout_ms) {
			shutdown(w->fd, SHUT_RDWR);
			w->idle_since = 0;
			g->cut++;
		}
	}
	loop_timer_set(l, t, now + SWEEP_EVERY_MS);
}

struct guard *guard_new(struct loop *l, unsigned timeout_s)
{
	struct guard *g = xcalloc(1, sizeof(*g));

	g->loop = l;
	g->timeout_ms = (int64_t)timeout_s * 1000;
	list_init(&g->watched);
	loop_timer_init(&g->sweep, cut_idle);
	loop_timer_set(l, &g->sweep, now_ms() + SWEEP_EVERY_MS);
	return g;
}

void guard_free(struct guard *g)
{
	struct list_node *n;

	if (!g)
		return;
	loop_timer_stop(g->loop, &g->sweep);
	if (g->cut)
		log_info("cut %lu connections that were too slow to send a request", g->cut);
	while ((n = list_pop(&g->watched)))	/* none once the daemon stopped */
		free(list_entry(n, struct guard_watch, link));
	free(g);
}

void guard_notify(struct guard *g, struct MHD_Connection *conn, struct guard_watch **slot,
		  enum MHD_ConnectionNotificationCode code)
{
	struct guard_watch *w = *slot;
	const union MHD_ConnectionInfo *ci;

	LOOP_ASSERT_THREAD(g->loop);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			return;
		w = xcalloc(1, sizeof(*w));
		w->fd = ci->connect_fd;
		w->idle_since = now_ms();
		list_append(&g->watched, &w->link);
		*slot = w;
		return;
	}
	if (!w)
		return;
	list_remove(&w->link);
	free(w);
	*slot = NULL;
}

void guard_busy(struct guard_watch *w, bool busy)
{
	if (!w)
		return;
	if (!busy)
		w->idle_since = now_ms();
	w->busy = busy;
}
