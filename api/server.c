/* server.c -- the HTTP server: several libmicrohttpd daemons per event
 * loop (DAEMONS_IN_ALL shared by the loops), and the life of a request on
 * them.
 *
 * Each loop (service/base/loop.c, run by its own thread) carries its
 * daemons in MHD's external epoll mode: each daemon's epoll fd is watched
 * by the loop, and that daemon's MHD_run runs in a task deferred to the end
 * of the turn whenever its fd is ready, its timeout is due, a connection
 * was handed to it or one of its suspended ones resumed. Why several:
 * libmicrohttpd 0.9.75 walks every suspended connection of a daemon
 * whenever one of them resumed (daemon.c, resume_suspended_connections);
 * with 10,000 waiters on one lock, every hand-off paid a walk of all of
 * them. Once a loop has SPREAD_AT requests suspended, new connections are
 * dealt to its daemons in turn, so a walk visits about 1/ndaemons
 * of the loop's waiters; before, they all go to its first daemon, so that
 * a busy turn costs one MHD_run, not one per daemon. A turn runs only the
 * daemons that have something to do. A handler sends its lock operation (queued on
 * the loop's Redis connection without blocking) and suspends its
 * connection (server_suspend); the operation's outcome resumes it
 * (server_resume) and the handler's next step answers. Nothing blocks a
 * loop but its epoll_wait.
 *
 * dlockd owns the listening socket: every loop watches it (one loop woken
 * per connection), hands each connection to one of its daemons
 * (MHD_add_connection), or, when --max-connections are open over all
 * loops, answers 503 itself and closes it (over TLS: closes it, as a
 * plaintext answer would be garbage to the client).
 *
 * With --tls-cert the daemons speak HTTPS (MHD with GnuTLS). MHD takes a
 * certificate only at a daemon's start; to serve the current one, every
 * connection's TLS session is given the credentials in force when MHD
 * starts the connection, before its handshake (tls_session_start, in
 * conn_notify), and holds them until MHD has closed it. A reload
 * (api/tls.c) thus reaches new connections at once, while those
 * already open keep theirs. The certificate passed at the daemon's start
 * is never served.
 *
 * A request starts when MHD has its request line (request_begin keeps the
 * path as sent, for routing); on the access handler's first call it is
 * routed and its target and framing checked (api/framing.c: 400 and close
 * when the target or a header could be read two ways), then the body is
 * collected (capped: 413 past max_body_bytes) and it is dispatched. A suspended
 * request re-enters with rq->next set, its one way back. The completed
 * callback frees the request, after the completed handler had its say.
 *
 * The server names no handler: main.c gives server_start() a table of them
 * (struct server_handlers), and the handlers call back only
 * server_suspend() and server_resume(). */
#include "api/server.h"

#include "api/client_cap.h"
#include "api/conn_guard.h"
#include "api/framing.h"
#include "api/params.h"
#include "api/reply.h"
#include "api/request.h"
#include "api/routes.h"
#include "api/auth.h"
#include "service/lock/backend.h"
#include "service/lock/health.h"
#include "service/lock/locks.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/metrics.h"
#include "api/tls.h"
#include "service/base/util.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a stopping loop waits for its Redis calls to be answered:
 * past the 10 s a call sent waits for its reply (redis_node.c), so that
 * every suspended request has been resumed and answered before its
 * daemon stops (MHD aborts the process when a daemon stops with a
 * connection still suspended). */
#define STOP_WAIT_MS 11000
/* How often a stopping loop looks whether it is done. */
#define STOP_POLL_MS 10
/* A refused connection is kept this long (at most) after its 503, reading
 * what the client still sends, so that closing it does not reset the
 * connection before the client has read the answer. */
#define REFUSED_LINGER_MS 2000
#define REFUSED_MAX 256		/* per loop; past it, closed at once */

/* Freed requests a loop keeps for its next ones: a struct request is over
 * 2 KiB, and malloc takes such a chunk by its slow path (merging its fast
 * bins first) on every request otherwise. None under ASan, which is to see
 * every request freed. */
#define SPARE_REQUESTS 16
#ifdef __SANITIZE_ADDRESS__
static const bool keep_spares = false;
#else
static const bool keep_spares = true;
#endif
/* MHD daemons per loop: DAEMONS_IN_ALL shared by the loops, at least one
 * each and at most DAEMONS_PER_LOOP. Each costs an epoll fd and an eventfd
 * and under 1 KiB, and a turn runs only those with work; 32 a loop cut
 * dlockd's CPU for the drain of 10,000 waiters on one lock by a quarter
 * against 8 (the walk of a resume visits a 32nd of the loop's waiters).
 * More loops share the waiters already, so the fds stay ~2 x 64 at any
 * --threads (64 threads of 32 each would take over 2,000). */
#define DAEMONS_PER_LOOP 32
#define DAEMONS_IN_ALL 64
/* While a loop has fewer requests suspended than this, it hands every new
 * connection to its first daemon: a busy turn's requests are then served
 * by one MHD_run (one epoll_wait), as with one daemon, and a walk of so
 * few is cheap. Past it, new connections are dealt over all the daemons. */
#define SPREAD_AT 64

enum stop_phase { RUNNING, STOP_REQUESTS, STOP_REDIS };

/* One MHD daemon of a loop and what runs it; the loop's thread's. */
struct http_daemon {
	struct http_loop *h;
	struct MHD_Daemon *daemon;
	int mhd_fd;			/* MHD's epoll fd, watched by the loop */
	struct loop_task run;		/* MHD_run, then suspend what asked */
	struct loop_timer mhd_timeout;	/* MHD's next timeout */
};

