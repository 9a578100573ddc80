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
#include "service/lock/session_watch.h"
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
	if (r == LOCK_BACKEND_DOWN && s)
		rq->lock.state.fault = s->fault;
	if (r == LOCK_OK) {
		switch (rq->route.op) {
		case OP_SESSION_CREATE:
			rq->answer = json_pack("{s:s, s:I, s:s, s:s}", "session", rq->name,
					       "ttl_ms", (json_int_t)s->ttl_ms,
					       "name", params_label(&rq->lock.params),
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
		return reply_unavailable(rq, rq->lock.state.fault);
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
	sessions_create(rq->backend, id, rq->principal, p->ttl_ms, p->value ? p->value : "", params_label(p),
			rq->cfg->sessions_per_token_max, session_done, rq);
	return server_suspend(rq, answered);
}

static enum MHD_Result put_session_locks(struct request *rq);

/* The id in the path, checked: a malformed one names no session. */
static int id_or_reply(struct request *rq)
{
	if (!rq->name || !sessions_id_shaped(rq->name, strlen(rq->name))) {
		reply_error(rq, ERR_SESSION_NOT_FOUND, NULL,
			    "no session '%.64s': a session id is %d lowercase hex digits",
			    rq->name ? rq->name : "", SESSIONS_ID_LEN);
		return -1;
	}
	return 0;
}

/* ----- Every session: GET /sessions (admins) ----- */

#define LIST_DEFAULT 100
#define LIST_MAX 1000

static void listed_sessions(void *ctx, enum lock_result r, int64_t all,
			    const struct session_entry *v, size_t n)
{
	struct request *rq = ctx;

	rq->lock.result = r;
	if (r == LOCK_OK) {
		json_t *list = json_array();

		for (size_t i = 0; i < n; i++) {
			json_t *o = json_pack("{s:s, s:I}", "session", v[i].id, "lease_left_ms",
					      (json_int_t)v[i].lease_ms);

			if (v[i].principal[0])
				json_object_set_new(o, "creator", json_string(v[i].principal));
			json_array_append_new(list, o);
		}
		rq->answer = json_pack("{s:o, s:I}", "sessions", list, "total", (json_int_t)all);
	}
	server_resume(rq);
}

static enum MHD_Result get_sessions(struct request *rq)
{
	const struct params *p = &rq->lock.params;

	if (params_or_reply(rq, P_LIMIT) < 0)
		return MHD_YES;
	if (!rq->admin)
		return reply_error(rq, ERR_FORBIDDEN, NULL,
				   "only an admin token may list every session; read yours with "
				   "GET /sessions/{id}");
	if ((p->given & P_LIMIT) && p->limit > LIST_MAX)
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL, "limit '%lld' is out of range "
				   "1..%d", (long long)p->limit, LIST_MAX);
	sessions_list(rq->backend, (p->given & P_LIMIT) ? p->limit : LIST_DEFAULT,
		      listed_sessions, rq);
	return server_suspend(rq, answered);
}

enum MHD_Result handle_session(struct request *rq)
{
	if (rq->route.op == OP_SESSION_LIST)
		return get_sessions(rq);
	if (rq->route.op == OP_SESSION_CREATE)
		return post_session(rq);
	if (id_or_reply(rq) < 0)
		return MHD_YES;
	if (rq->route.op == OP_SESSION_LOCKS)
		return put_session_locks(rq);
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

/* ----- All or nothing: PUT /sessions/{id}/locks ----- */

/* How many locks one multi-lock may name, at most (and at most the cap on
 * a session's holdings). */
#define MULTI_MAX 64

static int multi_entry_cmp(const void *a, const void *b)
{
	const struct multilock_entry *x = a, *y = b;

	if (x->kind != y->kind)
		return (int)x->kind - (int)y->kind;
	return strcmp(x->name, y->name);
}

static void multi_entries_free(struct multilock_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)e[i].name);
	free(e);
}

