/* reply.c -- every answer dlockd gives goes through here: JSON bodies, the
 * error model of the README and openapi.yaml (one code -> status table),
 * and the headers that go with some errors (Allow, Retry-After). */
#include "api/reply.h"

#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	unsigned status;
	const char *code;
} errors[ERR_COUNT] = {
	[ERR_INVALID_NAME] = { 400, "invalid_name" },
	[ERR_INVALID_ARGUMENT] = { 400, "invalid_argument" },
	[ERR_INVALID_JSON] = { 400, "invalid_json" },
	[ERR_INVALID_REQUEST] = { 400, "invalid_request" },
	[ERR_NOT_FOUND] = { 404, "not_found" },
	[ERR_METHOD_NOT_ALLOWED] = { 405, "method_not_allowed" },
	[ERR_LOCKED] = { 409, "locked" },
	[ERR_NOT_HELD] = { 409, "not_held" },
	[ERR_NOT_OWNER] = { 409, "not_owner" },
	[ERR_WRONG_KIND] = { 409, "wrong_kind" },
	[ERR_TOO_MANY_HOLDS] = { 409, "too_many_holds" },
	[ERR_QUEUE_FULL] = { 409, "queue_full" },
	[ERR_LIMIT_MISMATCH] = { 409, "limit_mismatch" },
	[ERR_BODY_TOO_LARGE] = { 413, "body_too_large" },
	[ERR_UNAUTHORIZED] = { 401, "unauthorized" },
	[ERR_FORBIDDEN] = { 403, "forbidden" },
	[ERR_BACKEND_UNAVAILABLE] = { 503, "backend_unavailable" },
	[ERR_REPLICATION_UNCONFIRMED] = { 503, "replication_unconfirmed" },
	[ERR_INTERNAL] = { 500, "internal" },
	[ERR_SESSION_NOT_FOUND] = { 404, "session_not_found" },
	[ERR_SESSION_FULL] = { 409, "session_full" },
	[ERR_TOO_MANY_SESSIONS] = { 409, "too_many_sessions" },
};

/* How long the request's machine slept waiting (ms): not counted in the
 * request's duration. */
static int64_t slept_ms(const struct lock_call *c)
{
	switch (c->machine) {
	case LOCK_MACHINE_ACQUIRE:
		return c->acquire.slept_ms;
	case LOCK_MACHINE_WATCH:
		return c->watch.slept_ms;
	default:
		return 0;
	}
}

/* Add to resp the headers every answer carries (the content type, the
 * status's own, Connection: close, X-Request-Id) and queue it. */
static enum MHD_Result queue_response(struct request *rq, unsigned status,
				      const char *content_type, struct MHD_Response *resp,
				      size_t len)
{
	enum MHD_Result ret;
	char value[24];

	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (status == 405 && rq->route.allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rq->route.allow);
	if (rq->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (rq->request_id[0])
		MHD_add_response_header(resp, "X-Request-Id", rq->request_id);
	if (rq->retry_after_s > 0) {
		snprintf(value, sizeof(value), "%d", rq->retry_after_s);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, value);
	}
	ret = MHD_queue_response(rq->conn, status, resp);
	MHD_destroy_response(resp);
	rq->small_answer = ret == MHD_YES && len > 0 && len <= SMALL_ANSWER &&
			   rq->method != METHOD_HEAD;
	rq->status = status;
	metrics_request(rq->route.id, rq->method, status,
			now_us() - rq->started_us - 1000 * slept_ms(&rq->lock));
	return ret;
}

static enum MHD_Result queue(struct request *rq, unsigned status, const char *content_type,
			     char *buf, size_t len)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	return queue_response(rq, status, content_type, resp, len);
}

enum MHD_Result reply_shared(struct request *rq, unsigned status, const char *content_type,
			     const char *text, size_t len, void (*release)(void *), void *cls)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)text, release,
							      cls);
	if (!resp) {
		release(cls);
		return MHD_NO;
	}
	return queue_response(rq, status, content_type, resp, len);
}

enum MHD_Result reply_text(struct request *rq, unsigned status, const char *content_type,
			   char *text, size_t len)
{
	return queue(rq, status, content_type, text, len);
}

/* The status page loads only its own files and talks only to dlockd; it
 * runs no inline script or style, is framed by nobody and submits no form. */
#define STATIC_CSP "default-src 'none'; script-src 'self'; style-src 'self'; " \
	"img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; " \
	"frame-ancestors 'none'"

