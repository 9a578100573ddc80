/* handle_health.c -- /healthz (the process answers), /readyz (Redis answers
 * PING on this loop's backend -- not an error such as LOADING, whose
 * meaning the 503 says -- and the subscriber is connected),
 * /metrics (Prometheus text), /openapi.yaml (the contract, embedded at
 * build time) and / (an index of them, JSON or, for a browser, HTML). */
#include "api/handlers.h"

#include "api/params.h"
#include "api/reply.h"
#include "api/server.h"
#include "service/base/metrics.h"
#include "service/lock/health.h"
#include "service/base/util.h"
#include "service/base/version.h"
#include "service/lock/waiters.h"
#include "service/lock/watch.h"

#include <string.h>

/* Generated from openapi.yaml by the Makefile. */
extern const char openapi_doc[];
extern const size_t openapi_doc_len;

static void pinged(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct request *rq = ctx;

	rq->lock.result = r;
	rq->lock.state = *st;
	server_resume(rq);
}

static enum MHD_Result ready_checked(struct request *rq)
{
	if (rq->lock.result != LOCK_OK)
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL, "%s",
				   rq->lock.state.fault ? rq->lock.state.fault
						    : "redis cannot be reached; retry shortly");
	if (!health_subscriber_up(rq->backend))
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "redis cannot be reached by the subscriber; retry shortly");
	return reply_json(rq, 200, json_pack("{s:s}", "status", "ready"));
}

/* GET /'s links: path, what it is. */
static const char *const index_links[][2] = {
	{ "/openapi.yaml", "the HTTP API (OpenAPI 3)" },
	{ "/locks", "the locks held (GET; ?prefix=, ?limit=)" },
	{ "/metrics", "Prometheus metrics" },
	{ "/healthz", "liveness: the process answers" },
	{ "/readyz", "readiness: Redis answers" },
	{ "/ui", "the status page" },
};
#define INDEX_LINKS (sizeof(index_links) / sizeof(index_links[0]))

/* GET /: where to go next, as JSON, or as HTML when the client asks for
 * text/html (a browser). */
static enum MHD_Result index_reply(struct request *rq)
{
	const char *accept = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);
	json_t *links;
	char *html;
	size_t len = 0, cap = 1024;

	if (accept && strstr(accept, "text/html")) {
		html = xmalloc(cap);
		len += (size_t)snprintf(html, cap, "<!doctype html>\n<title>dlockd</title>\n"
					"<h1>dlockd %s</h1>\n<p>Distributed locks over HTTP, kept in "
					"Redis.</p>\n<ul>\n", dlockd_version);
		for (size_t i = 0; i < INDEX_LINKS && len < cap; i++)
			len += (size_t)snprintf(html + len, cap - len,
						"<li><a href=\"%s\">%s</a>: %s</li>\n",
						index_links[i][0], index_links[i][0],
						index_links[i][1]);
		if (len < cap)
			len += (size_t)snprintf(html + len, cap - len, "</ul>\n");
		if (len >= cap)
			len = cap - 1;
		return reply_text(rq, 200, "text/html; charset=utf-8", html, len);
	}
	links = json_object();
	for (size_t i = 0; i < INDEX_LINKS; i++)
		json_object_set_new(links, index_links[i][0] + 1, json_pack("{s:s,s:s}", "href",
				    index_links[i][0], "title", index_links[i][1]));
	return reply_json(rq, 200, json_pack("{s:s,s:s,s:o}", "name", "dlockd", "version",
					     dlockd_version, "links", links));
}

enum MHD_Result handle_health(struct request *rq)
{
	char *text;
	size_t len;
	unsigned all, watchers;	/* joined waiters, and of them watchers */

	if (params_or_reply(rq, 0) < 0)
		return MHD_YES;
	switch (rq->route.op) {
	case OP_HEALTHZ:
		return reply_json(rq, 200, json_pack("{s:s}", "status", "ok"));
	case OP_READYZ:
		health_ping(rq->backend, pinged, rq);
		return server_suspend(rq, ready_checked);
	case OP_METRICS:
		all = waiters_count_all();
		watchers = waiters_count_watchers();
		text = metrics_render(all > watchers ? all - watchers : 0, watch_count_all(), &len);
		return reply_text(rq, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	case OP_OPENAPI:
		text = xmalloc(openapi_doc_len);
		memcpy(text, openapi_doc, openapi_doc_len);
		return reply_text(rq, 200, "application/yaml", text, openapi_doc_len);
	case OP_INDEX:
		return index_reply(rq);
	case OP_UI:
		return handle_ui(rq);
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "no health handler for this route");
	}
}
