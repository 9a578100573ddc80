/* log.c -- one line per event on stderr: a JSON object by default
 * ({"ts","level","msg"} or, for requests, the access fields), or
 * "<time> <level> <message>" with --log-format text. Each line goes out
 * in one write(2), so lines from several threads never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4096

static volatile int log_level = LOG_INFO;
static volatile int log_format = LOG_FORMAT_JSON;
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

struct line {
	char buf[LINE_MAX_BYTES];
	size_t n;
};

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (l->n >= sizeof(l->buf) - 2)
		return;
	va_start(ap, fmt);
	k = vsnprintf(l->buf + l->n, sizeof(l->buf) - 2 - l->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		l->n += (size_t)k < sizeof(l->buf) - 2 - l->n ? (size_t)k : sizeof(l->buf) - 2 - l->n - 1;
}

/* s as a JSON string: quotes, backslashes and every byte outside
 * printable ASCII escaped, so the line is valid JSON whatever s holds. */
static void put_json_string(struct line *l, const char *s)
{
	put(l, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			put(l, "\\%c", c);
		else if (c < 0x20 || c > 0x7e)
			put(l, "\\u%04x", c);
		else
			put(l, "%c", c);
	}
	put(l, "\"");
}

static void put_time(struct line *l)
{
	struct timeval tv;
	struct tm tm;
	char ts[32];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	if (log_format == LOG_FORMAT_JSON)
		put(l, "{\"ts\":\"%s.%03dZ\"", ts, (int)(tv.tv_usec / 1000));
	else
		put(l, "%s.%03dZ", ts, (int)(tv.tv_usec / 1000));
}

static void start(struct line *l, enum log_level level)
{
	l->n = 0;
	put_time(l);
	if (log_format == LOG_FORMAT_JSON)
		put(l, ",\"level\":\"%s\"", level_names[level]);
	else
		put(l, " %-5s", level_names[level]);
}

static void finish(struct line *l)
{
	if (log_format == LOG_FORMAT_JSON)
		put(l, "}");
	l->buf[l->n++] = '\n';
	if (write(STDERR_FILENO, l->buf, l->n) < 0) {
		/* nowhere left to report it */
	}
}

/* ----- Entry points ----- */

void log_msg(enum log_level level, const char *fmt, ...)
{
	struct line l;
	char msg[2048];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	start(&l, level);
	if (log_format == LOG_FORMAT_JSON) {
		put(&l, ",\"msg\":");
		put_json_string(&l, msg);
	} else {
		put(&l, " %s", msg);
	}
	finish(&l);
}

void log_access(const struct log_access *a)
{
	struct line l;

	if (!log_enabled(LOG_INFO))
		return;
	start(&l, LOG_INFO);
	if (log_format == LOG_FORMAT_TEXT) {
		put(&l, " %s %s %u %.3fms", a->method, a->path, a->status, a->duration_ms);
		if (a->lock)
			put(&l, " %s=%s", a->kind ? a->kind : "lock", a->lock);
		if (a->owner)
			put(&l, " owner=%s", a->owner);
		if (!a->delivered)
			put(&l, " (not delivered)");
		finish(&l);
		return;
	}
	put(&l, ",\"msg\":\"request\",\"method\":");
	put_json_string(&l, a->method);
	put(&l, ",\"path\":");
	put_json_string(&l, a->path);
	put(&l, ",\"status\":%u,\"duration_ms\":%.3f", a->status, a->duration_ms);
	if (a->lock) {
		put(&l, ",\"kind\":");
		put_json_string(&l, a->kind);
		put(&l, ",\"lock\":");
		put_json_string(&l, a->lock);
	}
	if (a->owner) {
		put(&l, ",\"owner\":");
		put_json_string(&l, a->owner);
	}
	if (!a->delivered)
		put(&l, ",\"delivered\":false");
	finish(&l);
}