/* The HTTP side of one event loop; touched only by the loop's thread,
 * after server_start() set it up. */
struct http_loop {
	struct loop *loop;
	bool tls;			/* the daemons speak HTTPS */
	const struct backend *backend;
	const struct config *cfg;
	struct http_daemon d[DAEMONS_PER_LOOP];
	unsigned ndaemons;		/* of d[] in use: DAEMONS_IN_ALL / loops, 1 to 32 */
	unsigned next_daemon;		/* the next spread connection's (server_accept) */
	struct guard *guard;
	unsigned awaiting;		/* requests suspended (rq->next set) */
	bool adding;			/* a connection in MHD_add_connection, counted */
	struct client_slot *adding_slot;	/* ... and its client's count */
	/* requests whose handler suspended during this MHD_run: their
	 * connections are suspended once it returns (see server_suspend) */
	struct request **pending;
	unsigned npending, pending_cap;
	/* refused connections lingering after their 503 */
	struct refused { int fd; int64_t until_ms; } refused[REFUSED_MAX];
	unsigned nrefused;
	struct loop_timer linger;	/* the first lingering one is due */
	/* stopping: new lock requests get 503, then the daemon stops */
	enum stop_phase stop;
	bool settled;			/* nothing in flight at the last poll */
	int64_t stop_until_ms;
	struct loop_timer stop_poll;
	struct request *spare[SPARE_REQUESTS];	/* freed, for reuse */
	unsigned nspare;
};

/* What dlockd keeps of a connection (MHD's socket context) from MHD's
 * "started" notification to its "closed" one, on the loop's thread. */
struct conn_ctx {
	struct guard_watch *watch;	/* the slowloris guard's */
	struct client_slot *client;	/* its client's count of connections */
	struct tls_creds *tls;		/* its TLS session's credentials (a reference) */
	struct tls_out *out;		/* over TLS: its session's writes (tls.h) */
};

static struct http_loop *loops;
static unsigned nloops;
/* dlockd's own listening socket: the loops accept (server_accept) and
 * hand each connection to their MHD daemon, or refuse it with 503. */
static int listen_fd = -1;
static unsigned max_connections;
/* What requests are handed to (server_start). */
static const struct server_handlers *handlers;
static unsigned other_route;		/* the metrics label "other" */
/* Connections MHD holds, over all loops (conn_notify). */
static unsigned open_connections;
/* Loops that stopped watching the listening socket (server_quiesce). */
static unsigned quiesced;

/* ----- Request life ----- */

/* MHD's URI log callback: the request line is in, nothing of it decoded
 * yet. The request starts here so that it keeps the path exactly as sent:
 * routing on a decoded path would let "%2F" pass for a separator. The
 * target is looked at here too, whole (framing_check_line refuses it later). */
static void *request_begin(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_daemon *hd = cls;
	struct http_loop *h = hd->h;
	struct request *rq = h->nspare ? h->spare[--h->nspare] : xmalloc(sizeof(*rq));
	size_t tlen = uri ? strlen(uri) : 0;
	size_t len = uri ? strcspn(uri, "?") : 0;

	(void)conn;
	memset(rq, 0, sizeof(*rq));
	rq->hl = h;
	rq->hd = hd;
	rq->url = xmalloc(len + 1);
	memcpy(rq->url, uri ? uri : "", len);
	rq->url[len] = '\0';
	rq->target = uri;
	rq->target_len = tlen;
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)uri[i] <= ' ' || uri[i] == 0x7f)
			rq->target_ctl = true;
	rq->started_us = now_us();
	return rq;
}

/* The headers are in: route the request; returns what is wrong with its
 * target, or NULL. */
static const char *request_start(struct request *rq, struct MHD_Connection *conn,
				 struct http_loop *h, const char *method, const char *version)
{
	const char *bad = framing_check_line(rq, method, version);
	const char *cl;
	size_t len;

	rq->started = true;
	rq->conn = conn;
	rq->hl = h;
	rq->backend = h->backend;
	rq->cfg = h->cfg;
	rq->method_name = method;
	rq->method = routes_method(method);
	rq->route_status = routes_match(rq->url, rq->method, &rq->route);
	if (rq->route.name)
		rq->name = routes_name(&rq->route, &len);
	request_id_pick(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id"),
			MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"),
			rq->request_id);
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > h->cfg->max_body_bytes)
		rq->body_too_large = true;
	return bad;
}

/* Refuse rq with 400 invalid_request and close its connection: what it
 * is, or what was sent behind it, is not what a proxy would take it for. */
static void refuse_request(struct request *rq, const char *why)
{
	rq->close = true;
	reply_error(rq, ERR_INVALID_REQUEST, NULL, "%s; the connection is closed", why);
}

/* Refuse rq with 413 body_too_large. Told early (by its Content-Length,
 * before its body came), the connection closes: the body may still be on
 * its way. */
static enum MHD_Result body_refuse(struct request *rq, bool early)
{
	if (early)
		rq->close = true;
	return reply_error(rq, ERR_BODY_TOO_LARGE, NULL, "request body is larger than %zu bytes",
			   rq->cfg->max_body_bytes);
}

/* rq will not be suspended after all (its connection is closing). */
static void unpend(struct request *rq)
{
	struct http_loop *h = rq->hl;

	rq->suspend_pending = false;
	for (unsigned i = 0; i < h->npending; i++)
		if (h->pending[i] == rq)
			h->pending[i] = NULL;
}

