/* conn_guard.c -- cuts connections that do not deliver a whole request
 * within --idle-timeout-s of connecting or of their previous answer.
 *
 * MHD's own connection timeout counts inactivity, so a client trickling a
 * header byte a second (slowloris) would hold its connection for ever.
 * Every connection is watched from MHD's "started" notification to its
 * "closed" one; while one of its requests is being handled (or waits for a
 * lock) it is exempt. A thread wakes once a second and shuts the socket of
 * every overdue connection down; MHD then reads the end of the stream and
 * closes the connection the usual way. The list's mutex is held across
 * shutdown() and taken by the "closed" notification, which MHD sends before
 * it closes the descriptor, so a number is never cut after its reuse. */
#include "conn_guard.h"

#include "../service/log.h"
#include "../service/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* busy and idle_since are set by the connection's MHD thread without the
 * mutex (atomics), which guards only the list. */
struct watch {
	int fd;
	bool busy;		/* a request is being handled */
	int64_t idle_since;	/* now_ms() of connect or of the last answer; 0 = cut */
	struct watch *prev, *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct watch *head;
	int64_t timeout_ms;
	bool running, stopping;
	pthread_t thread;
	unsigned long cut;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

static void *guard_main(void *arg)
{
	struct timespec at;

	(void)arg;
	pthread_mutex_lock(&G.lock);
	while (!G.stopping) {
		int64_t now = now_ms();

		for (struct watch *w = G.head; w; w = w->next) {
			int64_t since = __atomic_load_n(&w->idle_since, __ATOMIC_RELAXED);

			if (!__atomic_load_n(&w->busy, __ATOMIC_RELAXED) && since &&
			    now - since > G.timeout_ms) {
				shutdown(w->fd, SHUT_RDWR);
				__atomic_store_n(&w->idle_since, 0, __ATOMIC_RELAXED);
				G.cut++;
			}
		}
		clock_gettime(CLOCK_REALTIME, &at);
		at.tv_sec += 1;
		pthread_cond_timedwait(&G.wake, &G.lock, &at);
	}
	pthread_mutex_unlock(&G.lock);
	return NULL;
}

int guard_start(unsigned timeout_s)
{
	G.timeout_ms = (int64_t)timeout_s * 1000;
	G.stopping = false;
	if (pthread_create(&G.thread, NULL, guard_main, NULL) != 0)
		return -1;
	G.running = true;
	return 0;
}

void guard_stop(void)
{
	if (!G.running)
		return;
	pthread_mutex_lock(&G.lock);
	G.stopping = true;
	pthread_cond_signal(&G.wake);
	pthread_mutex_unlock(&G.lock);
	pthread_join(G.thread, NULL);
	G.running = false;
	if (G.cut)
		log_info("cut %lu connections that were too slow to send a request", G.cut);
}

void guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		  enum MHD_ConnectionNotificationCode code)
{
	struct watch *w = *socket_context;
	const union MHD_ConnectionInfo *ci;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			return;
		w = xcalloc(1, sizeof(*w));
		w->fd = ci->connect_fd;
		w->idle_since = now_ms();
		pthread_mutex_lock(&G.lock);
		w->next = G.head;
		if (G.head)
			G.head->prev = w;
		G.head = w;
		pthread_mutex_unlock(&G.lock);
		*socket_context = w;
		return;
	}
	if (!w)
		return;
	pthread_mutex_lock(&G.lock);
	if (w->prev)
		w->prev->next = w->next;
	else
		G.head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	pthread_mutex_unlock(&G.lock);
	free(w);
	*socket_context = NULL;
}

void guard_busy(struct MHD_Connection *conn, bool busy)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct watch *w = ci ? ci->socket_context : NULL;

	if (!w)
		return;
	if (!busy)
		__atomic_store_n(&w->idle_since, now_ms(), __ATOMIC_RELAXED);
	__atomic_store_n(&w->busy, busy, __ATOMIC_RELAXED);
}
