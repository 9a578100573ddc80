/* args.c -- what dlock's options take (see args.h). */
#include "args.h"

#include <errno.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#define DURATION_MAX_MS 2147483647LL

bool args_duration(const char *s, int64_t *ms)
{
	static const struct {
		const char *unit;
		long long ms;
	} units[] = { { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "", 1000 } };
	long long whole = 0, frac = 0, frac_div = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (*p - '0');
		if (whole > DURATION_MAX_MS)
			return false;
	}
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return false;
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (frac_div < 1000000) {
				frac = frac * 10 + (*p - '0');
				frac_div *= 10;
			}
		}
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].unit))
			continue;
		if (whole > DURATION_MAX_MS / units[i].ms)
			return false;
		*ms = whole * units[i].ms + frac * units[i].ms / frac_div;
		return *ms <= DURATION_MAX_MS;
	}
	return false;
}

bool args_duration_ms(const char *s, int64_t *ms)
{
	int v;

	if (!args_int(s, 0, 2147483647, &v))
		return false;
	*ms = v;
	return true;
}

int64_t args_grace_default(int64_t ttl_ms, int64_t grace_ms)
{
	return grace_ms < ttl_ms / 3 ? grace_ms : ttl_ms / 3;
}

bool args_grace_fits(int64_t ttl_ms, int64_t grace_ms)
{
	return grace_ms <= ttl_ms / 2;
}

bool args_kind(const char *s, enum lease_kind *kind)
{
	/* the kinds as dlockd names them (the singular of the path), then
	 * dlock's old spellings, still taken */
	static const struct {
		const char *name;
		enum lease_kind kind;
	} kinds[] = {
		{ "lock", KIND_LOCK }, { "fairlock", KIND_FAIR }, { "rwlock", KIND_WRITE },
		{ "semaphore", KIND_SEMAPHORE }, { "fair", KIND_FAIR }, { "read", KIND_READ },
		{ "write", KIND_WRITE },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (!strcmp(s, kinds[i].name)) {
			*kind = kinds[i].kind;
			return true;
		}
	}
	return false;
}

bool args_mode(const char *s, enum lease_kind *kind)
{
	if (strcmp(s, "read") && strcmp(s, "write"))
		return false;
	*kind = s[0] == 'r' ? KIND_READ : KIND_WRITE;
	return true;
}

bool args_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

bool args_server_ok(const char *s)
{
	size_t skip = !strncasecmp(s, "http://", 7) ? 7 : !strncasecmp(s, "https://", 8) ? 8 : 0;

	return skip && s[skip] && s[skip] != '/';
}

const char *args_env(const char *const names[], const char **which)
{
	for (size_t i = 0; names[i]; i++) {
		const char *v = getenv(names[i]);

		if (v && *v) {
			if (which)
				*which = names[i];
			return v;
		}
	}
	return NULL;
}