static void request_free(struct request *rq)
{
	struct http_loop *h = rq->hl;

	json_decref(rq->answer);
	params_free(&rq->lock.params);
	free(rq->url);
	free(rq->name);
	free(rq->body);
	if (keep_spares && h->nspare < SPARE_REQUESTS)
		h->spare[h->nspare++] = rq;
	else
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

/* The bearer token of rq's Authorization header (*len bytes, optional
 * whitespace around it dropped), or NULL when there is none. */
static const char *bearer_of(struct request *rq, size_t *len)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	size_t n;

	if (!h || strncasecmp(h, "Bearer ", 7))
		return NULL;
	h += 7;
	h += strspn(h, " \t");
	n = strlen(h);
	while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;		/* optional whitespace around a field value (RFC 9110 §5.5) */
	*len = n;
	return h;
}

/* With --auth-file, a lock request needs "Authorization: Bearer <token>"
 * whose prefix covers the name (a listing: the prefix it asks for, which
 * the token's must start); 0, or -1 after the 401/403 is queued. */
static int auth_or_reply(struct request *rq)
{
	const char *h, *scope = rq->name ? rq->name : params_prefix(&rq->lock.params);
	enum auth_role role = AUTH_CLIENT;
	size_t len;

	rq->admin = true;
	rq->principal[0] = '\0';
	if (!auth_enabled())
		return 0;
	rq->admin = false;
	h = bearer_of(rq, &len);
	if (!h) {
		reply_error(rq, ERR_UNAUTHORIZED, NULL,
			    "this dlockd needs 'Authorization: Bearer <token>'");
		return -1;
	}
	switch (auth_check(h, len, scope, &role, rq->principal)) {
	case AUTH_UNKNOWN:
		reply_error(rq, ERR_UNAUTHORIZED, NULL, "the bearer token is not known");
		return -1;
	case AUTH_OUT_OF_SCOPE:
		if (routes_session_op(rq->route.op))
			break;	/* a session is no lock name: its handler checks the owner */
		if (!rq->name)
			reply_error(rq, ERR_FORBIDDEN, NULL,
				    "the bearer token may not list locks under prefix '%s': ask for "
				    "a prefix that starts with the token's own", scope);
		else
			reply_error(rq, ERR_FORBIDDEN, NULL,
				    "the bearer token may not touch lock '%s'", rq->name);
		return -1;
	case AUTH_OK:
		break;
	}
	rq->admin = role == AUTH_ADMIN;
	return 0;
}

int server_client_fd(struct request *rq)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

bool server_token_covers(struct request *rq, const char *name)
{
	const char *h;
	enum auth_role role;
	char principal[AUTH_NAME_MAX + 1];
	size_t len;

	if (!auth_enabled())
		return true;
	h = bearer_of(rq, &len);
	return h && auth_check(h, len, name, &role, principal) == AUTH_OK;
}

/* The whole request is in: check it and hand it to its handler. */
static enum MHD_Result request_dispatch(struct request *rq)
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
		return body_refuse(rq, false);
	if (routes_session_op(rq->route.op)) {
		/* the id is checked by the handler; a token of any prefix may
		 * make sessions (each belongs to its token name) */
	} else if (rq->route.op == OP_LIST) {
		/* the prefix asked for is what the token must cover */
		if (params_or_reply(rq, P_PREFIX | P_LIMIT | P_CURSOR) < 0)
			return MHD_YES;
	} else if (!rq->name) {
		return handlers->health(rq);
	} else if (params_check_name(rq->name, strlen(rq->name), why, sizeof(why)) < 0) {
		return reply_error(rq, ERR_INVALID_NAME, NULL, "%s", why);
	}
	if (auth_or_reply(rq) < 0)
		return MHD_YES;
	if (rq->hl->stop != RUNNING)	/* its Redis call could outlive the loop */
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "dlockd is shutting down; retry on another instance");
	if (routes_session_op(rq->route.op))
		return handlers->session(rq);
	return handlers->lock(rq);
}

static struct conn_ctx *ctx_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static struct guard_watch *watch_of(struct MHD_Connection *conn)
{
	struct conn_ctx *cc = ctx_of(conn);

	return cc ? cc->watch : NULL;
}

/* Over TLS, libmicrohttpd 0.9.75 sends an answer's header and its body
 * as two records, one write each (and two to four reads for the client).
 * For an answer the handler just queued (rq->small_answer: a body of at
 * most SMALL_ANSWER bytes, not for HEAD), the header's record is held
 * (tls_out_pair_next) and leaves with the body's in one write. A socket
 * that cannot take both is libmicrohttpd's to wait on, as for any write
 * (tls.c says how). */
static void hold_small_answer(struct request *rq)
{
	struct conn_ctx *cc;

	if (!rq->small_answer)
		return;
	rq->small_answer = false;
	cc = ctx_of(rq->conn);
	if (cc && cc->out)
		tls_out_pair_next(cc->out);
}

/* Once libmicrohttpd is done with an answer, a record still held (the
 * body's never came: never expected) goes out; false when it cannot,
 * and then the answer is not delivered and the connection is closed. */