/* Entry i of the body (it) into e, checked; -1 with the problem in why
 * (and *code when it is not invalid_argument). */
static int multi_entry_of(struct request *rq, json_t *it, size_t i, struct multilock_entry *e,
		    char *why, size_t len, enum api_error *code)
{
	json_t *kind = json_object_get(it, "kind"), *name = json_object_get(it, "name");
	json_t *limit = json_object_get(it, "limit");

	if (!json_is_object(it) || json_object_size(it) != 2u + (limit != NULL)) {
		snprintf(why, len, "locks[%zu] must be an object of kind, name and (a "
			 "semaphore's) limit, nothing else", i);
		return -1;
	}
	if (!json_is_string(kind) || sessions_kind_parse(json_string_value(kind), &e->kind) < 0) {
		snprintf(why, len, "locks[%zu].kind must be lock, fair, read, write or semaphore", i);
		return -1;
	}
	if (!json_is_string(name)) {
		snprintf(why, len, "locks[%zu].name must be a lock name", i);
		return -1;
	}
	if (params_check_name(json_string_value(name), json_string_length(name), why, len) < 0) {
		*code = ERR_INVALID_NAME;
		return -1;
	}
	e->name = xstrdup(json_string_value(name));
	if ((e->kind == LOCK_KIND_SEMAPHORE) != (limit != NULL)) {
		snprintf(why, len, "locks[%zu]: %s", i, limit ? "limit is a semaphore's only"
			 : "a semaphore needs its limit");
		return -1;
	}
	if (limit && (!json_is_integer(limit) || json_integer_value(limit) < 1 ||
		      json_integer_value(limit) > LOCKS_SEMAPHORE_LIMIT_MAX)) {
		snprintf(why, len, "locks[%zu].limit must be an integer 1..%d", i,
			 LOCKS_SEMAPHORE_LIMIT_MAX);
		return -1;
	}
	e->limit = limit ? json_integer_value(limit) : 0;
	if (!server_token_covers(rq, e->name)) {
		snprintf(why, len, "the bearer token may not touch lock '%s'", e->name);
		*code = ERR_FORBIDDEN;
		return -1;
	}
	return 0;
}

/* The body's entries, sorted (the one global order) and checked: no
 * duplicate, no read-write lock named on both sides. NULL with the
 * problem in why. */
static struct multilock_entry *multi_entries_of(struct request *rq, json_t *locks, unsigned *n,
					  char *why, size_t len, enum api_error *code)
{
	size_t count = json_array_size(locks), i, max = MULTI_MAX;
	struct multilock_entry *e;

	if ((int64_t)max > rq->cfg->session_holdings_max)
		max = (size_t)rq->cfg->session_holdings_max;
	if (!json_is_array(locks) || count == 0 || count > max) {
		snprintf(why, len, "locks must be an array of 1 to %zu locks (a session holds at "
			 "most %lld: --max-session-holdings)", max,
			 (long long)rq->cfg->session_holdings_max);
		return NULL;
	}
	e = xcalloc(count, sizeof(*e));
	for (i = 0; i < count; i++)
		if (multi_entry_of(rq, json_array_get(locks, i), i, &e[i], why, len, code) < 0)
			goto bad;
	qsort(e, count, sizeof(*e), multi_entry_cmp);
	/* a name is one lock, of one kind and one side: named twice, of
	 * whatever kinds, it is refused here rather than by Redis */
	for (i = 0; i < count; i++)
		for (size_t j = i + 1; j < count; j++) {
			if (strcmp(e[i].name, e[j].name))
				continue;
			if (e[i].kind == LOCK_KIND_READ && e[j].kind == LOCK_KIND_WRITE)
				snprintf(why, len, "read-write lock '%s' is named both to read and "
					 "to write: name one side", e[i].name);
			else
				snprintf(why, len, "'%s' is named twice (as %s and %s): a name is "
					 "one lock, of one kind", e[i].name,
					 sessions_kind_label(e[i].kind), sessions_kind_label(e[j].kind));
			goto bad;
		}
	*n = (unsigned)count;
	return e;
bad:
	multi_entries_free(e, count);
	return NULL;
}

