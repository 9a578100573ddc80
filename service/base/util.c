/* util.c -- the small helpers every module uses: allocation that aborts
 * instead of returning NULL, monotonic clocks and random hex ids. */
#include "service/base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void die_oom(size_t size)
{
	fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", size);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		die_oom(size);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		die_oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t size)
{
	void *q = realloc(p, size ? size : 1);

	if (!q)
		die_oom(size);
	return q;
}

char *xstrdup(const char *s)
{
	size_t len = strlen(s) + 1;

	return memcpy(xmalloc(len), s, len);
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *out;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	out = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(out, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return out;
}

char *xstrjoin(const char *first, ...)
{
	va_list ap;
	size_t len = 0;
	char *out, *at;

	va_start(ap, first);
	for (const char *p = first; p; p = va_arg(ap, const char *))
		len += strlen(p);
	va_end(ap);
	out = at = xmalloc(len + 1);
	va_start(ap, first);
	for (const char *p = first; p; p = va_arg(ap, const char *)) {
		size_t n = strlen(p);

		memcpy(at, p, n);
		at += n;
	}
	va_end(ap);
	*at = '\0';
	return out;
}

char *put_decimal(char *out, long long v)
{
	char digits[DECIMAL_MAX];
	unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
	size_t n = 0;

	do
		digits[n++] = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*out++ = '-';
	while (n)
		*out++ = digits[--n];
	return out;
}

char *decimal(char *buf, long long v)
{
	*put_decimal(buf, v) = '\0';
	return buf;
}

int64_t now_ms(void)
{
	return now_us() / 1000;
}

int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Kernel randomness is fetched 4 KiB at a time per thread: one getrandom()
 * serves 256 request ids instead of one each. What was handed out is
 * wiped, so a later read of this buffer learns nothing of earlier ids. */
#define RANDOM_POOL 4096

static __thread unsigned char random_pool[RANDOM_POOL];
static __thread size_t random_left;

static void random_refill(void)
{
	size_t got = 0;

	while (got < RANDOM_POOL) {
		ssize_t n = getrandom(random_pool + got, RANDOM_POOL - got, 0);

		if (n < 0)
			abort();	/* only EINTR-free kernels with no entropy */
		got += (size_t)n;
	}
	random_left = RANDOM_POOL;
}

void random_hex(char *out, size_t nbytes)
{
	static const char digits[] = "0123456789abcdef";

	if (nbytes > 64)
		abort();
	if (random_left < nbytes)
		random_refill();
	for (size_t i = 0; i < nbytes; i++) {
		unsigned char *b = &random_pool[RANDOM_POOL - random_left--];

		out[2 * i] = digits[*b >> 4];
		out[2 * i + 1] = digits[*b & 15];
		*b = 0;
	}
	out[2 * nbytes] = '\0';
}