static bool send_held(struct MHD_Connection *conn)
{
	struct conn_ctx *cc = ctx_of(conn);
	const union MHD_ConnectionInfo *ci;
	int rc;

	if (!cc || !cc->out || (rc = tls_out_flush(cc->out)) == 0)
		return true;
	if (rc > 0)
		log_warn("tls: an answer's header could not be sent (the socket is full); "
			 "closing the connection");
	else	/* the client hung up: MHD has said so already */
		log_debug("tls: an answer's header could not be sent (the connection failed)");
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		shutdown(ci->connect_fd, SHUT_RDWR);
	return false;
}

/* Set by access_handler when a handler closed the connection of a client
 * that had hung up (it returned MHD_NO with nothing queued), for the line
 * MHD logs about it next, on this thread, before the handler's caller
 * returns. */
static __thread bool client_hung_up;

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
				      const char *method, const char *version,
				      const char *upload_data, size_t *upload_data_size,
				      void **req_cls)
{
	struct request *rq = *req_cls;
	enum MHD_Result ret;

	(void)url;	/* decoded by MHD; rq->url has it as sent */
	if (!rq)	/* MHD gave no request line to request_begin() */
		*req_cls = rq = request_begin(cls, NULL, conn);
	if (!rq->started) {
		const char *why = request_start(rq, conn, cls, method, version);

		if (why || (why = framing_check_headers(rq, method, version)))
			refuse_request(rq, why);
		else if (rq->body_too_large)	/* by its Content-Length: before any
						 * "100 Continue" invites the body */
			body_refuse(rq, true);
		hold_small_answer(rq);
		return MHD_YES;	/* or wait for the body */
	}
	if (rq->suspend_pending)
		return MHD_YES;	/* not yet suspended: the outcome cannot be in */
	if (*upload_data_size) {
		body_append(rq, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	log_set_request(rq->request_id);	/* the handler's lines carry it */
	if (rq->next) {
		enum MHD_Result (*next)(struct request *) = rq->next;

		rq->next = NULL;
		rq->hl->awaiting--;
		ret = next(rq);
	} else {
		guard_busy(watch_of(conn), true);
		ret = request_dispatch(rq);
	}
	log_set_request(NULL);
	hold_small_answer(rq);
	if (rq->next)
		rq->hl->awaiting++;
	client_hung_up = ret == MHD_NO && !rq->status && server_client_gone(rq);
	return ret;
}

/* The client's address as "127.0.0.1:5555" or "[::1]:5555" in buf, or
 * NULL when MHD does not know it. */
static const char *peer_of(struct MHD_Connection *conn, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	char host[NI_MAXHOST], port[NI_MAXSERV];
	bool v6 = sa && sa->sa_family == AF_INET6;

	if (!sa || getnameinfo(sa, v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
			       host, sizeof(host), port, sizeof(port),
			       NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return NULL;
	snprintf(buf, len, v6 ? "[%s]:%s" : "%s:%s", host, port);
	return buf;
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *req_cls;
	char peer[NI_MAXHOST + NI_MAXSERV + 4];
	struct log_access line;
	bool force;

	(void)cls;
	guard_busy(watch_of(conn), false);
	/* a grant whose answer could not leave is taken back */
	if (!send_held(conn) && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		toe = MHD_REQUEST_TERMINATED_WITH_ERROR;
	if (!rq)
		return;
	if (rq->suspend_pending)
		unpend(rq);
	if (rq->next)
		rq->hl->awaiting--;	/* the client left, or the daemon stopped, first */
	if (!rq->started) {	/* MHD answered it (400, 413, 431...) or it broke off */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);

		rq->status = ci ? ci->http_status : 0;
	}
	log_set_request(rq->request_id[0] ? rq->request_id : NULL);
	handlers->completed(rq, toe);
	log_set_request(NULL);
	force = rq->route.op == OP_RELEASE && rq->lock.params.force;
	line = (struct log_access){
		.method = rq->method_name,
		.path = rq->url,
		.status = rq->status,
		.duration_ms = (double)(now_us() - rq->started_us) / 1000.0,
		.kind = rq->name ? locks_kind_label(rq->route.kind) : NULL,
		.why = rq->started ? NULL : "refused by the HTTP parser",
		.lock = rq->name,
		.owner = rq->lock.params.owner[0] ? rq->lock.params.owner : NULL,
		.error = rq->error,
		/* who forced a release: the token's name and where it came from */
		.force = force,
		.principal = rq->principal[0] ? rq->principal : NULL,
		.request_id = rq->request_id[0] ? rq->request_id : NULL,
		.delivered = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK,
		/* heartbeats come every few seconds from every holder */
		.quiet = (rq->route.op == OP_HEARTBEAT || rq->route.op == OP_SESSION_HEARTBEAT) &&
			 !(rq->cfg && rq->cfg->log_heartbeats),
	};
	/* the peer's address is formatted only for a line that is written
	 * (getnameinfo and snprintf on every request otherwise) */
	if (log_enabled(log_access_level(&line))) {
		line.peer = peer_of(conn, peer, sizeof(peer));
		log_access(&line);
	}
	request_free(rq);
	*req_cls = NULL;
}

/* ----- MHD callbacks ----- */

/* MHD's unescaper for the path and the query (routes_unescape); routing
 * uses the path as sent (request_begin). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return routes_unescape(s);
}

/* A new connection's TLS session gets the credentials in force, and
 * writes through a tls_out; one that cannot (never expected) is cut
 * rather than served with the daemon's start certificate and without the
 * client check. */
static void tls_start(struct MHD_Connection *conn, struct conn_ctx *cc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	void *session = ci ? ci->tls_session : NULL;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	cc->tls = session ? tls_session_start(session) : NULL;
	cc->out = cc->tls && ci ? tls_out_attach(session, ci->connect_fd) : NULL;
	if (!cc->out) {
		log_error("tls: cannot set up a connection's session; closing it");
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
	}
}

/* MHD's connection notifications: the slowloris guard, the count of open
 * connections for --max-connections, and over TLS the credentials of the
 * session (MHD has made it, and not begun its handshake, when it says
 * "started"; it has freed it when it says "closed"). */
static void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	struct http_loop *h = cls;
	struct conn_ctx *cc = *socket_context;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		cc = *socket_context = xcalloc(1, sizeof(*cc));
		if (h->adding)
			cc->client = h->adding_slot;
		guard_notify(h->guard, conn, &cc->watch, code);
		if (h->tls)
			tls_start(conn, cc);
	} else if (cc) {
		guard_notify(h->guard, conn, &cc->watch, code);
		client_cap_give(cc->client);
		tls_creds_put(cc->tls);
		tls_out_free(cc->out);
		free(cc);
		*socket_context = NULL;
	}
	if (code == MHD_CONNECTION_NOTIFY_CLOSED)
		__atomic_sub_fetch(&open_connections, 1, __ATOMIC_RELAXED);
	else if (h->adding)
		h->adding = false;	/* counted when it was admitted */
	else
		__atomic_add_fetch(&open_connections, 1, __ATOMIC_RELAXED);
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
	/* MHD's words for any failed TLS handshake: a client that does not
	 * trust the certificate, lacks a client certificate or speaks plain
	 * HTTP. Routine on a public port; a refused client certificate is
	 * logged by api/tls.c */
	if (strstr(msg, "handshake message out of context")) {
		log_debug("http: a TLS handshake failed");
		return;
	}
	/* MHD's words when a handler closes a connection: for a client that
	 * hung up while its request waited, that is all it is */
	if (client_hung_up && strstr(msg, "Application reported internal error")) {
		client_hung_up = false;
		log_debug("http: the client hung up before its answer; connection closed");
		return;
	}
	log_warn("http: %s", msg);
}

/* ----- Running MHD on the loop ----- */

static void suspend_pending(struct http_loop *h)
{
	for (unsigned i = 0; i < h->npending; i++) {
		struct request *rq = h->pending[i];

		if (rq && rq->suspend_pending) {
			rq->suspend_pending = false;
			MHD_suspend_connection(rq->conn);
		}
	}
	h->npending = 0;
}

/* The deferred task of a daemon: let MHD serve its ready connections
 * (handlers send their lock operations), suspend those that asked, and
 * watch its next timeout. It runs before the loop sleeps, so the
 * operations sent go out in the same turn (the Redis connection flushes
 * after it). */
static void mhd_run(struct loop *l, void *data)
{
	struct http_daemon *hd = data;
	MHD_UNSIGNED_LONG_LONG ms;

	if (!hd->daemon)
		return;
	MHD_run(hd->daemon);
	suspend_pending(hd->h);
	if (MHD_get_timeout(hd->daemon, &ms) == MHD_YES)
		loop_timer_set(l, &hd->mhd_timeout, now_ms() + (int64_t)(ms > 60000 ? 60000 : ms));
	else
		loop_timer_stop(l, &hd->mhd_timeout);
}

static void mhd_due(struct loop *l, struct loop_timer *t)
{
	struct http_daemon *hd = container_of(t, struct http_daemon, mhd_timeout);

	loop_defer(l, &hd->run);
}

static void mhd_ready(struct loop *l, int fd, unsigned events, void *data)
{
	struct http_daemon *hd = data;

	(void)fd;
	(void)events;
	loop_defer(l, &hd->run);
}

/* Why the suspension waits until MHD_run() returns: libmicrohttpd 0.9.75
 * leaves a connection suspended from the handler in the "read" state it
 * had while the request came in, and on resuming reads first; a client
 * that half-closed after its request (shutdown(SHUT_WR), as some do) then
 * reads as gone and the connection is closed unanswered, though the
 * operation ran. Returning from the handler without an answer first lets
 * MHD settle the connection (it stops reading a request that is whole);
 * suspended then, it is resumed straight to the handler. Outcomes never
 * come inside a handler (lock operations answer later, from the loop), so
 * a resume always finds the connection suspended. */
enum MHD_Result server_suspend(struct request *rq, enum MHD_Result (*next)(struct request *))
{
	struct http_loop *h = rq->hl;

	rq->next = next;
	if (h->npending == h->pending_cap) {
		h->pending_cap = h->pending_cap ? 2 * h->pending_cap : 64;
		h->pending = xrealloc(h->pending, h->pending_cap * sizeof(*h->pending));
	}
	h->pending[h->npending++] = rq;
	rq->suspend_pending = true;
	return MHD_YES;
}

void server_resume(struct request *rq)
{
	MHD_resume_connection(rq->conn);
	loop_defer(rq->hl->loop, &rq->hd->run);
}

/* ----- Accepting ----- */

/* The whole answers to a connection past --max-connections, and to one
 * past --max-connections-per-client (server_start). */
static char overloaded[2][512];
static size_t overloaded_len[2];

static void overloaded_build(unsigned per_client)
{
	char body[2][256];

	snprintf(body[0], sizeof(body[0]), "{\"error\":\"overloaded\",\"message\":\"dlockd has as "
		 "many connections open as it may take; retry shortly\"}\n");
	snprintf(body[1], sizeof(body[1]), "{\"error\":\"overloaded\",\"message\":\"this client "
		 "has %u connections open to dlockd, the most one may have "
		 "(--max-connections-per-client); close one, or retry shortly\"}\n", per_client);
	for (int i = 0; i < 2; i++) {
		int n = snprintf(overloaded[i], sizeof(overloaded[i]),
				 "HTTP/1.1 503 Service Unavailable\r\n"
				 "Content-Type: application/json\r\n"
				 "Cache-Control: no-store\r\n"
				 "Retry-After: 1\r\n"
				 "Connection: close\r\n"
				 "Content-Length: %zu\r\n"
				 "\r\n%s", strlen(body[i]), body[i]);

		overloaded_len[i] = (size_t)n;
	}
}

/* Drop refused connections that are done (EOF, error) or overdue; with
 * fd >= 0, read what fd has first. */
static void refused_sweep(struct http_loop *h, int fd)
{
	int64_t now = now_ms(), next = 0;

	for (unsigned i = 0; i < h->nrefused; ) {
		struct refused *r = &h->refused[i];
		bool done = now >= r->until_ms;

		if (r->fd == fd) {
			char junk[4096];
			ssize_t n = 1;

			for (int k = 0; k < 16 && (n = read(fd, junk, sizeof(junk))) > 0; k++)
				;
			done |= n == 0 || (n < 0 && errno != EAGAIN);
		}
		if (done) {
			loop_unwatch(h->loop, r->fd);
			close(r->fd);
			*r = h->refused[--h->nrefused];
		} else {
			if (!next || r->until_ms < next)
				next = r->until_ms;
			i++;
		}
	}
	if (next)
		loop_timer_set(h->loop, &h->linger, next);
	else
		loop_timer_stop(h->loop, &h->linger);
}

static void refused_ready(struct loop *l, int fd, unsigned events, void *data)
{
	(void)l;
	(void)events;
	refused_sweep(data, fd);
}

static void linger_due(struct loop *l, struct loop_timer *t)
{
	(void)l;
	refused_sweep(container_of(t, struct http_loop, linger), -1);
}

/* Past --max-connections (or the client's share of them, per_client):
 * answer 503 at once (without waiting for the request: a server may
 * answer early), then linger to let it be read; over TLS, close it. */
static void refuse_connection(struct http_loop *h, int fd, bool per_client)
{
	const char *why = per_client ? "over --max-connections-per-client"
				     : "over --max-connections";

	char junk[4096];
	ssize_t n;

	if (h->tls) {	/* a plaintext answer would be garbage to a TLS client */
		close(fd);
		metrics_request(other_route, METHOD_OTHER, 503, 0);
		log_access(&(struct log_access){ .status = 503, .error = "overloaded",
						 .why = per_client ? "over --max-connections-per-client: "
						 "closed unanswered (TLS)" : "over --max-connections: "
						 "closed unanswered (TLS)", .delivered = 0 });
		return;
	}
	for (int i = 0; i < 16 && (n = read(fd, junk, sizeof(junk))) > 0; i++)
		;	/* what has come so far: unread bytes at close() mean a reset */
	n = write(fd, overloaded[per_client], overloaded_len[per_client]);
	shutdown(fd, SHUT_WR);
	metrics_request(other_route, METHOD_OTHER, 503, 0);
	log_access(&(struct log_access){ .status = 503, .error = "overloaded", .why = why,
					 .delivered = n == (ssize_t)overloaded_len[per_client] });
	if (h->nrefused == REFUSED_MAX || loop_watch(h->loop, fd, LOOP_READ | LOOP_HANGUP,
						     refused_ready, h) < 0) {
		close(fd);
		return;
	}
	h->refused[h->nrefused++] = (struct refused){ fd, now_ms() + REFUSED_LINGER_MS };
	if (!loop_timer_armed(&h->linger))
		loop_timer_set(h->loop, &h->linger, now_ms() + REFUSED_LINGER_MS);
}

/* New connections are waiting: admit each to one of this loop's MHD
 * daemons (SPREAD_AT), or refuse it when --max-connections are open
 * already, or its client's share of them (client_cap.h). */
static void server_accept(struct loop *l, int lfd, unsigned events, void *data)
{
	struct http_loop *h = data;

	(void)events;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage addr;
		socklen_t len = sizeof(addr);
		int fd = accept4(lfd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct http_daemon *hd;
		struct client_slot *slot;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED &&
			    errno != EINTR)
				log_warn("accept: %s", strerror(errno));
			break;
		}
		if (__atomic_add_fetch(&open_connections, 1, __ATOMIC_RELAXED) > max_connections) {
			__atomic_sub_fetch(&open_connections, 1, __ATOMIC_RELAXED);
			refuse_connection(h, fd, false);
			continue;
		}
		if (!client_cap_take((struct sockaddr *)&addr, &slot)) {
			__atomic_sub_fetch(&open_connections, 1, __ATOMIC_RELAXED);
			refuse_connection(h, fd, true);
			continue;
		}
		hd = h->awaiting < SPREAD_AT ? &h->d[0]
					     : &h->d[h->next_daemon++ % h->ndaemons];
		h->adding = true;
		h->adding_slot = slot;
		if (MHD_add_connection(hd->daemon, fd, (struct sockaddr *)&addr, len) != MHD_YES)
			log_warn("could not take a connection: %s", strerror(errno));	/* MHD closed it */
		if (h->adding) {	/* MHD never started it */
			h->adding = false;
			__atomic_sub_fetch(&open_connections, 1, __ATOMIC_RELAXED);
			client_cap_give(slot);
		}
		h->adding_slot = NULL;
		loop_defer(l, &hd->run);
	}
}

