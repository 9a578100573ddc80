/* args.h -- what dlock's options take: durations, the grace a lease
 * leaves room for, and lock kinds. */
#ifndef DLOCK_ARGS_H
#define DLOCK_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "lease.h"

/* "500ms", "30s", "5m", "1h", "1.5s"; a bare number is seconds. At most
 * 24 days (what fits an int of milliseconds). False if s is none of these. */
bool args_duration(const char *s, int64_t *ms);
/* A whole number of milliseconds ("15000", as DLOCK_TTL_MS holds). */
bool args_duration_ms(const char *s, int64_t *ms);
/* `dlock run` stops its command inside the lease: SIGTERM a grace (and a
 * margin) before it ends. So a grace not given is the default grace_ms or
 * a third of the lease if that is less, and a grace given fits if it
 * leaves the lease at least half of it for renewals. */
int64_t args_grace_default(int64_t ttl_ms, int64_t grace_ms);
bool args_grace_fits(int64_t ttl_ms, int64_t grace_ms);
/* "lock", "fairlock", "rwlock" (its write side until args_mode says
 * otherwise), and the old spellings "fair", "read", "write". */
bool args_kind(const char *s, enum lease_kind *kind);
/* A read-write lock's side: "read" or "write". */
bool args_mode(const char *s, enum lease_kind *kind);
/* A decimal int in min..max. */
bool args_int(const char *s, int min, int max, int *out);

#endif