static json_t *multi_json(const struct multilock *m)
{
	json_t *holdings = json_array();

	for (unsigned k = 0; k < m->n; k++)
		json_array_append_new(holdings,
				      json_pack("{s:s, s:s, s:s, s:I, s:I}",
						"kind", sessions_kind_label(m->e[k].kind),
						"name", m->e[k].name, "owner", m->session,
						"fencing_token", (json_int_t)m->e[k].token,
						"lease_left_ms", (json_int_t)m->e[k].ttl_ms));
	return json_pack("{s:s, s:o}", "session", m->session, "holdings", holdings);
}

/* A multi-lock that Redis did not serve to the end (a call not sent, too
 * late, refused as Redis cannot serve now, or not answered): what it had
 * taken is taken back by now (else it is MULTI_STANDING), so nothing of
 * it stands, whatever the failing call was. */
static enum MHD_Result multi_unserved(struct request *rq, const char *fault)
{
	return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
			   "%s; nothing of this request is held (what it took was taken back)",
			   fault ? fault : "redis did not answer");
}

/* Why the lock in the way refused: its code, naming it (error.lock). */
static enum MHD_Result multi_refused(struct request *rq)
{
	const struct multilock *m = rq->lock.multi;
	const struct multilock_entry *e = &m->e[m->blocker];
	const char *kind = sessions_kind_label(e->kind);
	json_t *lock = json_pack("{s:s, s:s}", "kind", kind, "name", e->name);

	switch (m->result) {
	case LOCK_HELD:
		rq->retry_after_s = m->holder_ttl_ms > 0 ? (int)((m->holder_ttl_ms + 999) / 1000) : 1;
		return reply_error(rq, ERR_LOCKED, json_pack("{s:o, s:I}", "lock", lock, "ttl_ms",
							    (json_int_t)m->holder_ttl_ms),
				   "%s '%s' is held by another owner (or queued for): nothing of "
				   "this request is held", kind, e->name);
	case LOCK_WRONG_KIND:
		return reply_error(rq, ERR_WRONG_KIND, json_pack("{s:o}", "lock", lock),
				   "name '%s' is in use as another kind of lock: nothing of this "
				   "request is held", e->name);
	case LOCK_LIMIT_MISMATCH:
		return reply_error(rq, ERR_LIMIT_MISMATCH,
				   json_pack("{s:o, s:I}", "lock", lock, "limit",
					     (json_int_t)m->state.others),
				   "semaphore '%s' has limit %lld, not %lld: nothing of this request "
				   "is held", e->name, (long long)m->state.others, (long long)e->limit);
	case LOCK_NOT_OWNER:
		return reply_error(rq, ERR_NOT_OWNER, json_pack("{s:o}", "lock", lock),
				   "%s '%s' is held by the session under another bearer token: "
				   "nothing of this request is held", kind, e->name);
	case LOCK_UNCONFIRMED:
		/* undone: it left nothing; else it was released again, which
		 * too may fail to reach the replicas */
		return reply_error(rq, ERR_REPLICATION_UNCONFIRMED,
				   json_pack("{s:o, s:b}", "lock", lock, "undone", m->state.undone),
				   "%s '%s' %s: %s", kind, e->name, m->state.undone ?
				   "is not held, nor anything of this request" :
				   "was granted and released again",
				   m->state.fault ? m->state.fault : "too few replicas confirmed it");
	case LOCK_TOO_MANY_HOLDS:
	case LOCK_QUEUE_FULL:
		return reply_error(rq, m->result == LOCK_QUEUE_FULL ? ERR_QUEUE_FULL
								    : ERR_TOO_MANY_HOLDS,
				   json_pack("{s:o}", "lock", lock),
				   "%s '%s' is at a cap (%s): nothing of this request is held", kind,
				   e->name, m->result == LOCK_QUEUE_FULL ? "--max-fair-queue"
				   : "--max-read-holds-per-lock");
	case LOCK_BACKEND_DOWN:
		json_decref(lock);
		return multi_unserved(rq, m->state.fault);
	default:
		json_decref(lock);
		rq->lock.result = m->result;
		return answered(rq);	/* a script failure */
	}
}