/* ----- Stopping ----- */

/* On the loop: stop watching the listening socket (the main thread closes
 * it once every loop has). */
static void quiesce(struct loop *l, void *data)
{
	(void)data;
	loop_unwatch(l, listen_fd);
	__atomic_add_fetch(&quiesced, 1, __ATOMIC_RELEASE);
}

/* Stop h's daemons that run (their loop's thread, or before it runs). */
static void daemons_stop(struct http_loop *h)
{
	for (unsigned i = 0; i < h->ndaemons; i++) {
		struct http_daemon *hd = &h->d[i];

		if (hd->mhd_fd >= 0)
			loop_unwatch(h->loop, hd->mhd_fd);
		hd->mhd_fd = -1;
		loop_cancel(h->loop, &hd->run);
		loop_timer_stop(h->loop, &hd->mhd_timeout);
		if (hd->daemon)
			MHD_stop_daemon(hd->daemon);
		hd->daemon = NULL;
	}
}

/* On the loop, every STOP_POLL_MS while stopping: first let the requests
 * with a call in flight get its answer (new lock requests get 503), then
 * stop the daemon (its completed callbacks may send releases), then let
 * those be answered, then stop the loop. */
static void stop_step(struct loop *l, struct loop_timer *t)
{
	struct http_loop *h = container_of(t, struct http_loop, stop_poll);
	int64_t now = now_ms();
	bool idle = health_idle(h->backend), settled;

	/* answers queued since the last MHD_run go out before the daemon stops
	 * (a timer runs before this turn's deferred MHD_run), and the requests
	 * must have been settled at the previous poll too */
	if (h->stop == STOP_REQUESTS)
		for (unsigned i = 0; i < h->ndaemons; i++)
			mhd_run(l, &h->d[i]);
	settled = h->awaiting == 0 && idle;
	if (h->stop == STOP_REQUESTS && ((settled && h->settled) || now >= h->stop_until_ms)) {
		if (h->awaiting > 0) {
			/* never: every call is answered within the wait; but
			 * stopping MHD now would abort the process */
			log_error("%u requests still wait for redis at shutdown; leaving their "
				  "connections to the exit", h->awaiting);
			loop_stop(l);
			return;
		}
		while (h->nrefused) {
			loop_unwatch(l, h->refused[--h->nrefused].fd);
			close(h->refused[h->nrefused].fd);
		}
		loop_timer_stop(l, &h->linger);
		daemons_stop(h);
		guard_free(h->guard);
		h->guard = NULL;
		h->stop = STOP_REDIS;
		h->stop_until_ms = now + STOP_WAIT_MS;
		idle = health_idle(h->backend);
	}
	if (h->stop == STOP_REDIS && (idle || now >= h->stop_until_ms)) {
		loop_stop(l);
		return;
	}
	h->settled = settled;
	loop_timer_set(l, t, now + STOP_POLL_MS);
}

