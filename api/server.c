/* server.c -- the event loops, and the life of a request on them.
 *
 * Each of --threads loop threads runs its own libmicrohttpd daemon (all
 * accept on one listening socket) in MHD's external epoll mode, together
 * with its own pipelined Redis connection (redis_conn.c), in one epoll
 * set: a request's Redis call is queued without blocking, the connection
 * is suspended, and the loop writes every queued call in one go; when the
 * replies come in, their connections are resumed and answered in the same
 * turn of the loop. Nothing blocks a loop but epoll_wait().
 *
 * The access handler makes one struct request per request on the first
 * call, collects the body (capped: 413 past max_body_bytes), then routes
 * it. A request that sent a Redis call re-enters with rq->next set; a
 * waiting request re-enters with rq->waiter set. The completed callback
 * frees the request, after handle_lock_completed() had its say. */
#include "server.h"

#include "conn_guard.h"
#include "handlers.h"
#include "reply.h"
#include "request.h"
#include "routes.h"
#include "../service/auth.h"
#include "../service/log.h"
#include "../service/metrics.h"
#include "../service/util.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../service/redis_conn.h"

/* How long a stopping loop waits for its Redis calls to be answered. */
#define STOP_WAIT_MS 5000

enum loop_phase { LOOP_RUN, LOOP_QUIESCE, LOOP_QUIESCED, LOOP_STOP };

struct loop {
	struct MHD_Daemon *daemon;
	int epfd;		/* MHD's epoll fd, the Redis socket, kick */
	int kick;		/* eventfd: the phase changed */
	int redis_fd;		/* registered in epfd, or -1 */
	unsigned redis_events;
	int phase;		/* enum loop_phase, set by the main thread */
	pthread_t thread;
	bool started;
};

static struct loop *loops;
static unsigned nloops;
static MHD_socket listen_fd = MHD_INVALID_SOCKET;

/* The loop this thread runs. */
static __thread struct loop *current;
/* Requests of this loop with a Redis call in flight (rq->next set). */
static __thread unsigned awaiting;
/* A connection of this loop was resumed from its own thread: MHD must run
 * again before the loop sleeps (MHD does not wake our epoll_wait itself). */
static __thread bool rerun;
/* This loop is stopping: new lock requests get 503. */
static __thread bool stopping;

/* ----- Request life ----- */

static struct request *request_create(struct MHD_Connection *conn, const struct config *cfg,
				      const char *url, const char *method)
{
	struct request *rq = xcalloc(1, sizeof(*rq));
	const char *cl;

	rq->conn = conn;
	rq->loop = current;
	rq->cfg = cfg;
	rq->url = url;
	rq->method_name = method;
	rq->method = routes_method(method);
	rq->started_us = now_us();
	rq->route_status = routes_match(url, rq->method, &rq->route);
	if (rq->route.name) {
		rq->name = xmalloc(rq->route.name_len + 1);
		memcpy(rq->name, rq->route.name, rq->route.name_len);
		rq->name[rq->route.name_len] = '\0';
	}
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > cfg->max_body_bytes)
		rq->body_too_large = true;
	return rq;
}

static void request_free(struct request *rq)
{
	free(rq->name);
	free(rq->body);
	free(rq);
}

static void body_append(struct request *rq, const char *data, size_t len)
{
	if (rq->body_too_large)
		return;
	if (rq->body_len + len > rq->cfg->max_body_bytes) {
		rq->body_too_large = true;
		free(rq->body);
		rq->body = NULL;
		rq->body_len = 0;
		return;
	}
	rq->body = xrealloc(rq->body, rq->body_len + len + 1);
	memcpy(rq->body + rq->body_len, data, len);
	rq->body_len += len;
	rq->body[rq->body_len] = '\0';
}

/* With --auth-file, a lock request needs "Authorization: Bearer <token>"
 * whose prefix covers the name; 0, or -1 after the 401/403 is queued. */
