/* handle_health.c -- /healthz (the process answers), /readyz (Redis answers
 * PING on this loop's connection -- not an error such as LOADING, whose
 * meaning the 503 says -- and the subscriber is connected),
 * /metrics (Prometheus text) and /openapi.yaml (the contract, embedded at
 * build time). */
#include "handlers.h"

#include "reply.h"
#include "server.h"
#include "../service/log.h"
#include "../service/metrics.h"
#include "../service/pubsub.h"
#include "../service/redis_conn.h"
#include "../service/util.h"
#include "../service/waiters.h"

#include <string.h>

/* Generated from openapi.yaml by the Makefile. */
extern const char openapi_doc[];
extern const size_t openapi_doc_len;

/* PING's answer; an error reply (LOADING, BUSY, NOPERM...) is kept,
 * explained, in rq->redis_fault. */
static void on_pong(void *ctx, redisReply *r)
{
	struct request *rq = ctx;

	rq->redis_ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
	rq->redis_fault = NULL;
	if (r && r->type == REDIS_REPLY_ERROR) {
		rq->redis_fault = redis_error_unavailable(r->str);
		if (!rq->redis_fault)
			rq->redis_fault = "redis answered PING with an error (see dlockd's log)";
		log_warn("readyz: redis answered PING: %s", r->str);
	}
	server_resume(rq);
}

static enum MHD_Result ready_checked(struct request *rq)
{
	if (!rq->redis_ok)
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL, "%s",
				   rq->redis_fault ? rq->redis_fault
						   : "redis cannot be reached; retry shortly");
	if (!pubsub_connected())
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "redis cannot be reached by the subscriber; retry shortly");
	return reply_json(rq, 200, json_pack("{s:s}", "status", "ready"));
}

enum MHD_Result handle_health(struct request *rq)
{
	char *text;
	size_t len;

	if (request_params_or_reply(rq, 0) < 0)
		return MHD_YES;
	switch (rq->route.op) {
	case OP_HEALTHZ:
		return reply_json(rq, 200, json_pack("{s:s}", "status", "ok"));
	case OP_READYZ:
		redis_conn_send(1, (const char *[]){ "PING" }, NULL, false, on_pong, rq);
		return server_await(rq, ready_checked);
	case OP_METRICS:
		text = metrics_render(waiters_count(), &len);
		return reply_text(rq, 200, "text/plain; version=0.0.4", text, len);
	case OP_OPENAPI:
		text = xmalloc(openapi_doc_len);
		memcpy(text, openapi_doc, openapi_doc_len);
		return reply_text(rq, 200, "application/yaml", text, openapi_doc_len);
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "no health handler for this route");
	}
}
