/* log.c -- one line per event on stderr: a JSON object by default
 * ({"ts","level","msg"} or, for requests, the access fields), or
 * "<time> <level> <message>" with --log-format text. Each line goes out
 * in one write(2), so lines from several threads never interleave.
 *
 * Whatever a client sent (paths, names, owners, quoted in messages) can
 * neither break a line nor forge one: JSON strings are escaped per RFC 8259
 * (control characters as \uXXXX or \n, \r, \t; valid UTF-8 passed through
 * as it is; each byte that is not part of valid UTF-8 replaced by U+FFFD),
 * and text fields escape control characters, backslashes and bytes that
 * are not valid UTF-8 as \n, \r, \t, \\ or \xHH (spaces too in access
 * fields, which are separated by spaces). A field longer than its cap is
 * cut at a character boundary and ends in "...[+N bytes]", so every line
 * is whole and parses. An access line names the error code of an error
 * answer, the request id, the caller's token name and address, and a
 * forced release says so; its level follows the answer (log_access_level).
 * A line logged while a thread serves a request carries its id. */
#include "service/base/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Caps on what one field may take of the input, in bytes. */
#define MSG_MAX_BYTES 2048
#define FIELD_MAX_BYTES 1024

static volatile int log_level = LOG_INFO;
static volatile int log_format = LOG_FORMAT_JSON;
static int log_fd = STDERR_FILENO;	/* the unit test points it elsewhere */
static _Thread_local const char *request_id;	/* log_set_request */
static const char *const level_names[] = { "error", "warn", "info", "debug" };
static const char *const format_names[] = { "json", "text" };

static int lookup(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

int log_level_parse(const char *s)
{
	return lookup(s, level_names, 4);
}

int log_format_parse(const char *s)
{
	return lookup(s, format_names, 2);
}

void log_set_level(enum log_level level)
{
	log_level = level;
}

void log_set_format(enum log_format format)
{
	log_format = format;
}

int log_enabled(enum log_level level)
{
	return (int)level <= log_level;
}

/* ----- Building a line ----- */

/* A line grows as needed (the fields are capped, so it stays a few KB);
 * it starts on the stack. Out of memory, what fits is written. */
struct line {
	char *buf;
	size_t n, cap;
	char stack[1024];
};

static bool reserve(struct line *l, size_t more)
{
	size_t cap = l->cap;
	char *p;

	if (l->n + more <= l->cap)
		return true;
	while (cap < l->n + more)
		cap *= 2;
	p = l->buf == l->stack ? malloc(cap) : realloc(l->buf, cap);
	if (!p)
		return false;
	if (l->buf == l->stack)
		memcpy(p, l->stack, l->n);
	l->buf = p;
	l->cap = cap;
	return true;
}

static void put_bytes(struct line *l, const char *s, size_t len)
{
	if (!reserve(l, len + 2))	/* room for "}\n" is kept */
		return;
	memcpy(l->buf + l->n, s, len);
	l->n += len;
}

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *l, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (k > 0)	/* callers format only short, fixed things */
		put_bytes(l, tmp, (size_t)k < sizeof(tmp) ? (size_t)k : sizeof(tmp) - 1);
}

/* The cheap forms of put for what every access line carries (a constant,
 * a number, the time): no vsnprintf on the path every request takes. */
static void put_str(struct line *l, const char *s)
{
	put_bytes(l, s, strlen(s));
}

static void put_ull(struct line *l, unsigned long long v)
{
	char tmp[24];
	size_t i = sizeof(tmp);

	do
		tmp[--i] = (char)('0' + v % 10);
	while (v /= 10);
	put_bytes(l, tmp + i, sizeof(tmp) - i);
}

static void put_ll(struct line *l, long long v)
{
	if (v < 0) {
		put_bytes(l, "-", 1);
		put_ull(l, 0ULL - (unsigned long long)v);
	} else {
		put_ull(l, (unsigned long long)v);
	}
}

/* A field's key: ,"key": in JSON, " key=" in text. */
static void put_key(struct line *l, const char *key)
{
	bool json = log_format == LOG_FORMAT_JSON;

	put_str(l, json ? ",\"" : " ");
	put_str(l, key);
	put_str(l, json ? "\":" : "=");
}

/* v with exactly three decimals, as "%.3f" prints it (a request's
 * duration: whole microseconds in milliseconds). */