static int auth_or_reply(struct request *rq)
{
	const char *h;
	enum auth_role role = AUTH_CLIENT;

	rq->admin = true;
	if (!auth_enabled())
		return 0;
	rq->admin = false;
	h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer ", 7)) {
		reply_error(rq, ERR_UNAUTHORIZED, NULL,
			    "this dlockd needs 'Authorization: Bearer <token>'");
		return -1;
	}
	h += 7;
	while (*h == ' ')
		h++;
	switch (auth_check(h, strlen(h), rq->name, &role)) {
	case AUTH_UNKNOWN:
		reply_error(rq, ERR_UNAUTHORIZED, NULL, "the bearer token is not known");
		return -1;
	case AUTH_OUT_OF_SCOPE:
		reply_error(rq, ERR_FORBIDDEN, NULL,
			    "the bearer token may not touch lock '%s'", rq->name);
		return -1;
	case AUTH_OK:
		break;
	}
	rq->admin = role == AUTH_ADMIN;
	return 0;
}

/* The whole request is in: check it and hand it to its handler. */
static enum MHD_Result dispatch(struct request *rq)
{
	char why[320];

	switch (rq->route_status) {
	case ROUTE_NOT_FOUND:
		return reply_error(rq, ERR_NOT_FOUND, NULL, "no such resource: %.200s", rq->url);
	case ROUTE_METHOD_NOT_ALLOWED:
		return reply_error(rq, ERR_METHOD_NOT_ALLOWED, NULL,
				   "method %.16s is not allowed here; use %s", rq->method_name,
				   rq->route.allow);
	case ROUTE_OK:
		break;
	}
	if (rq->body_too_large)
		return reply_error(rq, ERR_BODY_TOO_LARGE, NULL,
				   "request body is larger than %zu bytes", rq->cfg->max_body_bytes);
	if (!rq->name)
		return handle_health(rq);
	if (request_check_name(rq->name, strlen(rq->name), why, sizeof(why)) < 0 ||
	    strlen(rq->name) != rq->route.name_len)
		return reply_error(rq, ERR_INVALID_NAME, NULL, "%s",
				   why[0] ? why : "name may not contain NUL bytes");
	if (auth_or_reply(rq) < 0)
		return MHD_YES;
	if (stopping)	/* its Redis call could outlive the loop */
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "dlockd is shutting down; retry on another instance");
	return handle_lock(rq);
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
				      const char *method, const char *version,
				      const char *upload_data, size_t *upload_data_size,
				      void **req_cls)
{
	struct request *rq = *req_cls;
	enum MHD_Result ret;

	(void)version;
	if (!rq) {
		*req_cls = request_create(conn, cls, url, method);
		return MHD_YES;
	}
	if (*upload_data_size) {
		body_append(rq, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->next) {
		enum MHD_Result (*next)(struct request *) = rq->next;

		rq->next = NULL;
		awaiting--;
		ret = next(rq);
	} else if (rq->waiter) {
		ret = handle_lock_resumed(rq);
	} else {
		guard_busy(conn, true);
		ret = dispatch(rq);
	}
	if (rq->next)
		awaiting++;
	return ret;
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *req_cls;

	(void)cls;
	guard_busy(conn, false);
	if (!rq)
		return;
	if (rq->next)
		awaiting--;	/* the outcome came, but the client left first */
	handle_lock_completed(rq, toe);
	log_access(&(struct log_access){
		.method = rq->method_name,
		.path = rq->url,
		.status = rq->status,
		.duration_ms = (double)(now_us() - rq->started_us) / 1000.0,
		.kind = rq->name ? locks_kind_label(rq->route.kind) : NULL,
		.lock = rq->name,
		.owner = rq->params.owner[0] ? rq->params.owner : NULL,
		.delivered = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK,
	});
	request_free(rq);
	*req_cls = NULL;
}

/* ----- MHD callbacks ----- */

/* MHD's unescaper for the path and the query (routes_unescape). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return routes_unescape(s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_warn("http: %s", msg);
}

/* ----- The loops ----- */

static void epoll_set(int epfd, int op, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (epoll_ctl(epfd, op, fd, &ev) < 0 && op != EPOLL_CTL_DEL)
		log_error("epoll_ctl(%d): %s", fd, strerror(errno));
}

/* Watch the Redis socket for what the connection wants now. */
static void watch_redis(struct loop *l)
{
	unsigned want;
	int fd = redis_conn_fd(&want);
	uint32_t ev = (want & REDIS_CONN_READ ? EPOLLIN : 0) | (want & REDIS_CONN_WRITE ? EPOLLOUT : 0);

	if (fd == l->redis_fd && ev == l->redis_events)
		return;
	if (l->redis_fd >= 0 && fd != l->redis_fd)
		epoll_set(l->epfd, EPOLL_CTL_DEL, l->redis_fd, 0);	/* closed: gone already */
	if (fd >= 0)
		epoll_set(l->epfd, fd == l->redis_fd ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, ev);
	l->redis_fd = fd;
	l->redis_events = ev;
}

/* Milliseconds epoll_wait may sleep: until MHD's or Redis' next timeout. */
static int loop_timeout(struct loop *l)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	int64_t ms = redis_conn_timeout_ms(now_ms());

	if (rerun)
		return 0;
	if (l->daemon && MHD_get_timeout(l->daemon, &mhd_ms) == MHD_YES &&
	    (ms < 0 || (int64_t)mhd_ms < ms))
		ms = (int64_t)mhd_ms;
	if (ms < 0 || ms > 1000)
		ms = 1000;	/* the phase is also looked at now and then */
	return (int)ms;
}

