/* test_http_limits.c -- requests too big or too slow to read, over HTTP
 * and HTTPS (issue 27's "huge headers", "renegotiation", "large bodies and
 * slow readers on watch"): a 64 KiB header, 10,000 headers, a 1 MB URL; a
 * TLS 1.2 renegotiation; bodies just under, at and over --max-body-bytes,
 * a Content-Length never delivered and a chunked body that never ends;
 * hundreds of connections pipelining watches and never reading the
 * answers. Each is refused or cut as docs/reference/errors.md says, changes
 * no lock, and a client of the same dlockd cycling a lock meanwhile stays
 * fast. Each test runs its own dlockd (on the suite's Redis). Figures:
 * tests/RELIABILITY.md. */
#include "../harness/bystander.h"
#include "../harness/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* ----- Raw exchanges ----- */

/* exchange() over TLS: GnuTLS on a non-blocking socket, sending and
 * reading at once (as the plain one does) so that an answer dlockd sends
 * before it has read the whole request is seen. The server is not
 * verified. */
static bool exchange_tls(int port, const char *req, size_t len, char *out, size_t cap,
			 int64_t until)
{
	gnutls_certificate_credentials_t cred = NULL;
	gnutls_session_t s = NULL;
	int fd = raw_connect(port), rc = GNUTLS_E_AGAIN;
	size_t sent = 0, got = 0;
	bool closed = false;

	out[0] = '\0';
	if (fd < 0)
		return false;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (gnutls_certificate_allocate_credentials(&cred) < 0 ||
	    gnutls_init(&s, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0)
		goto done;
	gnutls_set_default_priority(s);
	gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
	gnutls_transport_set_int(s, fd);
	while (mono_ms() < until && (rc = gnutls_handshake(s)) < 0 && !gnutls_error_is_fatal(rc)) {
		struct pollfd p = { fd, gnutls_record_get_direction(s) ? POLLOUT : POLLIN, 0 };

		poll(&p, 1, 100);
	}
	if (rc < 0)
		goto done;
	while (mono_ms() < until) {
		struct pollfd p = { fd, POLLIN | (sent < len ? POLLOUT : 0), 0 };

		if (!gnutls_record_check_pending(s) && poll(&p, 1, 100) <= 0)
			continue;
		if (gnutls_record_check_pending(s) || (p.revents & (POLLIN | POLLHUP | POLLERR))) {
			char sink[4096];
			bool keep = got < cap - 1;

			rc = (int)gnutls_record_recv(s, keep ? out + got : sink,
						     keep ? cap - 1 - got : sizeof(sink));
			if (rc == 0 || (rc < 0 && gnutls_error_is_fatal(rc))) {
				closed = true;
				break;
			}
			if (rc > 0 && keep)
				got += (size_t)rc;
		} else if (p.revents & POLLOUT) {
			size_t n = len - sent < 16384 ? len - sent : 16384;

			rc = (int)gnutls_record_send(s, req + sent, n);
			if (rc > 0)
				sent += (size_t)rc;
			else if (rc < 0 && gnutls_error_is_fatal(rc))
				sent = len;	/* dlockd stopped reading: see what it said */
		}
	}
done:
	if (s)
		gnutls_deinit(s);
	if (cred)
		gnutls_certificate_free_credentials(cred);
	close(fd);
	out[got] = '\0';
	return closed;
}

/* Send req over a new connection to d (plain or TLS, as d serves) and read
 * until dlockd closes it, at most 20 s; the answer's first bytes in out
 * ("" if none). Returns false if dlockd kept the connection open. */
static bool exchange(const struct dlockd_srv *d, const char *req, size_t len, char *out,
		     size_t cap)
{
	size_t got = 0;
	int64_t until = mono_ms() + 20000L * slow_factor();
	bool closed = false;

	out[0] = '\0';
	if (!strncmp(d->base, "https://", 8))
		return exchange_tls(d->port, req, len, out, cap, until);
	int fd = raw_connect(d->port);
	size_t sent = 0;

	if (fd < 0)
		return false;
	while (mono_ms() < until) {
		struct pollfd p = { fd, POLLIN | (sent < len ? POLLOUT : 0), 0 };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		if (p.revents & POLLIN) {
			char sink[4096];

			n = recv(fd, got < cap - 1 ? out + got : sink,
				 got < cap - 1 ? cap - 1 - got : sizeof(sink), 0);
			if (n <= 0) {
				closed = true;
				break;
			}
			if (got < cap - 1)
				got += (size_t)n;
		} else if (p.revents & POLLOUT) {
			n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN)
				sent = len;	/* dlockd stopped reading: see what it said */
			else if (n > 0)
				sent += (size_t)n;
		} else if (p.revents & (POLLERR | POLLHUP)) {
			closed = true;
			break;
		}
	}
	close(fd);
	out[got] = '\0';
	return closed;
}