/* What this call took and Redis could not be told to take back: a 503,
 * but one that says what may stand ("undone": false). */
static enum MHD_Result multi_standing(struct request *rq)
{
	const struct multilock *m = rq->lock.multi;
	json_t *standing = json_array();

	for (unsigned k = 0; k < m->n; k++)
		if (m->e[k].undo != MULTI_UNDO_NONE)
			json_array_append_new(standing,
					      json_pack("{s:s, s:s}", "kind",
							sessions_kind_label(m->e[k].kind), "name",
							m->e[k].name));
	return reply_error(rq, ERR_BACKEND_UNAVAILABLE,
			   json_pack("{s:b, s:o}", "undone", 0, "standing", standing),
			   "%u of the locks this request took could not be taken back (%s): each "
			   "may stay held by session '%s' until its lease ends, at most the "
			   "session's; ending the session frees those it lists, and a release "
			   "as owner '%s' any of them", m->standing,
			   m->undo_fault ? m->undo_fault : "redis did not answer", m->session,
			   m->session);
}

static enum MHD_Result multi_answer(struct request *rq)
{
	const struct multilock *m = rq->lock.multi;

	session_watch_stop(rq->lock.session_watch);
	rq->lock.session_watch = NULL;

	switch (m->outcome) {
	case MULTI_GRANTED:
		if (server_client_gone(rq))
			return MHD_NO;	/* nobody will learn of it: taken back on completion */
		return reply_json(rq, 200, multi_json(m));
	case MULTI_REFUSED:
		return multi_refused(rq);
	case MULTI_SESSION:
		if (m->session_result == LOCK_TOO_MANY_HOLDS)
			return reply_error(rq, ERR_SESSION_FULL,
					   json_pack("{s:I}", "limit",
						     (json_int_t)rq->cfg->session_holdings_max),
					   "session '%s' would have %lld holdings, past the most one "
					   "session may have (--max-session-holdings): nothing of this "
					   "request is held", m->session, (long long)m->session_count);
		if (m->session_result == LOCK_NOT_OWNER)
			return reply_error(rq, ERR_NOT_OWNER,
					   json_pack("{s:{s:s, s:s}}", "lock", "kind",
						     sessions_kind_label(m->e[m->blocker].kind),
						     "name", m->e[m->blocker].name),
					   "%s '%s' is held by '%s' outside the session (taken "
					   "without session=, or left so by a failure): nothing of "
					   "this request is held; release it as that owner, or wait "
					   "for its lease to end",
					   sessions_kind_label(m->e[m->blocker].kind),
					   m->e[m->blocker].name, m->session);
		if (m->session_result == LOCK_BACKEND_DOWN)
			return multi_unserved(rq, NULL);
		rq->lock.result = m->session_result;
		return answered(rq);
	case MULTI_STANDING:
		return multi_standing(rq);
	case MULTI_GONE:
		return MHD_NO;
	case MULTI_SHUTDOWN:
	case MULTI_NO_OUTCOME:
		break;
	}
	return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
			   "dlockd is shutting down; retry on another instance");
}

static void multi_done(void *ctx)
{
	server_resume(ctx);
}

static enum MHD_Result multi_count_query(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	(void)kind;
	(void)key;
	(void)value;
	(*(unsigned *)cls)++;
	return MHD_YES;
}

/* The body's wait_ms and locks members checked (nothing else may be
 * there); the entries into *e, or -1 with the answer queued. */
