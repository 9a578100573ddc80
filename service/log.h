/* log.h -- leveled log lines on stderr. */
#ifndef DLOCKD_LOG_H
#define DLOCKD_LOG_H

enum log_level {
	LOG_ERROR,	/* the service cannot do what it was asked */
	LOG_WARN,	/* something went wrong and was handled (Redis lost) */
	LOG_INFO,	/* start, stop, reconnect */
	LOG_DEBUG,	/* one line per request */
};

/* Parse "error", "warn", "info", "debug"; returns -1 when unknown. */
int log_level_parse(const char *s);
void log_set_level(enum log_level level);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
