/* log.c -- one line per event on stderr: "<time> <level> <message>".
 * The whole line goes out in one write so lines from several threads never
 * interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int log_level = LOG_INFO;
static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *s)
{
	for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
		if (!strcmp(s, level_names[i]))
			return i;
	return -1;
}

void log_set_level(enum log_level level)
{
	log_level = level;
}

int log_enabled(enum log_level level)
{
	return (int)level <= log_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	struct timeval tv;
	struct tm tm;
	size_t n;
	va_list ap;
	int k;

	if (!log_enabled(level))
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03dZ %-5s ",
			      (int)(tv.tv_usec / 1000), level_names[level]);
	va_start(ap, fmt);
	k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (k < 0)
		k = 0;
	n += (size_t)k;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to report it */
	}
}
