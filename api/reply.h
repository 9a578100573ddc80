/* reply.h -- JSON replies and the one error function. */
#ifndef DLOCKD_REPLY_H
#define DLOCKD_REPLY_H

#include <jansson.h>
#include <microhttpd.h>

#include "api/request.h"

enum api_error {
	ERR_INVALID_NAME,
	ERR_INVALID_ARGUMENT,
	ERR_INVALID_JSON,
	ERR_INVALID_REQUEST,
	ERR_NOT_FOUND,
	ERR_METHOD_NOT_ALLOWED,
	ERR_LOCKED,
	ERR_NOT_HELD,
	ERR_NOT_OWNER,
	ERR_WRONG_KIND,
	ERR_TOO_MANY_HOLDS,
	ERR_QUEUE_FULL,
	ERR_LIMIT_MISMATCH,
	ERR_BODY_TOO_LARGE,
	ERR_UNAUTHORIZED,
	ERR_FORBIDDEN,
	ERR_BACKEND_UNAVAILABLE,
	ERR_REPLICATION_UNCONFIRMED,
	ERR_INTERNAL,
	ERR_SESSION_NOT_FOUND,
	ERR_SESSION_FULL,
	ERR_TOO_MANY_SESSIONS,
	ERR_COUNT
};

/* Queue status with body as JSON; body is stolen (decref'd here). */
enum MHD_Result reply_json(struct request *rq, unsigned status, json_t *body);
/* body (stolen) as a JSON answer's text: compact, a newline after;
 * malloc'd, *len its length. NULL when it cannot be encoded. */
char *reply_json_text(json_t *body, size_t *len);
/* Queue status with a body shared by several answers: text (len bytes,
 * of content_type) is left alone until release(cls) runs, once MHD is
 * done with this answer's copy of it (at once when queueing fails). */
enum MHD_Result reply_shared(struct request *rq, unsigned status, const char *content_type,
			     const char *text, size_t len, void (*release)(void *), void *cls);
/* One field of a flat JSON object written by reply_fields; RF_STR, RF_INT
 * and RF_BOOL make one. */
struct reply_field {
	const char *key;
	enum { REPLY_STR, REPLY_INT, REPLY_BOOL } type;
	const char *s;
	long long i;
};
#define RF_STR(k, v) ((struct reply_field){ .key = (k), .type = REPLY_STR, .s = (v) })
#define RF_INT(k, v) ((struct reply_field){ .key = (k), .type = REPLY_INT, .i = (v) })
#define RF_BOOL(k, v) ((struct reply_field){ .key = (k), .type = REPLY_BOOL, .i = (v) })
/* Queue status with the object of the n fields f, in order: what
 * reply_json would give for it, written without building a json_t (the
 * answers of the lock cycle, a few fields each). */
enum MHD_Result reply_fields(struct request *rq, unsigned status, const struct reply_field *f,
			     size_t n);
/* Queue a text body; text is stolen (freed by MHD). */
enum MHD_Result reply_text(struct request *rq, unsigned status, const char *content_type,
			   char *text, size_t len);
/* Queue 200 with a file of the status page (data lives as long as the
 * process, never freed), or 304 and no body when not_modified: the
 * browser keeps it but asks again each time (Cache-Control: no-cache,
 * ETag etag), and the page gets its strict Content-Security-Policy (its
 * own files only; requests to dlockd itself only). */
enum MHD_Result reply_static(struct request *rq, const char *content_type, const char *data,
			     size_t len, const char *etag, int not_modified);
/* Queue {"error": code, "message": ...} with the status of err, plus any
 * fields of extra (stolen, may be NULL). 401 carries WWW-Authenticate,
 * 405 Allow from rq->route.allow; 409 locked and 503 Retry-After; with
 * rq->close, "Connection: close" (MHD closes once it is sent). */
enum MHD_Result reply_error(struct request *rq, enum api_error err, json_t *extra,
			    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The 503 backend_unavailable of a call Redis did not serve. With fault
 * (why: Redis refused it, or it was never sent), it changed nothing and
 * the message is fault. Without, it was sent and no answer came (the
 * connection was lost, or Redis stalled past 10 s): a call that changes
 * something may have, and says so, with "undone": false; a read says
 * only that Redis did not answer. */
enum MHD_Result reply_unavailable(struct request *rq, const char *fault);

#endif
