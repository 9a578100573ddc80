/* request.h -- one HTTP request's state: what routing, auth and parameter
 * parsing (params.c) found, its lock call, and how it was answered. */
#ifndef DLOCKD_REQUEST_H
#define DLOCKD_REQUEST_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "service/lock/acquire.h"
#include "api/auth.h"
#include "service/config/config.h"
#include "service/lock/listing.h"
#include "service/lock/locks.h"
#include "service/lock/multilock.h"
#include "service/lock/sessions.h"
#include "service/lock/watch.h"
#include "api/request_id.h"
#include "api/routes.h"

#define NAME_MAX_LEN LOCKS_NAME_MAX
#define OWNER_MAX_LEN 128
/* an answer's body up to this many bytes is a small one (small_answer) */
#define SMALL_ANSWER 8192
/* A state's index is a fencing token (or 0, or 1): below 2^53. */
#define INDEX_MAX 9007199254740991LL

/* Which parameters an operation takes. */
enum param_flags {
	P_OWNER = 1 << 0,
	P_TTL = 1 << 1,
	P_WAIT = 1 << 2,
	P_FORCE = 1 << 3,
	P_REENTRANT = 1 << 4,
	P_INDEX = 1 << 5,
	P_PREFIX = 1 << 6,		/* the listing's */
	P_LIMIT = 1 << 7,
	P_CURSOR = 1 << 8,
	P_VALUE = 1 << 9,		/* a holder value */
	P_SESSION = 1 << 10,		/* an acquire's session id */
	P_LABEL = 1 << 11,		/* a session's name for humans ("name") */
};

struct params {
	unsigned given;			/* enum param_flags present */
	char owner[OWNER_MAX_LEN + 1];
	int64_t ttl_ms;
	int64_t wait_ms;
	bool force;
	bool reentrant;
	int64_t index;
	int64_t limit;
	int64_t ends_ms;		/* with session=: the session's end, in Redis'
					 * clock (0: unknown), which the grant's lease
					 * never passes */
	/* those seldom given, allocated as long as given (NULL: not given),
	 * freed by params_free(): a waiting request is not charged 1.7 KiB
	 * for text it seldom has (params_prefix, params_label: "" for NULL) */
	char *prefix;
	char *cursor;
	char *value;
	char *label;
	char session[SESSIONS_ID_LEN + 1];
};

/* A lock operation's side of a request: what it asks for and what Redis
 * answered. Nothing in it is HTTP; the handler fills and reads it. */
struct session_watch;

/* Which machine of a struct lock_call a request runs: at most one. */
enum lock_machine {
	LOCK_MACHINE_NONE,
	LOCK_MACHINE_ACQUIRE,
	LOCK_MACHINE_WATCH,
	LOCK_MACHINE_MULTI,
};

struct lock_call {
	struct params params;
	/* a single Redis call's outcome (release, heartbeat, status), stored
	 * by lock_done before the connection is resumed */
	enum lock_result result;
	struct lock_state state;
	/* the member of the union below in use, set where it is started; the
	 * others are not there (a waiting request is not charged for
	 * machines it does not run) */
	enum lock_machine machine;
	union {
		/* PUT: the acquire machine (service/lock/acquire.h): its
		 * inputs, its outcome, and all its waiting */
		struct acquire acquire;
		/* GET: the watch machine (service/lock/watch.h): one read, or
		 * a long poll for a change of state */
		struct watch watch;
		/* PUT /sessions/{id}/locks: the multi-lock machine and its
		 * entries (allocated, as each name, by put_session_locks;
		 * freed by session_locks_end): twice an acquire's size, kept
		 * out of every other request */
		struct multilock *multi;
	};
	/* an acquire with session=: the session's holding, once granted
	 * (api/handle_sessions.c records it) */
	struct session_holding holding;
	/* ... whether the session listed that holding when it was read */
	bool session_listed;
	/* ... while it waits: its session's end, heard (session_watch.h) */
	struct session_watch *session_watch;
};

/* Per-request state on MHD's *req_cls: made on the first callback, freed
 * when MHD reports the request completed. The HTTP side is here; the lock
 * operation's is in lock. */
struct request {
	struct MHD_Connection *conn;
	struct http_loop *hl;		/* the loop's HTTP side serving it (server.c) */
	struct http_daemon *hd;		/* ... and of it, the MHD daemon (server.c) */
	const struct backend *backend;	/* that loop's lock domain (server.c) */
	const struct config *cfg;
	enum http_method method;
	const char *method_name;	/* MHD's, valid for the request's life */
	char *url;			/* the path as sent (escaped, no query) */
	/* MHD's copy of the request target, as request_begin saw it (up to
	 * its first NUL): afterwards only its address is compared, it is
	 * never read (MHD cuts and decodes it in place). */
	const char *target;
	size_t target_len;
	bool target_ctl;		/* it holds a control byte or a space */
	enum route_status route_status;
	struct route_match route;
	char *name;			/* the lock name, decoded (routes_name) */
	char *body;
	size_t body_len;
	bool body_too_large;

	bool admin;			/* auth off, or an admin token */
	/* the name of the request's auth token (its 4th field in --auth-file),
	 * copied at the auth check; "" with auth off. Lock operations bind
	 * holdings to it; the access log may show it. Never the token. */
	char principal[AUTH_NAME_MAX + 1];
	/* logged on its lines and echoed as X-Request-Id (request_id.h) */
	char request_id[REQUEST_ID_MAX + 1];

	/* suspended (server_suspend) until something calls server_resume();
	 * MHD then calls the handler, which runs next */
	enum MHD_Result (*next)(struct request *rq);
	bool suspend_pending;		/* suspend once MHD returns */

	bool started;			/* the access handler has seen it */
	bool close;			/* answer with "Connection: close" */
	bool small_answer;		/* reply.c queued an answer with a body of
					 * 1 to SMALL_ANSWER bytes, not for HEAD:
					 * over TLS, server.c sends its header and
					 * body in one write */

	unsigned status;		/* answered with */
	const char *error;		/* its error code (reply_error), or NULL */
	int retry_after_s;		/* > 0: send Retry-After */
	int64_t started_us;

	struct lock_call lock;
	/* an answer built when the outcome came (a listing's page, which
	 * lives only during its callback); freed with the request */
	json_t *answer;
};

/* Every waiting request is charged its struct request: what few requests
 * need (a multi-lock, a listing's prefix, a session's name) is allocated
 * apart, and a request runs one machine of lock_call's union. It was
 * 2,320 bytes with all of them in it, 1,104 without. */
_Static_assert(sizeof(struct request) <= 1152,
	       "struct request grew: keep what few requests need out of it");

#endif
