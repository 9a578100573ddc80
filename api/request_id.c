/* request_id.c -- which id a request gets (request_id.h). A client's
 * X-Request-Id is taken as it is when it is safe to log and to echo in a
 * header (visible ASCII, no spaces, at most REQUEST_ID_MAX); a W3C
 * traceparent ("00-<trace-id>-<parent-id>-<flags>") gives its trace id, so
 * dlockd's lines join the caller's trace; otherwise the id is new. */
#include "api/request_id.h"

#include "service/base/util.h"

#include <stdbool.h>
#include <string.h>

static bool hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > REQUEST_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* traceparent's trace id, if the header is one (version 00 and its
 * lengths; a trace id of zeros is invalid). */
static bool trace_id(const char *tp, char *out)
{
	if (strlen(tp) < 55 || strncmp(tp, "00-", 3) || tp[35] != '-' || tp[52] != '-' ||
	    !hex_run(tp + 3, 32) || !hex_run(tp + 36, 16) || !hex_run(tp + 53, 2) ||
	    (tp[55] != '\0' && tp[55] != '-'))
		return false;
	if (strspn(tp + 3, "0") >= 32)
		return false;
	memcpy(out, tp + 3, 32);
	out[32] = '\0';
	return true;
}

void request_id_pick(const char *x_request_id, const char *traceparent, char *out)
{
	if (x_request_id && id_ok(x_request_id)) {
		strcpy(out, x_request_id);
		return;
	}
	if (traceparent && trace_id(traceparent, out))
		return;
	random_hex(out, 16);
}
