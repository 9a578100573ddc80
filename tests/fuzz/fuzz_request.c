/* fuzz_request.c -- libFuzzer harness for what dlockd does with a request
 * before touching Redis: method and route matching, name and owner
 * validation, and parameter parsing from the query string and the JSON
 * body. As in the unit tests, the modules are included and MHD's query
 * iterator and the error reply are wrapped (-Wl,--wrap).
 *
 * Input: "METHOD\nPATH\nk=v&k=v\nBODY..." (missing parts are empty). The
 * path is routed as sent, and only the name decoded (as server.c does);
 * the query goes through dlockd's unescaper first, as MHD would hand it
 * over.
 * Checked besides ASan/UBSan: the unescaper agrees with a plain reference
 * decoder and never shortens a string with a NUL; a routed name lies
 * within the path, decodes to no longer a string without NULs, and when
 * valid holds only name characters (so no '/', escaped or not); a request
 * is refused with exactly one error, or every parameter it carries is
 * within its documented range. */
#include "api/params.c"
#include "api/routes.c"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_PAIRS 16

static char *pairs[MAX_PAIRS][2];
static int npairs, errors;

int __wrap_MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind kind,
				     MHD_KeyValueIterator it, void *cls);
int __wrap_MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind kind,
				     MHD_KeyValueIterator it, void *cls)
{
	int n = 0;

	(void)c;
	for (int i = 0; i < npairs; i++) {
		n++;
		if (it(cls, kind, pairs[i][0], pairs[i][1]) != MHD_YES)
			break;
	}
	return n;
}

enum MHD_Result __wrap_reply_error(struct request *rq, enum api_error err, json_t *extra,
				   const char *fmt, ...);
enum MHD_Result __wrap_reply_error(struct request *rq, enum api_error err, json_t *extra,
				   const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	(void)rq;
	assert(err < ERR_COUNT);
	if (extra)
		json_decref(extra);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errors++;
	return MHD_YES;
}

/* Next '\n'-terminated part of [*p, end) as a fresh NUL-terminated string. */
static char *part(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	const uint8_t *stop = nl ? nl : end;
	char *s = malloc((size_t)(stop - *p) + 1);

	memcpy(s, *p, (size_t)(stop - *p));
	s[stop - *p] = '\0';
	*len = (size_t)(stop - *p);
	*p = nl ? nl + 1 : end;
	return s;
}

/* The reference: %HH with two hex digits becomes that byte, except %00. */
static size_t reference_unescape(const char *in, char *out)
{
	size_t n = 0;

	for (size_t i = 0; in[i]; ) {
		unsigned v;

		if (in[i] == '%' && isxdigit((unsigned char)in[i + 1]) &&
		    isxdigit((unsigned char)in[i + 2]) && sscanf(in + i + 1, "%2x", &v) == 1 && v) {
			out[n++] = (char)v;
			i += 3;
		} else {
			out[n++] = in[i++];
		}
	}
	out[n] = '\0';
	return n;
}

static void check_unescape(char *s)
{
	size_t len = strlen(s), n;
	char *want = malloc(len + 1);
	size_t wn = reference_unescape(s, want);

	n = routes_unescape(s);
	assert(n <= len && n == wn && memcmp(s, want, n + 1) == 0);
	assert(strlen(s) == n);	/* no NUL came out of the input */
	free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg = { .max_ttl_ms = 86400000, .max_wait_ms = 300000 };
	const uint8_t *p = data, *end = data + size;
	size_t mlen, plen, qlen, blen;
	char *method = part(&p, end, &mlen), *path = part(&p, end, &plen);
	char *query = part(&p, end, &qlen), *body, *save = NULL, why[320];
	struct route_match m;
	struct request rq;
	int rc;

	blen = (size_t)(end - p);
	body = malloc(blen + 1);
	memcpy(body, p, blen);
	body[blen] = '\0';

	/* routing, on the path as sent; then the name is decoded */
	plen = strlen(path);
	if (routes_match(path, routes_method(method), &m) != ROUTE_NOT_FOUND && m.name) {
		size_t nlen;
		char *name;

		assert(m.name >= path && m.name + m.name_len <= path + plen);
		name = routes_name(&m, &nlen);
		assert(name && nlen <= m.name_len && strlen(name) == nlen);
		if (params_check_name(name, nlen, why, sizeof(why)) == 0)
			for (size_t i = 0; i < nlen; i++)
				assert(locks_id_char((unsigned char)name[i]));
		free(name);
	}
	check_unescape(path);

	/* query pairs, as MHD would hand them over (already unescaped) */
	npairs = 0;
	for (char *tok = strtok_r(query, "&", &save); tok && npairs < MAX_PAIRS;
	     tok = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(tok, '=');

		if (eq) {
			*eq = '\0';
			check_unescape(eq + 1);
		}
		check_unescape(tok);
		pairs[npairs][0] = tok;
		pairs[npairs][1] = eq ? eq + 1 : NULL;
		npairs++;
	}

	/* parameters */
	memset(&rq, 0, sizeof(rq));
	rq.cfg = &cfg;
	rq.body = body;
	rq.body_len = blen;
	errors = 0;
	rc = params_or_reply(&rq, P_OWNER | P_TTL | P_WAIT | P_FORCE | P_REENTRANT);
	assert(rc == 0 ? errors == 0 : errors == 1);
	if (rc == 0) {
		if (rq.lock.params.given & P_TTL)
			assert(rq.lock.params.ttl_ms >= 1 && rq.lock.params.ttl_ms <= cfg.max_ttl_ms);
		if (rq.lock.params.given & P_WAIT)
			assert(rq.lock.params.wait_ms >= 0 && rq.lock.params.wait_ms <= cfg.max_wait_ms);
		if (rq.lock.params.given & P_OWNER)
			assert(params_check_owner(rq.lock.params.owner, strlen(rq.lock.params.owner), why,
						   sizeof(why)) == 0);
	}
	free(method);
	free(path);
	free(query);
	free(body);
	return 0;
}