/* One turn: wait, read replies (resuming their requests), let MHD serve
 * its connections (handlers queue Redis calls), write the calls. */
static void loop_turn(struct loop *l)
{
	struct epoll_event ev[16];
	int n = epoll_wait(l->epfd, ev, ARRAY_SIZE(ev), loop_timeout(l));
	uint64_t junk;

	for (int i = 0; i < n; i++) {
		int fd = ev[i].data.fd;

		if (fd == l->kick) {
			if (read(l->kick, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
				log_warn("loop kick: %s", strerror(errno));
		} else if (fd == l->redis_fd) {
			if (ev[i].events & EPOLLOUT)
				redis_conn_on_writable();
			if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				redis_conn_on_readable();
		}
	}
	redis_conn_run(now_ms());
	rerun = false;
	if (l->daemon)
		MHD_run(l->daemon);
	redis_conn_flush();
	watch_redis(l);
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	int64_t until;

	current = l;
	redis_conn_thread_init();
	while (__atomic_load_n(&l->phase, __ATOMIC_ACQUIRE) < LOOP_STOP) {
		if (__atomic_load_n(&l->phase, __ATOMIC_ACQUIRE) == LOOP_QUIESCE) {
			MHD_quiesce_daemon(l->daemon);	/* the listening socket is the main thread's */
			__atomic_store_n(&l->phase, LOOP_QUIESCED, __ATOMIC_RELEASE);
		}
		loop_turn(l);
	}
	/* New lock requests get 503; those with a call in flight get its answer. */
	stopping = true;
	until = now_ms() + STOP_WAIT_MS;
	while ((awaiting > 0 || !redis_conn_idle()) && now_ms() < until)
		loop_turn(l);
	if (awaiting > 0)
		log_error("%u requests still wait for redis at shutdown", awaiting);
	MHD_stop_daemon(l->daemon);	/* completed callbacks may queue calls */
	l->daemon = NULL;
	until = now_ms() + STOP_WAIT_MS;
	while (!redis_conn_idle() && now_ms() < until)
		loop_turn(l);
	redis_conn_thread_exit();
	return NULL;
}

enum MHD_Result server_await(struct request *rq, enum MHD_Result (*next)(struct request *))
{
	rq->next = next;
	MHD_suspend_connection(rq->conn);
	return MHD_YES;
}

/* Make l's epoll_wait() return. */
static void kick(struct loop *l)
{
	const uint64_t one = 1;

	if (write(l->kick, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("loop kick: %s", strerror(errno));
}

void server_resume(struct request *rq)
{
	MHD_resume_connection(rq->conn);
	if (rq->loop == current)
		rerun = true;
	else
		kick(rq->loop);	/* MHD's own wake-up does not reach our epoll_wait */
}

static void set_phase(enum loop_phase phase)
{
	for (unsigned i = 0; i < nloops; i++) {
		__atomic_store_n(&loops[i].phase, phase, __ATOMIC_RELEASE);
		kick(&loops[i]);
	}
}

/* ----- Start and stop ----- */

static struct MHD_Daemon *daemon_start(const struct config *cfg, unsigned max_conns)
{
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ERROR_LOG;
	/* the first daemon binds; the others accept on its socket */
	struct MHD_OptionItem where[] = {
		{ MHD_OPTION_SOCK_ADDR, 0, (void *)&cfg->listen_addr },
		{ MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL },
		{ MHD_OPTION_END, 0, NULL },
	};

	if (listen_fd != MHD_INVALID_SOCKET) {
		where[0] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL };
		where[1] = where[2];
	}
	if (cfg->listen_addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	return MHD_start_daemon(
		flags, 0, NULL, NULL, access_handler, (void *)cfg,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,	/* first, to catch all */
		MHD_OPTION_ARRAY, where,
		MHD_OPTION_CONNECTION_LIMIT, max_conns,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
		MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, guard_notify, NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
		MHD_OPTION_END);
}

static int loop_init(struct loop *l, const struct config *cfg, unsigned max_conns)
{
	const union MHD_DaemonInfo *info;

	l->redis_fd = -1;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	l->daemon = daemon_start(cfg, max_conns);
	if (l->epfd < 0 || l->kick < 0 || !l->daemon)
		return -1;
	info = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -1;
	epoll_set(l->epfd, EPOLL_CTL_ADD, info->epoll_fd, EPOLLIN);
	epoll_set(l->epfd, EPOLL_CTL_ADD, l->kick, EPOLLIN);
	if (listen_fd == MHD_INVALID_SOCKET) {
		info = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_LISTEN_FD);
		if (!info)
			return -1;
		listen_fd = info->listen_fd;
	}
	if (pthread_create(&l->thread, NULL, loop_main, l))
		return -1;
	l->started = true;
	return 0;
}

int server_start(const struct config *cfg)
{
	const union MHD_DaemonInfo *info;
	unsigned nroutes, max_conns;
	const char *const *labels = routes_labels(&nroutes);

	metrics_set_routes(labels, nroutes);
	nloops = cfg->threads;
	loops = xcalloc(nloops, sizeof(*loops));
	max_conns = (cfg->max_connections + nloops - 1) / nloops;
	for (unsigned i = 0; i < nloops; i++) {
		loops[i].epfd = loops[i].kick = -1;
		if (loop_init(&loops[i], cfg, max_conns) < 0) {
			server_stop();
			return -1;
		}
	}
	if (guard_start(cfg->idle_timeout_s) < 0) {
		server_stop();
		return -1;
	}
	info = MHD_get_daemon_info(loops[0].daemon, MHD_DAEMON_INFO_BIND_PORT);
	return info ? info->port : 0;
}

void server_quiesce(void)
{
	struct timespec tick = { 0, 1000 * 1000 };
	bool all;

	if (!loops || listen_fd == MHD_INVALID_SOCKET)
		return;
	for (unsigned i = 0; i < nloops; i++)
		if (!loops[i].started && loops[i].daemon)
			MHD_quiesce_daemon(loops[i].daemon);
	set_phase(LOOP_QUIESCE);
	do {
		all = true;
		for (unsigned i = 0; i < nloops; i++)
			if (loops[i].started &&
			    __atomic_load_n(&loops[i].phase, __ATOMIC_ACQUIRE) == LOOP_QUIESCE)
				all = false;
		if (!all)
			nanosleep(&tick, NULL);
	} while (!all);
	close(listen_fd);
	listen_fd = MHD_INVALID_SOCKET;
}

void server_stop(void)
{
	if (!loops)
		return;
	server_quiesce();
	set_phase(LOOP_STOP);
	for (unsigned i = 0; i < nloops; i++) {
		struct loop *l = &loops[i];

		if (l->started)
			pthread_join(l->thread, NULL);
		else if (l->daemon)
			MHD_stop_daemon(l->daemon);
		if (l->epfd >= 0)
			close(l->epfd);
		if (l->kick >= 0)
			close(l->kick);
	}
	free(loops);
	loops = NULL;
	nloops = 0;
	guard_stop();
}
