/* redis_url.c -- parsing the --redis URL (redis:// or unix://) into what a
 * connection needs, and hiding its password for logs.
 *
 * The URL is checked once, at start (config.c), so whatever this parser
 * does not understand is refused there with a message that names it,
 * rather than being passed on to Redis as part of a host, a password or
 * a socket path. The user, the password, the socket path and parameter
 * values are percent-decoded as RFC 3986 and every Redis client do; the
 * host, the port and the db are not (nothing in them needs escaping). */
#include "redis_url.h"

#include "util.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest db number: Redis' `databases` setting is an int. */
#define DB_MAX (INT_MAX - 1)

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

/* The query [a, b): db, user and password, each at most once. db_given
 * tells whether the path already chose a db. */
static int parse_query(struct parse *p, const char *a, const char *b, bool db_given,
		       struct redis_url *u)
{
	bool seen_db = false, seen_user = false, seen_password = false;

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
		} else {
			return refuse(p, "unknown parameter '%.*s' (known: db, user, password)",
				    (int)klen, a);
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

/* redis://[[user]:password@]host[:port][/db], up to the query. */
static int parse_tcp(struct parse *p, const char *s, const char *end, bool *db_given,
		     struct redis_url *u)
{
	const char *slash = memchr(s, '/', (size_t)(end - s));
	const char *auth_end = slash ? slash : end, *at, *host, *colon;

	/* RFC 3986 allows one raw '@' (after the password) and none in a
	 * query value; refusing any other catches a raw '/', '?' or '@' in a
	 * password before a part of it is taken for the host or quoted */
	at = memchr(s, '@', (size_t)(auth_end - s));
	if (strchr(at ? at + 1 : s, '@'))
		return refuse(p, "an '@' where none belongs: write '@', '/' and '?' in a user or "
			    "password as %%40, %%2F and %%3F");
	if (at) {
		colon = memchr(s, ':', (size_t)(at - s));
		if (!colon)
			return refuse(p, "a user without a password; write user:password@ "
				    "(or :password@ for the default user)");
		if (colon > s && decode(p, s, colon, "user", &u->user) < 0)
			return -1;
		if (decode(p, colon + 1, at, "password", &u->password) < 0)
			return -1;
		s = at + 1;
	}
	host = s;
	if (*s == '[') {
		const char *close = memchr(s, ']', (size_t)(auth_end - s));

		if (!close || !host6_ok(s + 1, close))
			return refuse(p, "host '%.*s' is not an IPv6 address in brackets",
				    (int)(auth_end - s), s);
		u->host = xasprintf("%.*s", (int)(close - s - 1), s + 1);
		colon = close + 1;
		if (colon < auth_end && *colon != ':')
			return refuse(p, "'%.*s' after the IPv6 address is not :PORT",
				    (int)(auth_end - colon), colon);
	} else {
		colon = memchr(s, ':', (size_t)(auth_end - s));
		if (!colon)
			colon = auth_end;
		if (!host_ok(s, colon))
			return refuse(p, "host '%.*s' is not a host name or IP address (a '/', "
				    "'?' or '@' in the password must be written %%2F, %%3F, %%40)",
				    (int)(colon - host), host);
		u->host = xasprintf("%.*s", (int)(colon - s), s);
	}
	if (colon < auth_end && parse_num(colon + 1, auth_end, 1, 65535, &u->port) < 0)
		return refuse(p, "port '%.*s' is not a number from 1 to 65535",
			    (int)(auth_end - colon - 1), colon + 1);
	if (slash && slash + 1 < end) {
		if (memchr(slash + 1, '/', (size_t)(end - slash - 1)))
			return refuse(p, "path '%.*s' is not /DB (a database number)",
				    (int)(end - slash), slash);
		if (parse_db(p, slash + 1, end, u) < 0)
			return -1;
		*db_given = true;
	}
	return 0;
}

int redis_url_parse(const char *s, struct redis_url *u, char *why, size_t why_len)
{
	struct parse p = { why, why_len };
	const char *q, *end;
	bool db_given = false;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
	if (why && why_len)
		why[0] = '\0';
	if (strchr(s, '#')) {
		refuse(&p, "a '#' is not allowed; write a '#' in a password as %%23");
		goto bad;
	}
	q = strchr(s, '?');
	end = q ? q : s + strlen(s);
	if (!strncmp(s, "unix://", 7)) {
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
	} else {
		const char *colon = strstr(s, "://");

		if (colon)
			refuse(&p, "scheme '%.*s' is not redis:// or unix:// (TLS is not supported)",
			     (int)(colon - s) > 16 ? 16 : (int)(colon - s), s);
		else
			refuse(&p, "not redis://host:port/db or unix:///path");
		goto bad;
	}
	if (q && parse_query(&p, q + 1, q + strlen(q), db_given, u) < 0)
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
	memset(u, 0, sizeof(*u));
}

char *redis_url_redacted(const char *s)
{
	const char *scheme = strstr(s, "://"), *rest, *q, *at;
	size_t cap = 2 * strlen(s) + 16;
	char *out = xmalloc(cap), *o = out;

	if (!scheme) {
		free(out);
		return xstrdup(s);
	}
	rest = scheme + 3;
	q = strchr(rest, '?');
	/* the last '@' before the query ends any user:password, even one
	 * with a raw '/' or '@' in it */
	at = NULL;
	for (const char *c = rest; *c && (!q || c < q); c++)
		if (*c == '@')
			at = c;
	o += sprintf(o, "%.*s", (int)(rest - s), s);
	if (at) {
		o += sprintf(o, "***");
		rest = at;
	}
	o += sprintf(o, "%.*s", q ? (int)(q - rest) : (int)strlen(rest), rest);
	if (q) {
		const char *c = q + 1;

		*o++ = '?';
		while (*c) {
			const char *amp = strchr(c, '&'), *e = amp ? amp : c + strlen(c);

			if (e - c >= 9 && !memcmp(c, "password=", 9))
				o += sprintf(o, "password=***");
			else
				o += sprintf(o, "%.*s", (int)(e - c), c);
			if (amp)
				*o++ = '&';
			c = amp ? amp + 1 : e;
		}
	}
	*o = '\0';
	return out;
}