/* A request with a header of n bytes, or (many) n headers, or a path of
 * n bytes. */
enum big { BIG_HEADER, MANY_HEADERS, BIG_PATH, BIG_QUERY };

static char *big_request(enum big kind, size_t n, size_t *len)
{
	size_t cap = n * 16 + 256, at = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	switch (kind) {
	case BIG_HEADER:
		at += (size_t)sprintf(s, "GET /locks/big HTTP/1.1\r\nHost: x\r\nX-Big: ");
		memset(s + at, 'a', n);
		at += n;
		at += (size_t)sprintf(s + at, "\r\nConnection: close\r\n\r\n");
		break;
	case MANY_HEADERS:
		at += (size_t)sprintf(s, "GET /locks/big HTTP/1.1\r\nHost: x\r\n");
		for (size_t i = 0; i < n; i++)
			at += (size_t)sprintf(s + at, "X-H%zu: v\r\n", i);
		at += (size_t)sprintf(s + at, "Connection: close\r\n\r\n");
		break;
	case BIG_PATH:
	case BIG_QUERY:
		at += (size_t)sprintf(s, "PUT /locks/big%s", kind == BIG_QUERY ? "?owner=" : "");
		memset(s + at, 'a', n);
		at += n;
		at += (size_t)sprintf(s + at, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
		break;
	}
	*len = at;
	return s;
}

/* The status of the answer in out, 0 if none. */
static int status_in(const char *out)
{
	int st = 0;

	return sscanf(out, "HTTP/1.1 %d", &st) == 1 ? st : 0;
}

static void huge_requests(bool tls)
{
	static struct bystander by;
	static const struct {
		enum big kind;
		size_t n;
		int want;
		const char *what;
	} cases[] = {
		{ BIG_HEADER, 65536, 431, "a 64 KiB header" },
		{ MANY_HEADERS, 10000, 431, "10,000 headers" },
		{ BIG_PATH, 1000000, 414, "a 1 MB path" },
		{ BIG_QUERY, 1000000, 414, "a 1 MB query" },
		{ BIG_HEADER, 12000, 200, "a 12 KB header (served)" },
		{ BIG_HEADER, 20000, 431, "a 20 KB header" },
		{ MANY_HEADERS, 100, 200, "100 headers (served)" },
	};
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, NULL };
	struct http_tls t = { .ca = NULL };
	struct dlockd_srv d;
	char out[4096];
	int64_t t0, t1;
	int rounds = 0;

	if (tls) {
		CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
		flags[1] = pki_path("server1.pem");
		flags[3] = pki_path("server1.key");
		t.ca = pki_path("ca.pem");
		http_tls(&t);
	}
	CHECK(dlockd_start(&d, NULL, tls ? flags : NULL) == 0, "start dlockd (see %s)", d.log);
	CHECK(bystander_start(&by, d.base, tls ? &t : NULL, 5), "start the bystander");
	t0 = mono_ms();
	for (int round = 0; round < 3 || mono_ms() - t0 < 3000; round++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			size_t len;
			char *req = big_request(cases[i].kind, cases[i].n, &len);
			bool closed;

			CHECK(req, "out of memory");
			t1 = mono_ms();
			closed = exchange(&d, req, len, out, sizeof(out));
			free(req);
			CHECK(status_in(out) == cases[i].want, "%s: want %d, got '%.200s'",
			      cases[i].what, cases[i].want, out);
			if (cases[i].want != 200) {
				CHECK(closed, "%s: the connection is closed", cases[i].what);
				CHECK(strstr(out, "Connection: close"), "%s: says it closes",
				      cases[i].what);
			}
			CHECK(mono_ms() - t1 < 10000L * slow_factor(), "%s: answered in %lld ms",
			      cases[i].what, (long long)(mono_ms() - t1));
			if (i == 0)
				rounds++;
		}
	CHECK(rcmd_int("EXISTS big") == 0, "no lock was taken");
	bystander_stop(&by);
	printf("# huge requests over %s, %d rounds of 6: bystander %d cycles, %d failed, slowest %.0f ms\n",
	       tls ? "HTTPS" : "HTTP", rounds, by.cycles, by.failed, by.slowest_ms);
	CHECK(by.cycles > 0 && by.failed == 0, "bystander: %d cycles, %d failed", by.cycles,
	      by.failed);
	CHECK(by.slowest_ms < 2000.0 * slow_factor(), "bystander's slowest cycle %.0f ms",
	      by.slowest_ms);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* The HTTP library refuses them itself (docs/reference/errors.md, "Errors the HTTP library answers itself": the one
 * exception to JSON errors) and closes the connection. */
TEST(http_huge_headers_and_urls_are_refused_and_others_unaffected)
{
	huge_requests(false);
}

TEST(https_huge_headers_and_urls_are_refused_and_others_unaffected)
{
	huge_requests(true);
}

/* A TLS 1.2 client asks to renegotiate mid-connection (openssl s_client's
 * "R"): dlockd does not renegotiate; the connection ends, dlockd serves
 * on. Ten at once, with a bystander cycling a lock. */
TEST(https_renegotiation_is_refused_and_dlockd_serves_on)
{
	static struct bystander by;
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, NULL };
	struct http_tls t = { .ca = NULL };
	struct dlockd_srv d;
	char cmd[2400], res[300], out[8192];
	int64_t t0;
	int served = 0;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	flags[1] = pki_path("server1.pem");
	flags[3] = pki_path("server1.key");
	t.ca = pki_path("ca.pem");
	http_tls(&t);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd (see %s)", d.log);
	CHECK(bystander_start(&by, d.base, &t, 5), "start the bystander");
	snprintf(res, sizeof(res), "%s/reneg", test_tmpdir());
	/* interactive s_client (no -quiet, no -ign_eof) reads "R" as
	 * "renegotiate"; each prints RENEGOTIATING */
	snprintf(cmd, sizeof(cmd),
		 "for i in 1 2 3 4 5 6 7 8 9 10; do ( (printf 'GET /healthz HTTP/1.1\\r\\nHost: "
		 "x\\r\\n\\r\\n'; sleep 1; echo R; sleep 1; printf 'GET /healthz HTTP/1.1\\r\\nHost: "
		 "x\\r\\nConnection: close\\r\\n\\r\\n'; sleep 1) | timeout %d openssl s_client "
		 "-connect 127.0.0.1:%d -tls1_2 > %s.$i 2>&1 ) 2>/dev/null & done; wait; "
		 "grep -h -E 'HTTP/1.1|RENEGOTIATING' %s.* > %s",
		 20 * slow_factor(), d.port, res, res, res);
	t0 = mono_ms();
	CHECK(system(cmd) == 0, "run s_client");
	CHECK(mono_ms() - t0 < 15000L * slow_factor(), "no connection hung: %lld ms",
	      (long long)(mono_ms() - t0));
	CHECK(file_read(res, out, sizeof(out)), "read %s", res);
	CHECK(strstr(out, "RENEGOTIATING"), "s_client asked to renegotiate: %.500s", out);
	for (const char *p = out; (p = strstr(p, "HTTP/1.1 200")); p++)
		served++;
	CHECK(served >= 10, "each connection was served before it asked (%d)", served);
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");
	CHECK(status_of(&d, "GET", "/healthz") == 200, "a new connection is served");
	bystander_stop(&by);
	printf("# 10 TLS renegotiations at once: %d answers before them; bystander %d cycles, "
	       "%d failed, slowest %.0f ms\n", served, by.cycles, by.failed, by.slowest_ms);
	CHECK(by.cycles > 0 && by.failed == 0, "bystander: %d cycles, %d failed", by.cycles,
	      by.failed);
	CHECK(by.slowest_ms < 2000.0 * slow_factor(), "bystander's slowest cycle %.0f ms",
	      by.slowest_ms);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* ----- Bodies ----- */

/* A PUT of name with a JSON body {"owner":"b"} padded with spaces to n
 * bytes, with Content-Length. */
static char *body_request(const char *name, size_t n, size_t *len)
{
	static const char obj[] = "{\"owner\":\"b\"";
	char *s = malloc(n + 512);
	int head;

	if (!s || n < sizeof(obj)) {
		free(s);
		return NULL;
	}
	head = sprintf(s, "PUT /locks/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		       "Content-Length: %zu\r\nConnection: close\r\n\r\n", name, n);
	memcpy(s + head, obj, sizeof(obj) - 1);
	memset(s + head + sizeof(obj) - 1, ' ', n - sizeof(obj));
	s[head + n - 1] = '}';
	*len = (size_t)head + n;
	return s;
}

/* A JSON error of the contract in out: status want, "error":code. */
static bool json_error_in(const char *out, int want, const char *code)
{
	const char *body = strstr(out, "\r\n\r\n");
	char needle[80];

	snprintf(needle, sizeof(needle), "\"error\":\"%s\"", code);
	return status_in(out) == want && body && strstr(body, needle) &&
	       strstr(out, "Content-Type: application/json");
}

/* The largest request the contract lets a client make is served: a
 * 200-character name, a 128-character owner and a 1024-byte value of
 * 4-byte characters, all percent-encoded in the query (4.5 KiB of
 * request line), with the headers a client sends; the same value in a
 * JSON body at --max-body-bytes' default. What libmicrohttpd keeps per
 * connection must hold them. */
TEST(http_largest_legitimate_requests_are_served)
{
	static char path[6000], value[4000], body[4097];
	char name[201], owner[129];
	struct http_resp r;
	size_t at = 0;

	memset(name, 'n', 200);
	name[200] = '\0';
	memcpy(name, lockname("big"), strlen(lockname("big")));
	memset(owner, 'o', 128);
	owner[128] = '\0';
	for (int i = 0; i < 256; i++)	/* U+1F600, 4 bytes: 1024 bytes in all */
		at += (size_t)snprintf(value + at, sizeof(value) - at, "%%F0%%9F%%98%%80");
	snprintf(path, sizeof(path), "/semaphores/%s?owner=%s&limit=2&ttl_ms=60000&value=%s", name,
		 owner, value);
	http_extra_header("User-Agent: a-client-that-says-a-lot-about-itself/1.0 (x86_64; "
			  "Debian 12; with a long comment of the kind some libraries send)");
	http("PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "the longest query");
	http_free(&r);
	snprintf(path, sizeof(path), "/semaphores/%s?owner=%s", name, owner);
	http("DELETE", path, NULL, &r);
	CHECK_STATUS(r, 200, "released");
	http_free(&r);
	/* a body of exactly 4096 bytes: the value, then padding spaces */
	at = (size_t)snprintf(body, sizeof(body), "{\"owner\": \"%s\", \"limit\": 2, \"value\": \"",
			      owner);
	for (int i = 0; i < 256; i++)
		at += (size_t)snprintf(body + at, sizeof(body) - at, "\xF0\x9F\x98\x80");
	at += (size_t)snprintf(body + at, sizeof(body) - at, "\"}");
	memset(body + at, ' ', 4096 - at);
	body[4096] = '\0';
	snprintf(path, sizeof(path), "/semaphores/%s", name);
	http("PUT", path, body, &r);
	CHECK_STATUS(r, 200, "a 4096-byte body");
	http_free(&r);
	snprintf(path, sizeof(path), "/semaphores/%s?owner=%s", name, owner);
	http("DELETE", path, NULL, &r);
	CHECK_STATUS(r, 200, "released");
	http_free(&r);
	http_extra_header(NULL);
}

/* Bodies at --max-body-bytes are served, one byte more is 413
 * body_too_large (also a 1 MB one, and a chunked one past it), and none
 * of those takes the lock. */
TEST(http_bodies_at_and_over_max_body_bytes)
{
	const char *flags[] = { "--max-body-bytes", "4096", NULL };
	static const struct {
		size_t n;
		int want;
	} cases[] = { { 4095, 200 }, { 4096, 200 }, { 4097, 413 }, { 1000000, 413 } };
	struct dlockd_srv d;
	char out[4096], name[64];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd (see %s)", d.log);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;
		char *req;

		snprintf(name, sizeof(name), "%s", lockname("body"));
		req = body_request(name, cases[i].n, &len);
		CHECK(req, "out of memory");
		exchange(&d, req, len, out, sizeof(out));
		free(req);
		if (cases[i].want == 200) {
			CHECK(status_in(out) == 200, "%zu bytes: %.300s", cases[i].n, out);
			CHECK(rcmd_int("HEXISTS %s b", name) == 1, "%zu bytes: b holds", cases[i].n);
		} else {
			CHECK(json_error_in(out, 413, "body_too_large"), "%zu bytes: %.300s",
			      cases[i].n, out);
			CHECK(rcmd_int("EXISTS %s", name) == 0, "%zu bytes: no lock", cases[i].n);
		}
	}
	/* chunked: 8 KiB in 1 KiB chunks, then the last chunk */
	{
		static char req[16384];
		int at;

		snprintf(name, sizeof(name), "%s", lockname("body"));
		at = sprintf(req, "PUT /locks/%s HTTP/1.1\r\nHost: x\r\nContent-Type: "
			     "application/json\r\nTransfer-Encoding: chunked\r\nConnection: "
			     "close\r\n\r\nc\r\n{\"owner\":\"b\"\r\n", name);
		for (int i = 0; i < 8; i++) {
			at += sprintf(req + at, "400\r\n");
			memset(req + at, ' ', 1024);
			at += 1024;
			at += sprintf(req + at, "\r\n");
		}
		at += sprintf(req + at, "1\r\n}\r\n0\r\n\r\n");
		exchange(&d, req, (size_t)at, out, sizeof(out));
		CHECK(json_error_in(out, 413, "body_too_large"), "chunked 8 KiB: %.300s", out);
		CHECK(rcmd_int("EXISTS %s", name) == 0, "chunked 8 KiB: no lock");
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* A client that asks before sending its body (Expect: 100-continue, as
 * curl does for large ones) is told 413 at once when its Content-Length
 * is over --max-body-bytes, not "100 Continue" and then 413 after the
 * whole body came; within the limit it is told 100 and served. */
TEST(http_expect_100_continue_over_max_body_bytes_is_413_at_once)
{
	const char *flags[] = { "--max-body-bytes", "4096", NULL };
	static const char head[] = "PUT /locks/%s HTTP/1.1\r\nHost: x\r\nContent-Type: "
				   "application/json\r\nExpect: 100-continue\r\n"
				   "Content-Length: %zu\r\n\r\n";
	static const char body[] = "{\"owner\":\"e\"}";
	struct dlockd_srv d;
	struct raw_answer a;
	char req[512], name[64];
	int fd;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd (see %s)", d.log);
	snprintf(name, sizeof(name), "%s", lockname("expect"));
	fd = raw_connect(d.port);
	CHECK(fd >= 0, "connect");
	snprintf(req, sizeof(req), head, name, (size_t)1000000);
	CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "write the head");
	raw_read(fd, 10000, &a);
	printf("# Expect: 100-continue, Content-Length 1000000 over 4096: %d %.120s\n", a.status,
	       a.body);
	CHECK(a.status == 413, "the first answer to a body over the limit: %d, want 413",
	      a.status);
	CHECK(strstr(a.body, "\"body_too_large\""), "its body: %.300s", a.body);
	close(fd);
	CHECK(rcmd_int("EXISTS %s", name) == 0, "no lock");

	fd = raw_connect(d.port);
	CHECK(fd >= 0, "connect");
	snprintf(req, sizeof(req), head, name, strlen(body));
	CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "write the head");
	CHECK(raw_read(fd, 10000, &a) == 100, "within the limit: %d, want 100 Continue",
	      a.status);
	CHECK(write(fd, body, strlen(body)) == (ssize_t)strlen(body), "write the body");
	CHECK(raw_read(fd, 10000, &a) == 200, "then the answer: %d %.200s", a.status, a.body);
	close(fd);
	CHECK(rcmd_int("HEXISTS %s e", name) == 1, "e holds the lock");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* Bodies that never end: a Content-Length within --max-body-bytes (one
 * over it is refused at once, above) whose bytes come one a second, and
 * a chunked body whose chunks keep coming (past --max-body-bytes) but
 * never the last one. Neither is a whole request: each is cut after
 * --idle-timeout-s however it trickles, and takes no lock. */
TEST(http_bodies_that_never_end_are_cut_after_the_idle_timeout)
{
	const char *flags[] = { "--idle-timeout-s", "2", "--max-body-bytes", "4096", NULL };
	static const char head[] = "PUT /locks/%s HTTP/1.1\r\nHost: x\r\nContent-Type: "
				   "application/json\r\n%s\r\n\r\n%s";
	struct dlockd_srv d;
	char req[512], names[2][64];
	int fds[2];
	int64_t t0, cut[2] = { 0, 0 };

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd (see %s)", d.log);
	for (int i = 0; i < 2; i++) {
		snprintf(names[i], sizeof(names[i]), "%s", lockname("endless"));
		snprintf(req, sizeof(req), head, names[i],
			 i ? "Transfer-Encoding: chunked" : "Content-Length: 4000",
			 i ? "9\r\n{\"owner\":\r\n" : "{\"owner\":");
		fds[i] = raw_connect(d.port);
		CHECK(fds[i] >= 0, "connect");
		CHECK(write(fds[i], req, strlen(req)) > 0, "send the start");
	}
	t0 = mono_ms();
	/* 1 KiB chunks every 50 ms on the chunked one; a byte a second on the
	 * other */
	while (mono_ms() - t0 < 10000L * slow_factor() && (!cut[0] || !cut[1])) {
		static char chunk[1024 + 16];
		struct pollfd p[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };

		if (!chunk[0]) {
			int h = sprintf(chunk, "400\r\n");

			memset(chunk + h, ' ', 1024);
			memcpy(chunk + h + 1024, "\r\n", 2);
		}
		if (!cut[1] && send(fds[1], chunk, 1024 + 7, MSG_NOSIGNAL) < 0)
			cut[1] = mono_ms();
		if (!cut[0] && (mono_ms() - t0) % 1000 < 50 && send(fds[0], " ", 1, MSG_NOSIGNAL) < 0)
			cut[0] = mono_ms();
		poll(p, 2, 50);
		for (int i = 0; i < 2; i++) {
			char buf[4096];

			if (!cut[i] && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT) <= 0)
				cut[i] = mono_ms();
		}
	}
	close(fds[0]);
	close(fds[1]);
	printf("# bodies that never end, --idle-timeout-s 2: Content-Length cut after %lld ms, "
	       "chunked after %lld ms\n", (long long)(cut[0] ? cut[0] - t0 : -1),
	       (long long)(cut[1] ? cut[1] - t0 : -1));
	CHECK(cut[0] && cut[0] - t0 < 6000L * slow_factor(), "the Content-Length body is cut");
	CHECK(cut[1] && cut[1] - t0 < 6000L * slow_factor(), "the endless chunked body is cut");
	CHECK(rcmd_int("EXISTS %s", names[0]) == 0 && rcmd_int("EXISTS %s", names[1]) == 0,
	      "no lock taken");
	CHECK(status_of(&d, "GET", "/healthz") == 200, "dlockd serves on");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* ----- Slow readers on watch ----- */

enum { READERS = 300, PIPELINED = 300 };

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* READERS connections each send a watch of a lock (index 0, wait_ms 3 s)
 * followed by PIPELINED status reads, and never read a byte (a receive
 * buffer of 4 KiB): once the lock changes every watch answers and the
 * status answers fill the window. A bystander cycling another lock stays
 * fast; once the readers go the watch gauge is back to 0; stuck
 * connections are closed after --idle-timeout-s. */
TEST(http_slow_readers_on_watch_do_not_slow_others)
{
	static struct bystander by;
	static int fds[READERS];
	const char *flags[] = { "--idle-timeout-s", "3", NULL };
	const char *n = lockname("watched");
	struct dlockd_srv d;
	char *pipe_req, path[160];
	size_t len = 0, cap;
	int opened = 0;
	bool closed;
	int64_t t_stuck;
	long rss0, rss1;
	struct http_resp r;

	raise_fd_limit();
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd (see %s)", d.log);
	rss0 = proc_rss_kib(d.pid);
	cap = (size_t)(PIPELINED + 1) * 200;
	pipe_req = malloc(cap);
	CHECK(pipe_req, "out of memory");
	len += (size_t)snprintf(pipe_req, cap, "GET /locks/%s?index=0&wait_ms=3000 HTTP/1.1\r\n"
				"Host: x\r\n\r\n", n);
	for (int i = 0; i < PIPELINED; i++)
		len += (size_t)snprintf(pipe_req + len, cap - len, "GET /locks/%s HTTP/1.1\r\n"
					"Host: x\r\n\r\n", n);
	CHECK(bystander_start(&by, d.base, NULL, 5), "start the bystander");
	for (int i = 0; i < READERS; i++) {
		int small = 4096;

		fds[i] = raw_connect(d.port);
		if (fds[i] < 0)
			continue;
		setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		opened += send(fds[i], pipe_req, len, MSG_DONTWAIT | MSG_NOSIGNAL) > 0;
	}
	free(pipe_req);
	CHECK(opened == READERS, "%d of %d readers sent their watches", opened, READERS);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_watches") >= READERS * 0.9, 10000),
	      "the watches wait (%.0f)", metric_value(&d, "dlockd_watches"));
	snprintf(path, sizeof(path), "/locks/%s?owner=c&ttl_ms=60000", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "the watched lock changes");
	http_free(&r);
	sleep_ms(2000);
	rss1 = proc_rss_kib(d.pid);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_watches") == 0, 10000), "no watch left (%.0f)",
	      metric_value(&d, "dlockd_watches"));
	/* the stuck ones are closed after --idle-timeout-s of no progress */
	t_stuck = mono_ms();
	closed = WAIT_FOR(metric_value(&d, "dlockd_http_connections") <= 3, 15000);
	t_stuck = mono_ms() - t_stuck;
	for (int i = 0; i < READERS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	bystander_stop(&by);
	printf("# %d readers x %d pipelined reads, never read: bystander %d cycles, %d failed, "
	       "slowest %.0f ms; dlockd RSS %ld -> %ld KiB; the stuck connections closed by dlockd "
	       "%lld ms after the watches answered\n", READERS, PIPELINED + 1, by.cycles,
	       by.failed, by.slowest_ms, rss0, rss1, (long long)t_stuck + 2000);
	CHECK(closed, "the stuck connections are closed after --idle-timeout-s (%.0f open)",
	      metric_value(&d, "dlockd_http_connections"));
	CHECK(by.cycles > 0 && by.failed == 0, "bystander: %d cycles, %d failed", by.cycles,
	      by.failed);
	CHECK(by.slowest_ms < 2000.0 * slow_factor(), "bystander's slowest cycle %.0f ms",
	      by.slowest_ms);
	CHECK(status_of(&d, "GET", "/healthz") == 200, "dlockd serves on");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}
