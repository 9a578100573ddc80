/* routes.c -- the route table. A row is a fixed path, or a prefix and a
 * suffix with the lock name between them; rows with longer suffixes come
 * first so "/locks/a/heartbeat" is the heartbeat of "a", not a lock named
 * "a/heartbeat" (which would be refused as an invalid name anyway).
 *
 * Paths are matched as the client sent them, escapes and all, and only the
 * name is decoded afterwards: "/rwlocks/a%2Fwrite" is the status resource
 * of a lock named "a/write" (an invalid name), never the write side of
 * "a". HEAD is taken wherever GET is (RFC 9110 §9.3.2). */
#include "api/routes.h"

#include <stdlib.h>
#include <string.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct route {
	const char *label;	/* for metrics: the path with {name} */
	const char *prefix;	/* whole path when suffix is NULL */
	const char *suffix;	/* after the name; NULL = fixed path, no name */
	enum lock_kind kind;
	enum route_op ops[METHOD_COUNT];	/* by method; OP_NONE = not allowed */
	const char *allow;
};

#define LOCK_OPS { [METHOD_GET] = OP_STATUS, [METHOD_PUT] = OP_ACQUIRE, \
		   [METHOD_DELETE] = OP_RELEASE }
#define SIDE_OPS { [METHOD_PUT] = OP_ACQUIRE, [METHOD_DELETE] = OP_RELEASE }
#define HEARTBEAT { [METHOD_POST] = OP_HEARTBEAT }

static const struct route routes[] = {
	{ "/locks/{name}/heartbeat", "/locks/", "/heartbeat", LOCK_KIND_LOCK, HEARTBEAT, "POST" },
	{ "/locks/{name}", "/locks/", "", LOCK_KIND_LOCK, LOCK_OPS, "GET, HEAD, PUT, DELETE" },
	{ "/fairlocks/{name}/heartbeat", "/fairlocks/", "/heartbeat", LOCK_KIND_FAIR, HEARTBEAT, "POST" },
	{ "/fairlocks/{name}", "/fairlocks/", "", LOCK_KIND_FAIR, LOCK_OPS, "GET, HEAD, PUT, DELETE" },
	{ "/rwlocks/{name}/write/heartbeat", "/rwlocks/", "/write/heartbeat", LOCK_KIND_WRITE, HEARTBEAT, "POST" },
	{ "/rwlocks/{name}/read/heartbeat", "/rwlocks/", "/read/heartbeat", LOCK_KIND_READ, HEARTBEAT, "POST" },
	{ "/rwlocks/{name}/write", "/rwlocks/", "/write", LOCK_KIND_WRITE, SIDE_OPS, "PUT, DELETE" },
	{ "/rwlocks/{name}/read", "/rwlocks/", "/read", LOCK_KIND_READ, SIDE_OPS, "PUT, DELETE" },
	{ "/rwlocks/{name}", "/rwlocks/", "", LOCK_KIND_READ, { [METHOD_GET] = OP_STATUS }, "GET, HEAD" },
	{ "/semaphores/{name}/heartbeat", "/semaphores/", "/heartbeat", LOCK_KIND_SEMAPHORE, HEARTBEAT, "POST" },
	{ "/semaphores/{name}/limit", "/semaphores/", "/limit", LOCK_KIND_SEMAPHORE, { [METHOD_PUT] = OP_SET_LIMIT }, "PUT" },
	{ "/semaphores/{name}", "/semaphores/", "", LOCK_KIND_SEMAPHORE, LOCK_OPS, "GET, HEAD, PUT, DELETE" },
	{ "/locks", "/locks", NULL, 0, { [METHOD_GET] = OP_LIST }, "GET, HEAD" },
	/* sessions (api/handle_sessions.c): the name is the session id */
	{ "/sessions/{id}/heartbeat", "/sessions/", "/heartbeat", 0, { [METHOD_POST] = OP_SESSION_HEARTBEAT }, "POST" },
	{ "/sessions/{id}/locks", "/sessions/", "/locks", 0, { [METHOD_PUT] = OP_SESSION_LOCKS }, "PUT" },
	{ "/sessions/{id}", "/sessions/", "", 0, { [METHOD_GET] = OP_SESSION_GET, [METHOD_DELETE] = OP_SESSION_END }, "GET, HEAD, DELETE" },
	{ "/sessions", "/sessions", NULL, 0, { [METHOD_GET] = OP_SESSION_LIST, [METHOD_POST] = OP_SESSION_CREATE }, "GET, HEAD, POST" },
	{ "/healthz", "/healthz", NULL, 0, { [METHOD_GET] = OP_HEALTHZ }, "GET, HEAD" },
	{ "/readyz", "/readyz", NULL, 0, { [METHOD_GET] = OP_READYZ }, "GET, HEAD" },
	{ "/metrics", "/metrics", NULL, 0, { [METHOD_GET] = OP_METRICS }, "GET, HEAD" },
	{ "/openapi.yaml", "/openapi.yaml", NULL, 0, { [METHOD_GET] = OP_OPENAPI }, "GET, HEAD" },
	{ "/", "/", NULL, 0, { [METHOD_GET] = OP_INDEX }, "GET, HEAD" },
	/* the status page: one row a file of api/ui/ (api/handle_ui.c) */
	{ "/ui", "/ui", NULL, 0, { [METHOD_GET] = OP_UI }, "GET, HEAD" },
	{ "/ui/app.js", "/ui/app.js", NULL, 0, { [METHOD_GET] = OP_UI }, "GET, HEAD" },
	{ "/ui/style.css", "/ui/style.css", NULL, 0, { [METHOD_GET] = OP_UI }, "GET, HEAD" },
	{ "/ui/icon.svg", "/ui/icon.svg", NULL, 0, { [METHOD_GET] = OP_UI }, "GET, HEAD" },
};