static void stop(struct loop *l, void *data)
{
	struct http_loop *h = data;

	h->stop = STOP_REQUESTS;
	h->stop_until_ms = now_ms() + STOP_WAIT_MS;
	stop_step(l, &h->stop_poll);
}

/* ----- Start and stop ----- */

/* What libmicrohttpd keeps per connection: the request as read (line and
 * headers), its parsed headers and the answer's. It clears all of it before
 * each request of a kept-alive connection, so its size is paid on every
 * request (its default, 32 KiB, was a third of dlockd's CPU per cycle)
 * and by every waiting connection. The largest request the contract
 * allows (a 200-character name, a 128-character owner and a 1024-byte
 * value percent-encoded in the query: 4.5 KiB) fits with its headers
 * (test_http_limits.c); larger headers are refused with 431 as before. */
#define CONN_POOL_BYTES 16384

static struct MHD_Daemon *daemon_start(struct http_daemon *hd)
{
	struct http_loop *h = hd->h;
	const struct config *cfg = h->cfg;
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
	struct tls_creds *tc = tls_creds_get();
	struct MHD_Daemon *d;
	/* MHD wants a certificate at the start; each session is given the
	 * current ones instead (conn_notify), so these are never served */
	struct MHD_OptionItem tls_opts[] = {
		{ tc ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0,
		  tc ? (void *)tls_creds_cert_pem(tc) : NULL },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, tc ? (void *)tls_creds_key_pem(tc) : NULL },
		{ MHD_OPTION_END, 0, NULL },
	};

	if (cfg->listen_addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (tc)
		flags |= MHD_USE_TLS;
	h->tls = tc != NULL;
	d = MHD_start_daemon(
		flags, 0, NULL, NULL, access_handler, h,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,	/* first, to catch all */
		/* the count is kept across loops (server_accept); this is a backstop */
		MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_POOL_BYTES,
		MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, conn_notify, h,
		MHD_OPTION_URI_LOG_CALLBACK, request_begin, hd,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
		MHD_OPTION_ARRAY, tls_opts,
		MHD_OPTION_END);
	tls_creds_put(tc);	/* MHD has parsed them */
	return d;
}