static void put_ms3(struct line *l, double v)
{
	long long us;
	char frac[4];

	if (!(v >= 0 && v < 1e12)) {	/* negative, NaN or absurd: the slow way */
		put(l, "%.3f", v);
		return;
	}
	us = (long long)(v * 1000.0 + 0.5);
	put_ull(l, (unsigned long long)(us / 1000));
	frac[0] = '.';
	frac[1] = (char)('0' + us / 100 % 10);
	frac[2] = (char)('0' + us / 10 % 10);
	frac[3] = (char)('0' + us % 10);
	put_bytes(l, frac, 4);
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0 if
 * the byte there does not start one (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
size_t log_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	if (c == 0xe0)
		lo = 0xa0;	/* overlong */
	else if (c == 0xed)
		hi = 0x9f;	/* surrogates */
	else if (c == 0xf0)
		lo = 0x90;	/* overlong */
	else if (c == 0xf4)
		hi = 0x8f;	/* above U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* s (len bytes, at most max of them) as a JSON string. */
static void put_json_n(struct line *l, const char *s, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	put_bytes(l, "\"", 1);
	while (i < len) {
		unsigned char c = p[i];
		size_t k = log_utf8_len(p + i, len - i);

		if (i + (k ? k : 1) > max)
			break;
		if (c == '"' || c == '\\')
			put_bytes(l, c == '"' ? "\\\"" : "\\\\", 2);
		else if (c == '\n')
			put_bytes(l, "\\n", 2);
		else if (c == '\r')
			put_bytes(l, "\\r", 2);
		else if (c == '\t')
			put_bytes(l, "\\t", 2);
		else if (c < 0x20 || c == 0x7f)
			put(l, "\\u%04x", c);
		else if (!k)
			put_bytes(l, "\\ufffd", 6);
		else
			put_bytes(l, s + i, k);
		i += k ? k : 1;
	}
	if (i < len)
		put(l, "\\u2026[+%zu bytes]", len - i);
	put_bytes(l, "\"", 1);
}

static void put_json_string(struct line *l, const char *s, size_t max)
{
	put_json_n(l, s ? s : "", s ? strlen(s) : 0, max);
}

/* s for a text line: one line, whatever it holds; with spaces_too, no
 * spaces either (access fields are separated by them). */
static void put_text(struct line *l, const char *s, size_t max, bool spaces_too)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)p), i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t k = log_utf8_len(p + i, len - i);

		if (i + (k ? k : 1) > max)
			break;
		if (c == '\\')
			put_bytes(l, "\\\\", 2);
		else if (c == '\n')
			put_bytes(l, "\\n", 2);
		else if (c == '\r')
			put_bytes(l, "\\r", 2);
		else if (c == '\t')
			put_bytes(l, "\\t", 2);
		else if (c < 0x20 || c == 0x7f || !k || (c == ' ' && spaces_too))
			put(l, "\\x%02x", c);
		else
			put_bytes(l, (const char *)p + i, k);
		i += k ? k : 1;
	}
	if (i < len)
		put(l, "...[+%zu bytes]", len - i);
}

/* "YYYY-MM-DDTHH:MM:SS" of the current second, formatted once per second
 * per thread (gmtime_r and strftime are most of a line's cost otherwise). */
static void put_time(struct line *l)
{
	static _Thread_local time_t cached_sec = -1;
	static _Thread_local char cached[32];
	static _Thread_local size_t cached_len;
	struct timeval tv;
	char ms[5];
	int msec;

	gettimeofday(&tv, NULL);
	if (tv.tv_sec != cached_sec) {
		struct tm tm;

		gmtime_r(&tv.tv_sec, &tm);
		cached_len = strftime(cached, sizeof(cached), "%Y-%m-%dT%H:%M:%S", &tm);
		cached_sec = tv.tv_sec;
	}
	msec = (int)(tv.tv_usec / 1000);
	ms[0] = '.';
	ms[1] = (char)('0' + msec / 100);
	ms[2] = (char)('0' + msec / 10 % 10);
	ms[3] = (char)('0' + msec % 10);
	ms[4] = 'Z';
	if (log_format == LOG_FORMAT_JSON)
		put_str(l, "{\"ts\":\"");
	put_bytes(l, cached, cached_len);
	put_bytes(l, ms, sizeof(ms));
	if (log_format == LOG_FORMAT_JSON)
		put_bytes(l, "\"", 1);
}

static void line_start(struct line *l, enum log_level level)
{
	l->buf = l->stack;
	l->cap = sizeof(l->stack);
	l->n = 0;
	put_time(l);
	static const char *const padded[] = { " error", " warn ", " info ", " debug" };

	if (log_format == LOG_FORMAT_JSON) {
		put_str(l, ",\"level\":\"");
		put_str(l, level_names[level]);
		put_bytes(l, "\"", 1);
	} else {
		put_str(l, padded[level]);	/* " %-5s" */
	}
}

static void put_request_id(struct line *l, const char *id)
{
	if (!id)
		return;
	if (log_format == LOG_FORMAT_JSON) {
		put_str(l, ",\"request_id\":");
		put_json_string(l, id, FIELD_MAX_BYTES);
	} else {
		put_str(l, " request_id=");
		put_text(l, id, FIELD_MAX_BYTES, true);
	}
}

static void line_finish(struct line *l)
{
	/* put_bytes always keeps two bytes spare */
	if (log_format == LOG_FORMAT_JSON)
		l->buf[l->n++] = '}';
	l->buf[l->n++] = '\n';
	if (write(log_fd, l->buf, l->n) < 0) {
		/* nowhere left to report it */
	}
	if (l->buf != l->stack)
		free(l->buf);
}

/* ----- Entry points ----- */

