/* handle_sessions.c -- the session resources: POST /sessions makes one,
 * GET /sessions/{id} reads it, POST /sessions/{id}/heartbeat renews it
 * and everything it holds, DELETE /sessions/{id} ends it and releases
 * everything it holds. Holdings are taken by the lock resources with
 * session=<id> (handle_locks.c). A session belongs to the token name that
 * made it: another token's request finds no such session (404, nothing
 * told, nothing changed); an admin token (or auth off) may touch any.
 *
 * Each operation is one call of the service (service/lock/sessions.h)
 * whose callback builds the answer (what it is given lives only during
 * the call) into rq->answer and resumes the request. */
#include "api/handlers.h"

#include "api/params.h"
#include "api/reply.h"
#include "api/server.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/base/util.h"
#include "service/lock/sessions.h"

#include <stdlib.h>
#include <string.h>

/* The caller's name as the service takes it: "*" (any session) for an
 * admin token or with auth off. */
static const char *session_principal(const struct request *rq)
{
	return rq->admin ? "*" : rq->principal;
}

static json_t *holdings_json(const struct session_info *s, bool gone)
{
	json_t *a = json_array();

	for (size_t i = 0; i < s->n; i++) {
		const struct session_holding *h = &s->holdings[i];

		if (h->gone != gone)
			continue;
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I}",
						   "kind", sessions_kind_label(h->kind),
						   "name", h->name, "owner", h->owner,
						   "fencing_token", (json_int_t)h->token));
	}
	return a;
}

static json_t *session_json(const struct request *rq, const struct session_info *s)
{
	return json_pack("{s:s, s:I, s:I, s:s, s:s, s:o}", "session", rq->name,
			 "ttl_ms", (json_int_t)s->ttl_ms, "lease_ms", (json_int_t)s->lease_ms,
			 "name", s->name ? s->name : "", "value", s->value ? s->value : "",
			 "holdings", holdings_json(s, false));
}

/* A session call's outcome: keep the answer and resume. */
static void session_done(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct request *rq = ctx;
	const char *value = rq->lock.params.value ? rq->lock.params.value : "";

	rq->lock.result = r;
	if (r == LOCK_TOO_MANY_HOLDS)
		rq->lock.state.others = s->cap_n;
	if (r == LOCK_OK) {
		switch (rq->route.op) {
		case OP_SESSION_CREATE:
			rq->answer = json_pack("{s:s, s:I, s:s, s:s}", "session", rq->name,
					       "ttl_ms", (json_int_t)s->ttl_ms,
					       "name", rq->lock.params.label,
					       "value", value);
			break;
		case OP_SESSION_END:
			rq->answer = json_pack("{s:b, s:o}", "ended", 1,
					       "released", holdings_json(s, false));
			break;
		case OP_SESSION_HEARTBEAT:
			rq->answer = session_json(rq, s);
			json_object_set_new(rq->answer, "dropped", holdings_json(s, true));
			break;
		default:
			rq->answer = session_json(rq, s);
		}
	}
	server_resume(rq);
}

static void count(const struct request *rq)
{
	if (rq->lock.result == LOCK_OK && rq->route.op == OP_SESSION_CREATE)
		metrics_inc(METRIC_SESSIONS_CREATED);
	else if (rq->lock.result == LOCK_OK && rq->route.op == OP_SESSION_END)
		metrics_inc(METRIC_SESSIONS_ENDED);
	else if (rq->lock.result == LOCK_NOT_HELD && rq->route.op == OP_SESSION_HEARTBEAT)
		metrics_inc(METRIC_SESSIONS_EXPIRED);
}

static enum MHD_Result answered(struct request *rq)
{
	count(rq);
	switch (rq->lock.result) {
	case LOCK_OK:
		return reply_json(rq, rq->route.op == OP_SESSION_CREATE ? 201 : 200,
				  json_incref(rq->answer));
	case LOCK_TOO_MANY_HOLDS:
		return reply_error(rq, ERR_TOO_MANY_SESSIONS, json_pack("{s:I}", "limit",
				   (json_int_t)rq->cfg->sessions_per_token_max),
				   "%lld sessions of this token are open, the most one may have "
				   "(--max-sessions-per-token): end one first",
				   (long long)rq->lock.state.others);
	case LOCK_NOT_HELD:
		return reply_error(rq, ERR_SESSION_NOT_FOUND, NULL,
				   "no session '%s': it never existed, was ended, or its lease "
				   "ran out (everything it held is released)", rq->name);
	case LOCK_BACKEND_DOWN:
		rq->retry_after_s = 1;
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "Redis did not answer; nothing is known to have changed");
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "the session script failed");
	}
}

static enum MHD_Result post_session(struct request *rq)
{
	struct params *p = &rq->lock.params;
	char id[SESSIONS_ID_LEN + 1];

	if (params_or_reply(rq, P_TTL | P_VALUE | P_LABEL) < 0)
		return MHD_YES;
	if (!(p->given & P_TTL))
		p->ttl_ms = rq->cfg->default_ttl_ms;
	random_hex(id, SESSIONS_ID_LEN / 2);
	rq->name = xstrdup(id);		/* freed with the request, like a lock's */
	sessions_create(rq->backend, id, rq->principal, p->ttl_ms, p->value ? p->value : "", p->label,
			rq->cfg->sessions_per_token_max, session_done, rq);
	return server_suspend(rq, answered);
}

/* The id in the path, checked: a malformed one names no session. */
static int id_or_reply(struct request *rq)
{
	if (!rq->name || strlen(rq->name) != SESSIONS_ID_LEN ||
	    strspn(rq->name, "0123456789abcdef") != SESSIONS_ID_LEN) {
		reply_error(rq, ERR_SESSION_NOT_FOUND, NULL,
			    "no session '%.64s': a session id is %d lowercase hex digits",
			    rq->name ? rq->name : "", SESSIONS_ID_LEN);
		return -1;
	}
	return 0;
}

enum MHD_Result handle_session(struct request *rq)
{
	if (rq->route.op == OP_SESSION_CREATE)
		return post_session(rq);
	if (id_or_reply(rq) < 0)
		return MHD_YES;
	if (params_or_reply(rq, 0) < 0)
		return MHD_YES;
	switch (rq->route.op) {
	case OP_SESSION_GET:
		sessions_read(rq->backend, rq->name, session_principal(rq), session_done, rq);
		break;
	case OP_SESSION_HEARTBEAT:
		sessions_heartbeat(rq->backend, rq->name, session_principal(rq), session_done, rq);
		break;
	case OP_SESSION_END:
		sessions_end(rq->backend, rq->name, session_principal(rq), session_done, rq);
		break;
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "no session handler for this route");
	}
	return server_suspend(rq, answered);
}