/* Bind and listen on cfg->listen_addr; returns the port, or -1. */
static int listen_open(const struct config *cfg)
{
	struct sockaddr_storage bound;
	socklen_t len = sizeof(bound);
	int one = 1;

	listen_fd = socket(cfg->listen_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			   0);
	if (listen_fd < 0)
		goto fail;
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (cfg->listen_addr.ss_family == AF_INET6)
		setsockopt(listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(listen_fd, (const struct sockaddr *)&cfg->listen_addr, cfg->listen_addr_len) < 0 ||
	    listen(listen_fd, SOMAXCONN) < 0 ||
	    getsockname(listen_fd, (struct sockaddr *)&bound, &len) < 0)
		goto fail;
	return ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						 : ((struct sockaddr_in *)&bound)->sin_port);
fail:
	log_error("cannot listen on %s: %s", cfg->listen, strerror(errno));
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	return -1;
}

/* Start one of h's daemons and have the loop watch it. */
static int daemon_init(struct http_loop *h, struct http_daemon *hd)
{
	const union MHD_DaemonInfo *info;

	hd->daemon = daemon_start(hd);
	if (!hd->daemon)
		return -1;
	info = MHD_get_daemon_info(hd->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info || loop_watch(h->loop, info->epoll_fd, LOOP_READ, mhd_ready, hd) < 0)
		return -1;
	hd->mhd_fd = info->epoll_fd;
	return 0;
}