void log_msg(enum log_level level, const char *fmt, ...)
{
	struct line l;
	char msg[MSG_MAX_BYTES + 1];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	line_start(&l, level);
	if (log_format == LOG_FORMAT_JSON) {
		put_str(&l, ",\"msg\":");
		put_json_string(&l, msg, MSG_MAX_BYTES);
	} else {
		put_bytes(&l, " ", 1);
		put_text(&l, msg, MSG_MAX_BYTES, false);
	}
	put_request_id(&l, request_id);
	line_finish(&l);
}

void log_set_request(const char *id)
{
	request_id = id;
}

void log_fields(enum log_level level, const char *msg, const struct log_field *f, size_t n)
{
	struct line l;

	if (!log_enabled(level))
		return;
	line_start(&l, level);
	if (log_format == LOG_FORMAT_JSON) {
		put_str(&l, ",\"msg\":");
		put_json_string(&l, msg, MSG_MAX_BYTES);
	} else {
		put_bytes(&l, " ", 1);
		put_text(&l, msg, MSG_MAX_BYTES, false);
	}
	for (size_t i = 0; i < n; i++) {
		if (log_format == LOG_FORMAT_JSON) {
			put_key(&l, f[i].key);
			if (f[i].str)
				put_json_string(&l, f[i].str, FIELD_MAX_BYTES);
			else
				put_ll(&l, f[i].num);
		} else {
			put_key(&l, f[i].key);
			if (f[i].str)
				put_text(&l, f[i].str, FIELD_MAX_BYTES, true);
			else
				put_ll(&l, f[i].num);
		}
	}
	line_finish(&l);
}

/* The access fields every line may carry, after the lock: " key=value"
 * in text, ,"key":"value" in JSON; NULL values are left out. */
static void access_fields(struct line *l, const struct log_access *a)
{
	const struct { const char *key, *value; } f[] = {
		{ "owner", a->owner }, { "error", a->error },
		{ "principal", a->principal }, { "peer", a->peer },
		{ "request_id", a->request_id },
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (!f[i].value)
			continue;
		if (log_format == LOG_FORMAT_JSON) {
			put_key(l, f[i].key);
			put_json_string(l, f[i].value, FIELD_MAX_BYTES);
		} else {
			put_key(l, f[i].key);
			put_text(l, f[i].value, FIELD_MAX_BYTES, true);
		}
	}
	if (a->force)
		put_str(l, log_format == LOG_FORMAT_JSON ? ",\"force\":true" : " force");
}

static void access_text(struct line *l, const struct log_access *a)
{
	put_bytes(l, " ", 1);
	put_text(l, a->method ? a->method : "-", FIELD_MAX_BYTES, true);
	put_bytes(l, " ", 1);
	put_text(l, a->path ? a->path : "-", FIELD_MAX_BYTES, true);
	put_bytes(l, " ", 1);
	put_ull(l, a->status);
	put_bytes(l, " ", 1);
	put_ms3(l, a->duration_ms);
	put_str(l, "ms");
	if (a->lock) {
		put_bytes(l, " ", 1);
		put_text(l, a->kind ? a->kind : "lock", FIELD_MAX_BYTES, true);
		put_bytes(l, "=", 1);
		put_text(l, a->lock, FIELD_MAX_BYTES, true);
	}
	access_fields(l, a);
	if (a->why) {
		put_str(l, " (");
		put_text(l, a->why, FIELD_MAX_BYTES, false);
		put_str(l, ")");
	}
	if (!a->delivered)
		put_str(l, " (not delivered)");
}

enum log_level log_access_level(const struct log_access *a)
{
	if (a->status >= 500)
		return LOG_WARN;
	if (a->quiet && a->status < 400)
		return LOG_DEBUG;
	return LOG_INFO;
}

void log_access(const struct log_access *a)
{
	enum log_level level = log_access_level(a);
	struct line l;

	if (!log_enabled(level))
		return;
	line_start(&l, level);
	if (log_format == LOG_FORMAT_TEXT) {
		access_text(&l, a);
		line_finish(&l);
		return;
	}
	put_str(&l, ",\"msg\":\"request\"");
	if (a->method) {
		put_str(&l, ",\"method\":");
		put_json_string(&l, a->method, FIELD_MAX_BYTES);
	}
	if (a->path) {
		put_str(&l, ",\"path\":");
		put_json_string(&l, a->path, FIELD_MAX_BYTES);
	}
	put_str(&l, ",\"status\":");
	put_ull(&l, a->status);
	put_str(&l, ",\"duration_ms\":");
	put_ms3(&l, a->duration_ms);
	if (a->lock) {
		put_str(&l, ",\"kind\":");
		put_json_string(&l, a->kind, FIELD_MAX_BYTES);
		put_str(&l, ",\"lock\":");
		put_json_string(&l, a->lock, FIELD_MAX_BYTES);
	}
	access_fields(&l, a);
	if (a->why) {
		put_str(&l, ",\"why\":");
		put_json_string(&l, a->why, FIELD_MAX_BYTES);
	}
	if (!a->delivered)
		put_str(&l, ",\"delivered\":false");
	line_finish(&l);
}
