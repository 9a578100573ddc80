/* args.h -- what dlock's options take: durations, the grace a lease
 * leaves room for, lock kinds, server URLs, and the environment's names
 * for a setting. */
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
/* An http:// or https:// URL with a host (scheme in any case), as
 * --server and DLOCKD_URL take. */
bool args_server_ok(const char *s);
/* The value of the first of names (NULL-terminated: a setting's name,
 * then its old aliases) set and not empty, *which (may be NULL) naming
 * it; NULL if none is. */
const char *args_env(const char *const names[], const char **which);

#endif
