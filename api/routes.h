/* routes.h -- the route table: which operation a method and path name. */
#ifndef DLOCKD_ROUTES_H
#define DLOCKD_ROUTES_H

#include <stddef.h>

#include "service/lock/locks.h"

enum route_op {
	OP_NONE,
	OP_ACQUIRE,		/* PUT    /locks/{name}, /rwlocks/{name}/read, ... */
	OP_RELEASE,		/* DELETE the same */
	OP_STATUS,		/* GET    /locks/{name}, /rwlocks/{name} */
	OP_HEARTBEAT,		/* POST   .../heartbeat */
	OP_LIST,		/* GET    /locks: the locks held, every kind */
	OP_SET_LIMIT,		/* PUT    /semaphores/{name}/limit */
	OP_HEALTHZ,
	OP_READYZ,
	OP_METRICS,
	OP_OPENAPI,
	OP_INDEX,		/* GET    /: links to the resources below */
	OP_UI,			/* GET    /ui and its files: the status page */
	OP_SESSION_CREATE,	/* POST   /sessions */
	OP_SESSION_GET,		/* GET    /sessions/{id} */
	OP_SESSION_END,		/* DELETE /sessions/{id} */
	OP_SESSION_HEARTBEAT,	/* POST   /sessions/{id}/heartbeat */
	OP_SESSION_LOCKS,	/* PUT    /sessions/{id}/locks: all or nothing */
	OP_SESSION_LIST,	/* GET    /sessions: every open session (admins) */
};

/* Is op one of a session's (api/handle_sessions.c)? */
static inline int routes_session_op(enum route_op op)
{
	return op >= OP_SESSION_CREATE && op <= OP_SESSION_LIST;
}

/* HEAD is routed as GET (routes_match); ops[] rows never name it. */
enum http_method { METHOD_GET, METHOD_PUT, METHOD_POST, METHOD_DELETE, METHOD_HEAD,
		   METHOD_COUNT, METHOD_OTHER = METHOD_COUNT };

enum route_status {
	ROUTE_OK,			/* m->op is set */
	ROUTE_NOT_FOUND,		/* no route has this path */
	ROUTE_METHOD_NOT_ALLOWED,	/* m->allow lists the methods it takes */
};

struct route_match {
	enum route_op op;
	enum lock_kind kind;
	const char *name;	/* points into the path, still escaped; NULL for
				 * routes without one */
	size_t name_len;
	const char *allow;	/* "GET, HEAD, PUT, DELETE" */
	unsigned id;		/* index into routes_labels(); n when none matched */
};

/* The label of every route (its path with {name}) and "other" last; *n
 * is the number of routes. The array lives as long as the process. */
const char *const *routes_labels(unsigned *n);

enum http_method routes_method(const char *method);
/* Decode %HH escapes in place (MHD's unescape callback, for the query;
 * routes_name, for the name); "%00" stays as it is. Returns the new
 * length. */
size_t routes_unescape(char *s);

/* Match a path as the client sent it (still escaped, no query string)
 * and a method against the table. */
enum route_status routes_match(const char *path, enum http_method method,
			       struct route_match *m);
/* The name m points at, decoded, in a fresh string (NULL when out of
 * memory); *len is its length. It holds no NUL ("%00" is kept). */
char *routes_name(const struct route_match *m, size_t *len);

#endif
