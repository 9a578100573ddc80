/* redis_url.c -- parsing the --redis URL (redis://, rediss://, unix://,
 * redis-sentinel:// or rediss-sentinel://) into what a connection needs,
 * and hiding its passwords for logs.
 *
 * The URL is checked once, at start (config.c), so whatever this parser
 * does not understand is refused there with a message that names it,
 * rather than being passed on to Redis as part of a host, a password or
 * a socket path. The user, the password, the socket path and parameter
 * values are percent-decoded as RFC 3986 and every Redis client do; the
 * host, the port and the db are not (nothing in them needs escaping). */
#include "service/redis/redis_url.h"

#include "service/base/util.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest db number: Redis' `databases` setting is an int. */
#define DB_MAX (INT_MAX - 1)

#define SENTINEL_SCHEME "redis-sentinel://"
#define SENTINEL_TLS_SCHEME "rediss-sentinel://"
#define REDIS_SENTINEL_PORT 26379

struct parse {
	char *why;
	size_t why_len;
};

static int refuse(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(struct parse *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!p->why || !p->why_len)
		return -1;
	n = snprintf(p->why, p->why_len, "redis url: ");
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < p->why_len)
		vsnprintf(p->why + n, p->why_len - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* [a, b) percent-decoded into *out (malloc'd); what names the part for
 * the message. A '%' not followed by two hex digits, and %00 (a C string
 * cannot carry it), are refused. */
static int decode(struct parse *p, const char *a, const char *b, const char *what, char **out)
{
	char *s = xmalloc((size_t)(b - a) + 1), *o = s;

	for (const char *c = a; c < b; c++) {
		int hi, lo;

		if (*c != '%') {
			*o++ = *c;
			continue;
		}
		hi = c + 1 < b ? hex(c[1]) : -1;
		lo = c + 2 < b ? hex(c[2]) : -1;
		if (hi < 0 || lo < 0) {
			free(s);
			return refuse(p, "bad percent-escape in the %s: '%%' must be followed by two "
				    "hex digits (write a '%%' itself as %%25)", what);
		}
		if (hi == 0 && lo == 0) {
			free(s);
			return refuse(p, "the %s contains %%00, which Redis cannot be given", what);
		}
		*o++ = (char)(hi * 16 + lo);
		c += 2;
	}
	*o = '\0';
	*out = s;
	return 0;
}

/* [a, b) as a decimal number from min to max; -1 if it is not. */
static int parse_num(const char *a, const char *b, long min, long max, int *out)
{
	long v = 0;

	if (a == b || b - a > 10)
		return -1;
	for (const char *c = a; c < b; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		v = v * 10 + (*c - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_db(struct parse *p, const char *a, const char *b, struct redis_url *u)
{
	if (parse_num(a, b, 0, DB_MAX, &u->db) < 0)
		return refuse(p, "db '%.*s' is not a database number (0, 1, 2, ...)", (int)(b - a), a);
	return 0;
}

/* The query [a, b): db, user, password, tls and (sentinel:
 * redis-sentinel://) sentinel_password, each at most once. db_given tells
 * whether the path already chose a db; tls_scheme whether the scheme was
 * rediss:// or rediss-sentinel://. */
static int parse_query(struct parse *p, const char *a, const char *b, bool db_given,
		       bool sentinel, bool tls_scheme, struct redis_url *u)
{
	bool seen_db = false, seen_user = false, seen_password = false, seen_tls = false;

	while (a < b) {
		const char *amp = memchr(a, '&', (size_t)(b - a)), *end = amp ? amp : b;
		const char *eq = memchr(a, '=', (size_t)(end - a));
		size_t klen = eq ? (size_t)(eq - a) : (size_t)(end - a);

		if (end == a)
			return refuse(p, "empty parameter in the query (a stray '&')");
		if (!eq)
			return refuse(p, "parameter '%.*s' has no value (write %.*s=VALUE)",
				    (int)klen, a, (int)klen, a);
		if (klen == 2 && !memcmp(a, "db", 2)) {
			if (seen_db || db_given)
				return refuse(p, "db given twice (in the path and as ?db=, or twice)");
			seen_db = true;
			if (parse_db(p, eq + 1, end, u) < 0)
				return -1;
		} else if (klen == 4 && !memcmp(a, "user", 4)) {
			if (seen_user || u->user)
				return refuse(p, "user given twice");
			seen_user = true;
			if (decode(p, eq + 1, end, "user", &u->user) < 0)
				return -1;
		} else if (klen == 8 && !memcmp(a, "password", 8)) {
			if (seen_password || u->password)
				return refuse(p, "password given twice");
			seen_password = true;
			if (decode(p, eq + 1, end, "password", &u->password) < 0)
				return -1;
		} else if (klen == 3 && !memcmp(a, "tls", 3)) {
			size_t vlen = (size_t)(end - eq - 1);
			bool on = vlen == 4 && !memcmp(eq + 1, "true", 4);

			if (seen_tls)
				return refuse(p, "tls given twice");
			seen_tls = true;
			if (!on && !(vlen == 5 && !memcmp(eq + 1, "false", 5)))
				return refuse(p, "tls '%.*s' is not true or false", (int)vlen, eq + 1);
			if (!on && tls_scheme)
				return refuse(p, "tls=false with a rediss scheme, which is TLS; "
					    "write redis:// (or redis-sentinel://) for plaintext");
			if (on && u->unix_path)
				return refuse(p, "tls=true on a unix socket: TLS is for TCP "
					    "(rediss://host:port)");
			u->tls = u->tls || on;
		} else if (sentinel && klen == 17 && !memcmp(a, "sentinel_password", 17)) {
			if (u->sentinel_password)
				return refuse(p, "sentinel_password given twice");
			if (decode(p, eq + 1, end, "sentinel_password", &u->sentinel_password) < 0)
				return -1;
		} else {
			return refuse(p, "unknown parameter '%.*s' (known: db, user, password, tls%s)",
				    (int)klen, a, sentinel ? ", sentinel_password" : "");
		}
		a = amp ? amp + 1 : b;
		if (amp && a == b)
			return refuse(p, "empty parameter in the query (a stray '&')");
	}
	return 0;
}

/* A host name or IPv4 address: letters, digits, '.', '-', '_'. */
static bool host_ok(const char *a, const char *b)
{
	if (a == b)
		return false;
	for (const char *c = a; c < b; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_'))
			return false;
	return true;
}

/* An IPv6 address between brackets: hex digits, ':' and '.'. */
static bool host6_ok(const char *a, const char *b)
{
	if (a == b)
		return false;
	for (const char *c = a; c < b; c++)
		if (hex(*c) < 0 && *c != ':' && *c != '.')
			return false;
	return true;
}

/* [a, b) as host[:port] or [ipv6][:port] into *host (malloc'd) and *port
 * (left alone when no port is given). */
static int parse_hostport(struct parse *p, const char *a, const char *b, char **host, int *port)
{
	const char *colon;

	if (*a == '[') {
		const char *close = memchr(a, ']', (size_t)(b - a));

		if (!close || !host6_ok(a + 1, close))
			return refuse(p, "host '%.*s' is not an IPv6 address in brackets",
				    (int)(b - a), a);
		colon = close + 1;
		if (colon < b && *colon != ':')
			return refuse(p, "'%.*s' after the IPv6 address is not :PORT",
				    (int)(b - colon), colon);
		*host = xasprintf("%.*s", (int)(close - a - 1), a + 1);
	} else {
		colon = memchr(a, ':', (size_t)(b - a));
		if (!colon)
			colon = b;
		if (!host_ok(a, colon))
			return refuse(p, "host '%.*s' is not a host name or IP address (a '/', "
				    "'?' or '@' in the password must be written %%2F, %%3F, %%40)",
				    (int)(colon - a), a);
		*host = xasprintf("%.*s", (int)(colon - a), a);
	}
	if (colon < b && parse_num(colon + 1, b, 1, 65535, port) < 0)
		return refuse(p, "port '%.*s' is not a number from 1 to 65535",
			    (int)(b - colon - 1), colon + 1);
	return 0;
}

/* [[user]:password@] at s, before auth_end; *rest is past it. With
 * bare_password (redis-sentinel://, as Lettuce), "password@" without a
 * ':' is a password; else it is refused as a user without one. */
static int parse_userinfo(struct parse *p, const char *s, const char *auth_end,
			  bool bare_password, struct redis_url *u, const char **rest)
{
	const char *at, *colon;

	/* RFC 3986 allows one raw '@' (after the password) and none in a
	 * query value; refusing any other catches a raw '/', '?' or '@' in a
	 * password before a part of it is taken for the host or quoted */
	at = memchr(s, '@', (size_t)(auth_end - s));
	if (strchr(at ? at + 1 : s, '@'))
		return refuse(p, "an '@' where none belongs: write '@', '/' and '?' in a user or "
			    "password as %%40, %%2F and %%3F");
	*rest = s;
	if (!at)
		return 0;
	colon = memchr(s, ':', (size_t)(at - s));
	if (!colon && !bare_password)
		return refuse(p, "a user without a password; write user:password@ "
			    "(or :password@ for the default user)");
	if (colon && colon > s && decode(p, s, colon, "user", &u->user) < 0)
		return -1;
	if (decode(p, colon ? colon + 1 : s, at, "password", &u->password) < 0)
		return -1;
	*rest = at + 1;
	return 0;
}

/* [/db] at slash (NULL: none), up to end. */
static int parse_path_db(struct parse *p, const char *slash, const char *end, bool *db_given,
			 struct redis_url *u)
{
	if (!slash || slash + 1 >= end)
		return 0;
	if (memchr(slash + 1, '/', (size_t)(end - slash - 1)))
		return refuse(p, "path '%.*s' is not /DB (a database number)",
			    (int)(end - slash), slash);
	if (parse_db(p, slash + 1, end, u) < 0)
		return -1;
	*db_given = true;
	return 0;
}

/* host[:port][,host[:port]...] in [s, end) appended to *list (*n of
 * them), default_port where none is given; what names the list. */
static int parse_host_list(struct parse *p, const char *s, const char *end, int default_port,
			   const char *what, struct redis_host **list, unsigned *n)
{
	for (;;) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *e = comma ? comma : end;
		struct redis_host *h;

		if (s == e && (comma || *n))
			return refuse(p, "an empty host in the %s list (a stray ',')", what);
		*list = xrealloc(*list, (*n + 1) * sizeof(**list));
		h = &(*list)[(*n)++];
		h->host = NULL;
		h->port = default_port;
		if (parse_hostport(p, s, e, &h->host, &h->port) < 0)
			return -1;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

/* redis://[[user]:password@]host[:port][,host[:port]...][/db], up to the
 * query: one Redis, or the seeds of a cluster. */
static int parse_tcp(struct parse *p, const char *s, const char *end, bool *db_given,
		     struct redis_url *u)
{
	const char *slash = memchr(s, '/', (size_t)(end - s));
	const char *auth_end = slash ? slash : end;

	if (parse_userinfo(p, s, auth_end, false, u, &s) < 0 ||
	    parse_host_list(p, s, auth_end, 6379, "cluster seed", &u->seeds, &u->nseeds) < 0)
		return -1;
	u->host = xstrdup(u->seeds[0].host);
	u->port = u->seeds[0].port;
	return parse_path_db(p, slash, end, db_given, u);
}

/* redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db],
 * up to the query. */
static int parse_sentinels(struct parse *p, const char *s, const char *end, bool *db_given,
			   struct redis_url *u)
{
	const char *slash = memchr(s, '/', (size_t)(end - s));
	const char *auth_end = slash ? slash : end;

	if (parse_userinfo(p, s, auth_end, true, u, &s) < 0)
		return -1;
	if (s == auth_end)
		return refuse(p, "no sentinel: write redis-sentinel://host[:port][,host[:port]...]"
			    "#master");
	if (parse_host_list(p, s, auth_end, REDIS_SENTINEL_PORT, "sentinel", &u->sentinels,
			    &u->nsentinels) < 0)
		return -1;
	return parse_path_db(p, slash, end, db_given, u);
}

int redis_url_parse(const char *s, struct redis_url *u, char *why, size_t why_len)
{
	struct parse p = { why, why_len };
	const char *q, *end, *hash = strchr(s, '#');
	bool tls_sentinel = !strncmp(s, SENTINEL_TLS_SCHEME, strlen(SENTINEL_TLS_SCHEME));
	bool db_given = false, sentinel = tls_sentinel ||
					  !strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME));
	const char *url_end;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
	if (why && why_len)
		why[0] = '\0';
	if (hash && !sentinel) {
		refuse(&p, "a '#' is not allowed; write a '#' in a password as %%23");
		goto bad;
	}
	if (sentinel) {
		/* the fragment is the master's name, and the only '#' */
		if (!hash || !hash[1]) {
			refuse(&p, "no master name: a sentinel URL ends with #MASTER, the name "
			     "the sentinels monitor");
			goto bad;
		}
		if (strchr(hash + 1, '#')) {
			refuse(&p, "a second '#': write a '#' in a password or the master name "
			     "as %%23");
			goto bad;
		}
		if (decode(&p, hash + 1, hash + strlen(hash), "master name", &u->master) < 0)
			goto bad;
	}
	url_end = hash ? hash : s + strlen(s);
	q = memchr(s, '?', (size_t)(url_end - s));
	end = q ? q : url_end;
	if (sentinel) {
		u->tls = tls_sentinel;
		if (parse_sentinels(&p, s + strlen(tls_sentinel ? SENTINEL_TLS_SCHEME
								: SENTINEL_SCHEME),
				    end, &db_given, u) < 0)
			goto bad;
	} else if (!strncmp(s, "unix://", 7)) {
		if (s[7] != '/' || s + 8 >= end) {
			refuse(&p, "a unix URL is unix:///absolute/path/to/socket (three slashes)");
			goto bad;
		}
		if (decode(&p, s + 7, end, "socket path", &u->unix_path) < 0)
			goto bad;
		if (q && strchr(q, '@')) {
			refuse(&p, "an '@' in the query: write an '@' in a password as %%40");
			goto bad;
		}
	} else if (!strncmp(s, "redis://", 8)) {
		if (parse_tcp(&p, s + 8, end, &db_given, u) < 0)
			goto bad;
	} else if (!strncmp(s, "rediss://", 9)) {
		u->tls = true;
		if (parse_tcp(&p, s + 9, end, &db_given, u) < 0)
			goto bad;
	} else {
		const char *colon = strstr(s, "://");

		if (colon)
			refuse(&p, "scheme '%.*s' is not redis://, rediss://, unix://, "
			     "redis-sentinel:// or rediss-sentinel://",
			     (int)(colon - s) > 16 ? 16 : (int)(colon - s), s);
		else
			refuse(&p, "not redis://host:port/db, rediss://host:port/db, unix:///path or "
			     "redis-sentinel://host:port,...#master");
		goto bad;
	}
	if (q && parse_query(&p, q + 1, url_end, db_given, sentinel, u->tls, u) < 0)
		goto bad;
	if (u->user && !u->password) {
		refuse(&p, "a user without a password (give password= too)");
		goto bad;
	}
	return 0;
bad:
	redis_url_release(u);
	return -1;
}

void redis_url_release(struct redis_url *u)
{
	free(u->host);
	free(u->unix_path);
	free(u->user);
	free(u->password);
	for (unsigned i = 0; i < u->nsentinels; i++)
		free(u->sentinels[i].host);
	free(u->sentinels);
	for (unsigned i = 0; i < u->nseeds; i++)
		free(u->seeds[i].host);
	free(u->seeds);
	free(u->master);
	free(u->sentinel_password);
	memset(u, 0, sizeof(*u));
}

char *redis_url_redacted(const char *s)
{
	const char *scheme = strstr(s, "://"), *rest, *q, *at, *frag, *end;
	size_t cap = 2 * strlen(s) + 16;
	char *out = xmalloc(cap), *o = out;

	if (!scheme) {
		free(out);
		return xstrdup(s);
	}
	rest = scheme + 3;
	q = strchr(rest, '?');
	/* a sentinel URL's master name, after its last '#', is shown as is;
	 * a '#' anywhere else is part of what it ends, and hidden with it */
	frag = !strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) ||
			       !strncmp(s, SENTINEL_TLS_SCHEME, strlen(SENTINEL_TLS_SCHEME))
		       ? strrchr(rest, '#') : NULL;
	if (frag && q && frag < q)
		frag = NULL;	/* hide more */
	end = frag ? frag : rest + strlen(rest);
	/* the last '@' before the query ends any user:password, even one
	 * with a raw '/' or '@' in it */
	at = NULL;
	for (const char *c = rest; c < end && (!q || c < q); c++)
		if (*c == '@')
			at = c;
	o += sprintf(o, "%.*s", (int)(rest - s), s);
	if (at) {
		o += sprintf(o, "***");
		rest = at;
	}
	o += sprintf(o, "%.*s", (int)((q ? q : end) - rest), rest);
	if (q) {
		const char *c = q + 1;

		*o++ = '?';
		while (c < end) {
			const char *amp = memchr(c, '&', (size_t)(end - c)), *e = amp ? amp : end;

			if (e - c >= 9 && !memcmp(c, "password=", 9))
				o += sprintf(o, "password=***");
			else if (e - c >= 18 && !memcmp(c, "sentinel_password=", 18))
				o += sprintf(o, "sentinel_password=***");
			else
				o += sprintf(o, "%.*s", (int)(e - c), c);
			if (amp)
				*o++ = '&';
			c = amp ? amp + 1 : e;
		}
	}
	o += sprintf(o, "%s", frag ? frag : "");
	*o = '\0';
	return out;
}