static const char *labels[ARRAY_LEN(routes) + 1];

const char *const *routes_labels(unsigned *n)
{
	for (size_t i = 0; i < ARRAY_LEN(routes); i++)
		labels[i] = routes[i].label;
	labels[ARRAY_LEN(routes)] = "other";
	*n = ARRAY_LEN(routes);
	return labels;
}

enum http_method routes_method(const char *method)
{
	static const char *const names[METHOD_COUNT] = { "GET", "PUT", "POST", "DELETE",
							  "HEAD" };

	for (int i = 0; i < METHOD_COUNT; i++)
		if (!strcmp(method, names[i]))
			return (enum http_method)i;
	return METHOD_OTHER;
}

static int path_matches(const struct route *r, const char *path, struct route_match *m)
{
	size_t plen = strlen(path), pre = strlen(r->prefix), suf;

	if (!r->suffix) {
		m->name = NULL;
		m->name_len = 0;
		return !strcmp(path, r->prefix);
	}
	suf = strlen(r->suffix);
	if (plen < pre + suf || strncmp(path, r->prefix, pre) ||
	    strcmp(path + plen - suf, r->suffix))
		return 0;
	m->name = path + pre;
	m->name_len = plen - pre - suf;
	return 1;
}

enum route_status routes_match(const char *path, enum http_method method,
			       struct route_match *m)
{
	memset(m, 0, sizeof(*m));
	m->id = ARRAY_LEN(routes);
	for (size_t i = 0; i < ARRAY_LEN(routes); i++) {
		const struct route *r = &routes[i];

		if (!path_matches(r, path, m))
			continue;
		m->kind = r->kind;
		m->allow = r->allow;
		m->id = (unsigned)i;
		if (method == METHOD_HEAD)
			method = METHOD_GET;	/* the same answer, without its body */
		if (method == METHOD_OTHER || r->ops[method] == OP_NONE)
			return ROUTE_METHOD_NOT_ALLOWED;
		m->op = r->ops[method];
		return ROUTE_OK;
	}
	return ROUTE_NOT_FOUND;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 32;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode %HH escapes like MHD's own unescaper, except %00: a NUL would cut
 * the path short silently, so it stays as the three characters "%00" and
 * the name validator refuses it. */
size_t routes_unescape(char *s)
{
	char *out = s;
	const char *in = s;

	while (*in) {
		int hi = in[0] == '%' && in[1] ? hex_value(in[1]) : -1;
		int lo = hi >= 0 && in[2] ? hex_value(in[2]) : -1;

		if (lo >= 0 && (hi || lo)) {
			*out++ = (char)(hi * 16 + lo);
			in += 3;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
	return (size_t)(out - s);
}

char *routes_name(const struct route_match *m, size_t *len)
{
	char *name = malloc(m->name_len + 1);

	if (!name)
		return NULL;
	memcpy(name, m->name, m->name_len);
	name[m->name_len] = '\0';
	*len = routes_unescape(name);
	return name;
}
