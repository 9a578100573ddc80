/* test_session_probe.c -- hostile probes of sessions (issue 30), each the
 * smallest reproduction of a fault found by attacking them as a careless
 * or hostile client, or an unlucky operator, would. Each fails until its
 * fault is fixed; the comment above each says what it shows, what was
 * observed and what is expected. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* POST /sessions?ttl_ms= on d (NULL: H_dlockd); id gets its id, "" on
 * failure. */
static void probe_session(const struct dlockd_srv *d, int ttl_ms, char id[40])
{
	struct http_resp r;
	char p[64];
	const char *s;

	snprintf(p, sizeof(p), "/sessions?ttl_ms=%d", ttl_ms);
	id[0] = '\0';
	if (http_on(d ? d->base : H_dlockd.base, "POST", p, NULL, &r) == 0 && r.status == 201 &&
	    (s = json_str(&r, "session")) && strlen(s) == 32)
		snprintf(id, 40, "%s", s);
	http_free(&r);
}

/* A holding taken twice for a session (reentrant=true: holds 2) is
 * recorded once, and DELETE /sessions/{id} releases it once: the lock
 * stays held (holds 1) until its lease end, renewed by nobody, and its
 * waiters are not served at the DELETE. Observed for every reentrant
 * kind: after DELETE answered "released", the lock is still locked with
 * ~30 s left. Expected: ending the session releases the holding whole. */
TEST(session_probe_reentrant_holding_survives_delete)
{
	static const char *const res[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s/read",
					   "/rwlocks/%s/write" };
	const char *n = lockname("sp-reent");
	char id[40], nm[160], q[300];

	probe_session(NULL, 30000, id);
	CHECK(id[0], "POST /sessions");
	for (size_t i = 0; i < 4; i++) {
		snprintf(nm, sizeof(nm), "%s%zu", n, i);
		snprintf(q, sizeof(q), res[i], nm);
		CHECK(status_of(NULL, "PUT", "%s?session=%s", q, id) == 200,
		      "the session takes %s", q);
		CHECK(status_of(NULL, "PUT", "%s?session=%s&reentrant=true", q, id) == 200,
		      "and takes it again (holds 2)");
	}
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "DELETE the session");
	CHECK(status_of(NULL, "PUT", "/locks/%s0?owner=other&ttl_ms=1000", n) == 200,
	      "the lock is free once its session ended");
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s1?owner=other&ttl_ms=1000", n) == 200,
	      "the fair lock is free once its session ended");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s2/write?owner=other&ttl_ms=1000", n) == 200,
	      "the read lock is free once its session ended");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s3/write?owner=other&ttl_ms=1000", n) == 200,
	      "the write lock is free once its session ended");
}
