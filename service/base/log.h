/* log.h -- leveled log lines on stderr, one JSON object per line (or plain
 * text for people), and the access log line of each request. */
#ifndef DLOCKD_LOG_H
#define DLOCKD_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_ERROR,	/* the service cannot do what it was asked */
	LOG_WARN,	/* something went wrong and was handled (Redis lost) */
	LOG_INFO,	/* start, stop, reconnect, one access line per request */
	LOG_DEBUG,	/* details for chasing a problem */
};

enum log_format {
	LOG_FORMAT_JSON,	/* {"ts":..., "level":..., "msg":...} */
	LOG_FORMAT_TEXT,	/* "<ts> <level> <msg>" */
};

/* What one answered request was. Strings may be NULL (left out of the
 * line). Any bytes may be in them: the line escapes what it must. */
struct log_access {
	const char *method;
	const char *path;	/* the path as the client sent it, no query string */
	unsigned status;
	double duration_ms;
	const char *kind;	/* lock kind label */
	const char *lock;
	const char *owner;
	const char *error;	/* the error code answered ("locked"), if any */
	int force;		/* a forced release was asked for */
	const char *principal;	/* the name of the caller's token, if any */
	const char *peer;	/* the client's address ("127.0.0.1:5555") */
	const char *why;	/* a note, for answers given outside the routes */
	const char *request_id;	/* the request's id (X-Request-Id), if any */
	int delivered;		/* 0: the client was gone before the answer */
	int quiet;		/* routine (a heartbeat): a success is at debug */
};

/* A structured field of log_fields(): a string, or (str NULL) a number. */
struct log_field {
	const char *key;
	const char *str;
	long long num;
};

/* Parse "error", "warn", "info", "debug"; returns -1 when unknown. */
int log_level_parse(const char *s);
/* Parse "json", "text"; returns -1 when unknown. */
int log_format_parse(const char *s);
void log_set_level(enum log_level level);
void log_set_format(enum log_format format);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The access line of one request, at the level its answer calls for
 * (log_access_level). */
void log_access(const struct log_access *a);
/* warn for a 5xx (Redis trouble, overload, a bug), info for a 4xx or any
 * other answer, debug for a quiet request's success. */
enum log_level log_access_level(const struct log_access *a);
/* A message with fields of its own: ,"key":value in JSON, key=value after
 * the message in text. */
void log_fields(enum log_level level, const char *msg, const struct log_field *f, size_t n);
/* The request this thread serves now (its id, NULL: none): every line it
 * logs meanwhile carries "request_id". The caller keeps id alive until it
 * sets another. */
void log_set_request(const char *id);
/* The length of the valid UTF-8 character at s (n > 0 bytes left), or 0
 * when the byte there does not start one. */
size_t log_utf8_len(const unsigned char *s, size_t n);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
