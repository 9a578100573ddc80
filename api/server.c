/* server.c -- the libmicrohttpd daemon and the life of a request on it.
 *
 * MHD runs an epoll thread pool with suspend/resume (DESIGN.md §2). The
 * access handler makes one struct request per request on the first call,
 * collects the body (capped: 413 past max_body_bytes), then routes it;
 * a waiting request is suspended and, when resumed, re-enters here with
 * rq->waiter set. The completed callback frees the request, after
 * handle_lock_completed() had its say. */
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

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static struct MHD_Daemon *daemon_handle;

/* ----- Request life ----- */

static struct request *request_create(struct MHD_Connection *conn, const struct config *cfg,
				      const char *url, const char *method)
{
	struct request *rq = xcalloc(1, sizeof(*rq));
	const char *cl;

	rq->conn = conn;
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
	return handle_lock(rq);
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
				      const char *method, const char *version,
				      const char *upload_data, size_t *upload_data_size,
				      void **req_cls)
{
	struct request *rq = *req_cls;

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
	if (rq->waiter)
		return handle_lock_resumed(rq);
	guard_busy(conn, true);
	return dispatch(rq);
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *req_cls;

	(void)cls;
	guard_busy(conn, false);
	if (!rq)
		return;
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

/* ----- Start and stop ----- */

int server_start(const struct config *cfg)
{
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	const union MHD_DaemonInfo *info;
	unsigned nroutes;
	const char *const *labels = routes_labels(&nroutes);

	metrics_set_routes(labels, nroutes);
	if (cfg->listen_addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	daemon_handle = MHD_start_daemon(
		flags, 0, NULL, NULL, access_handler, (void *)cfg,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,	/* first, to catch all */
		MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&cfg->listen_addr,
		MHD_OPTION_THREAD_POOL_SIZE, cfg->threads,
		MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
		MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, guard_notify, NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
		MHD_OPTION_END);
	if (!daemon_handle)
		return -1;
	if (guard_start(cfg->idle_timeout_s) < 0) {
		server_stop();
		return -1;
	}
	info = MHD_get_daemon_info(daemon_handle, MHD_DAEMON_INFO_BIND_PORT);
	return info ? info->port : 0;
}

void server_quiesce(void)
{
	MHD_socket fd;

	if (!daemon_handle)
		return;
	fd = MHD_quiesce_daemon(daemon_handle);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

void server_stop(void)
{
	if (daemon_handle) {
		MHD_stop_daemon(daemon_handle);
		daemon_handle = NULL;
	}
	guard_stop();
}