enum MHD_Result reply_static(struct request *rq, const char *content_type, const char *data,
			     size_t len, const char *etag, int not_modified)
{
	unsigned status = not_modified ? 304 : 200;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(not_modified ? 0 : len, (void *)data,
					       MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	if (!not_modified)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(resp, "Content-Security-Policy", STATIC_CSP);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	if (rq->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (rq->request_id[0])
		MHD_add_response_header(resp, "X-Request-Id", rq->request_id);
	ret = MHD_queue_response(rq->conn, status, resp);
	MHD_destroy_response(resp);
	rq->status = status;
	metrics_request(rq->route.id, rq->method, status, now_us() - rq->started_us);
	return ret;
}

char *reply_json_text(json_t *body, size_t *len)
{
	char *text = json_dumps(body, JSON_COMPACT);

	json_decref(body);
	if (!text)
		return NULL;
	*len = strlen(text);
	/* a trailing newline keeps `curl` output readable in a terminal */
	text = xrealloc(text, *len + 2);
	text[(*len)++] = '\n';
	text[*len] = '\0';
	return text;
}

enum MHD_Result reply_json(struct request *rq, unsigned status, json_t *body)
{
	size_t len;
	char *text = reply_json_text(body, &len);

	if (!text)
		return MHD_NO;
	return queue(rq, status, "application/json", text, len);
}

/* ----- Flat objects, written directly ----- */

/* s as a JSON string at out (" and \\ escaped, control characters as
 * \\u00XX, the rest as is); returns the end. Room: 6 bytes per byte of
 * s, and 2. */
static char *put_string(char *out, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	*out++ = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			*out++ = '\\';
			*out++ = (char)c;
		} else if (c < 0x20) {
			memcpy(out, "\\u00", 4);
			out[4] = hex[c >> 4];
			out[5] = hex[c & 15];
			out += 6;
		} else {
			*out++ = (char)c;
		}
	}
	*out++ = '"';
	return out;
}

enum MHD_Result reply_fields(struct request *rq, unsigned status, const struct reply_field *f,
			     size_t n)
{
	size_t room = 4;	/* {, }, newline, NUL */
	char *text, *p;

	for (size_t i = 0; i < n; i++)
		room += 6 * strlen(f[i].key) + 3 +
			(f[i].type == REPLY_STR ? 6 * strlen(f[i].s) + 2 : DECIMAL_MAX);
	p = text = xmalloc(room);
	*p++ = '{';
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		p = put_string(p, f[i].key);
		*p++ = ':';
		switch (f[i].type) {
		case REPLY_STR:
			p = put_string(p, f[i].s);
			break;
		case REPLY_INT:
			p = put_decimal(p, f[i].i);
			break;
		case REPLY_BOOL:
			memcpy(p, f[i].i ? "true" : "false", f[i].i ? 4 : 5);
			p += f[i].i ? 4 : 5;
			break;
		}
	}
	*p++ = '}';
	*p++ = '\n';	/* as reply_json */
	*p = '\0';
	return queue(rq, status, "application/json", text, (size_t)(p - text));
}

enum MHD_Result reply_error(struct request *rq, enum api_error err, json_t *extra,
			    const char *fmt, ...)
{
	char message[512];
	json_t *body;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	/* Messages quote what the client sent; keep them printable ASCII so
	 * they are always valid JSON strings. */
	for (char *p = message; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	body = json_pack("{s:s, s:s}", "error", errors[err].code, "message", message);
	if (extra) {
		json_object_update(body, extra);
		json_decref(extra);
	}
	if (errors[err].status == 503 && rq->retry_after_s <= 0)
		rq->retry_after_s = 1;
	if (err == ERR_INTERNAL)
		log_error("%s %s: %s", rq->method_name, rq->url, message);
	rq->error = errors[err].code;	/* for the access line */
	return reply_json(rq, errors[err].status, body);
}

/* What a client does after a call that may have taken effect. */
static const char *may_stand_hint(const struct request *rq)
{
	switch (rq->route.op) {
	case OP_SESSION_CREATE:
		return "a session may have been made whose id nobody learns: it holds nothing "
		       "and ends with its lease; create another";
	case OP_SESSION_END:
		return "repeat it to learn (an ended session answers session_not_found)";
	case OP_SESSION_HEARTBEAT:
	case OP_HEARTBEAT:
	case OP_SET_LIMIT:
		return "repeat it to learn what stands";
	default:
		return "repeat it to learn what stands (an acquire by the same owner gets its "
		       "grant back, a release answers not_held)";
	}
}

enum MHD_Result reply_unavailable(struct request *rq, const char *fault)
{
	if (fault)
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL, "%s", fault);
	if (rq->method == METHOD_GET || rq->method == METHOD_HEAD)
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "redis did not answer: the connection to it was lost, or it "
				   "stalled; retry shortly");
	return reply_error(rq, ERR_BACKEND_UNAVAILABLE, json_pack("{s:b}", "undone", 0),
			   "redis did not answer: the call was sent, then the connection to "
			   "redis was lost (or redis stalled past 10 s), so it may have taken "
			   "effect; %s", may_stand_hint(rq));
}