static int multi_body_or_reply(struct request *rq, struct multilock_entry **e, unsigned *n,
			       int64_t *wait_ms)
{
	json_t *root, *v;
	json_error_t err;
	const char *key;
	char why[320] = "";
	enum api_error code = ERR_INVALID_ARGUMENT;

	root = json_loadb(rq->body ? rq->body : "", rq->body_len, JSON_REJECT_DUPLICATES, &err);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		reply_error(rq, ERR_INVALID_JSON, NULL,
			    "body must be a JSON object {\"locks\": [{\"kind\": ..., \"name\": "
			    "...}, ...], \"wait_ms\": N}%s%s", root ? "" : ": ", root ? "" : err.text);
		return -1;
	}
	*wait_ms = 0;
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "wait_ms")) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > rq->cfg->max_wait_ms)
				snprintf(why, sizeof(why), "wait_ms must be an integer 0..%lld",
					 (long long)rq->cfg->max_wait_ms);
			else
				*wait_ms = json_integer_value(v);
		} else if (strcmp(key, "locks")) {
			snprintf(why, sizeof(why), "unknown member '%.64s'; a multi-lock takes "
				 "locks and wait_ms", key);
		}
		if (why[0])
			break;
	}
	*e = why[0] ? NULL : multi_entries_of(rq, json_object_get(root, "locks"), n, why, sizeof(why),
				       &code);
	json_decref(root);
	if (!*e) {
		reply_error(rq, code, NULL, "%s", why);
		return -1;
	}
	return 0;
}

/* PUT /sessions/{id}/locks {"locks": [{kind, name, limit?}], "wait_ms": N}:
 * everything is checked before Redis is asked anything. */
/* The session of a waiting multi-lock ended: it stops waiting at once and
 * answers 404 session_not_found, holding nothing it took. */
static void multi_session_ended(void *ctx)
{
	struct request *rq = ctx;

	session_watch_stop(rq->lock.session_watch);
	rq->lock.session_watch = NULL;
	multilock_session_ended(rq->lock.multi);
}

static void multi_session_renewed(void *ctx, int64_t lease_ms, int64_t ends_ms)
{
	struct request *rq = ctx;

	multilock_session_renewed(rq->lock.multi, lease_ms, ends_ms);
}

static enum MHD_Result put_session_locks(struct request *rq)
{
	struct multilock *m;
	struct multilock_entry *e;
	unsigned nquery = 0, n = 0;
	int64_t wait_ms;

	MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, multi_count_query, &nquery);
	if (nquery)
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "a multi-lock takes no query parameters: send "
				   "{\"locks\": [...], \"wait_ms\": N} as the JSON body");
	if (multi_body_or_reply(rq, &e, &n, &wait_ms) < 0)
		return MHD_YES;
	rq->lock.machine = LOCK_MACHINE_MULTI;
	m = rq->lock.multi = xmalloc(sizeof(*m));
	*m = (struct multilock){
		.b = rq->backend,
		.session = rq->name,
		.principal = rq->principal,
		.holdings_cap = rq->cfg->session_holdings_max,
		.e = e,
		.n = n,
		.wait_ms = wait_ms,
		.fd = server_client_fd(rq),
		.done = multi_done,
		.done_ctx = rq,
	};
	multilock_start(m);
	if (wait_ms > 0)	/* a wait stops when the session ends, wherever */
		rq->lock.session_watch = session_watch_start(rq->backend, rq->name, wait_ms,
							     multi_session_ended,
							     multi_session_renewed, rq);
	return server_suspend(rq, multi_answer);
}

void session_locks_end(struct request *rq, bool delivered)
{
	struct multilock *m = rq->lock.multi;

	if (rq->lock.machine != LOCK_MACHINE_MULTI || !m)
		return;
	multilock_end(m, delivered);
	multi_entries_free(m->e, m->n);
	free(m);
	rq->lock.multi = NULL;
}
