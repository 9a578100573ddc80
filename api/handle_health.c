/* handle_health.c -- /healthz (the process answers), /readyz (Redis answers
 * PING on this loop's backend -- not an error such as LOADING, whose
 * meaning the 503 says -- and the subscriber is connected),
 * /metrics (Prometheus text) and /openapi.yaml (the contract, embedded at
 * build time). */
#include "api/handlers.h"

#include "api/params.h"
#include "api/reply.h"
#include "api/server.h"
#include "service/base/metrics.h"
#include "service/lock/health.h"
#include "service/base/util.h"
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
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "no health handler for this route");
	}
}