static int http_loop_init(struct http_loop *h, const struct config *cfg,
			  const struct backend *b)
{
	h->loop = b->loop;
	h->backend = b;
	h->cfg = cfg;
	h->ndaemons = DAEMONS_IN_ALL / nloops;
	if (h->ndaemons < 1)
		h->ndaemons = 1;
	else if (h->ndaemons > DAEMONS_PER_LOOP)
		h->ndaemons = DAEMONS_PER_LOOP;
	for (unsigned i = 0; i < h->ndaemons; i++) {
		struct http_daemon *hd = &h->d[i];

		hd->h = h;
		hd->mhd_fd = -1;
		loop_task_init(&hd->run, mhd_run, hd);
		loop_timer_init(&hd->mhd_timeout, mhd_due);
	}
	loop_timer_init(&h->linger, linger_due);
	loop_timer_init(&h->stop_poll, stop_step);
	h->guard = guard_new(h->loop, cfg->idle_timeout_s);
	for (unsigned i = 0; i < h->ndaemons; i++)
		if (daemon_init(h, &h->d[i]) < 0)
			return -1;
	/* one loop woken per new connection */
	return loop_watch(h->loop, listen_fd, LOOP_READ | LOOP_EXCLUSIVE, server_accept, h) < 0
		? -1 : 0;
}

int server_start(const struct config *cfg, const struct backend *const *backends, unsigned n,
		 const struct server_handlers *hs)
{
	unsigned nroutes;
	const char *const *labels = routes_labels(&nroutes);
	int port;

	static const char *const method_labels[METHOD_COUNT + 1] = {
		[METHOD_GET] = "GET", [METHOD_PUT] = "PUT", [METHOD_POST] = "POST",
		[METHOD_DELETE] = "DELETE", [METHOD_HEAD] = "HEAD", [METHOD_OTHER] = "other",
	};

	metrics_set_routes(labels, nroutes);
	metrics_set_methods(method_labels, METHOD_COUNT);
	metrics_set_http_connections(&open_connections, cfg->max_connections);
	other_route = nroutes;
	handlers = hs;
	max_connections = cfg->max_connections;
	client_cap_init(config_per_client_connections(cfg));
	overloaded_build(config_per_client_connections(cfg));
	port = listen_open(cfg);
	if (port < 0)
		return -1;
	nloops = n;
	loops = xcalloc(nloops, sizeof(*loops));
	for (unsigned i = 0; i < nloops; i++) {
		if (http_loop_init(&loops[i], cfg, backends[i]) < 0) {
			server_free();
			return -1;
		}
	}
	return port;
}

void server_quiesce(void)
{
	struct timespec tick = { 0, 1000 * 1000 };
	unsigned posted = 0;

	if (!loops || listen_fd < 0)
		return;
	for (unsigned i = 0; i < nloops; i++)
		if (loop_post(loops[i].loop, quiesce, NULL) == 0)
			posted++;
	while (__atomic_load_n(&quiesced, __ATOMIC_ACQUIRE) < posted)
		nanosleep(&tick, NULL);
	close(listen_fd);
	listen_fd = -1;
}

void server_stop(void)
{
	server_quiesce();
	for (unsigned i = 0; i < nloops; i++)
		if (loop_post(loops[i].loop, stop, &loops[i]) < 0)
			loop_stop(loops[i].loop);	/* it never ran */
}

unsigned server_free(void)
{
	unsigned left = 0;

	for (unsigned i = 0; i < nloops; i++) {
		struct http_loop *h = &loops[i];

		left += h->awaiting;

		/* the loop never ran, or never stopped its daemons; not with
		 * requests still suspended (left to the exit: MHD aborts) */
		if (h->loop && h->awaiting == 0)
			daemons_stop(h);
		loop_timer_stop(h->loop, &h->linger);
		loop_timer_stop(h->loop, &h->stop_poll);
		while (h->nrefused)
			close(h->refused[--h->nrefused].fd);
		guard_free(h->guard);
		free(h->pending);
		while (h->nspare)
			free(h->spare[--h->nspare]);
	}
	free(loops);
	loops = NULL;
	nloops = 0;
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	return left;
}

bool server_client_gone(struct request *rq)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p;

	if (!ci)
		return false;
	p.fd = ci->connect_fd;
	p.events = POLLRDHUP;
	p.revents = 0;
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}
