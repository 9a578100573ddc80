/* util.h -- allocation that never returns NULL, clocks, random ids. */
#ifndef DLOCKD_UTIL_H
#define DLOCKD_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Allocate or abort with the size on stderr (git's xmalloc). */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);
/* printf into a fresh buffer; the caller frees it. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The strings given, NULL-terminated, one after the other in a fresh
 * buffer; the caller frees it. What xasprintf("%s%s", a, b) does without
 * parsing a format: Redis key names are built a few times a request. */
char *xstrjoin(const char *first, ...) __attribute__((sentinel));

/* v in decimal at out, not terminated; returns the end. out must hold
 * DECIMAL_MAX bytes. What snprintf("%lld") does without parsing a format,
 * on the request path (Redis commands, replies). */
#define DECIMAL_MAX 20
char *put_decimal(char *out, long long v);
/* v in decimal in buf (DECIMAL_MAX + 1 bytes), terminated; returns buf. */
char *decimal(char *buf, long long v);

/* Milliseconds on the monotonic clock: for deadlines and durations. */
int64_t now_ms(void);
/* Microseconds on the monotonic clock: for latency measurements. */
int64_t now_us(void);

/* Fill out[0..2*nbytes] with nbytes of kernel randomness as lowercase hex
 * and a terminating NUL; out must hold 2*nbytes+1 bytes. */
void random_hex(char *out, size_t nbytes);

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#endif
