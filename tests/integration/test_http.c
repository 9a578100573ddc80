/* test_http.c -- HTTP as dlockd speaks it, over raw sockets where curl
 * would not send what is tested: ambiguous message framing, a folded
 * header line, a second Authorization or Host, and a NUL or control byte
 * in the request target are refused with 400 and the connection closed
 * (no request smuggled behind it runs, no cut name or owner is used), a
 * client that half-closes after its request still gets its answer, an
 * escaped slash is part of a name and never a path separator, HEAD is
 * answered wherever GET is, log lines parse whatever the path held and
 * say what an operator needs (a forced release: force and the peer; an
 * error answer: its code), and
 * past --max-connections a new client gets a prompt 503 (not a hang in
 * the listen backlog). */
#include "../harness/harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ----- Raw exchanges ----- */

struct raw_resp {
	char buf[16384];
	size_t len;
	bool eof;		/* the server closed the connection */
	int status;		/* of the first response; 0 if none */
	json_t *json;		/* its body, if JSON */
};

/* Send req on fd (then shutdown(SHUT_WR) when half_close), and read until
 * the server closes or has been quiet for quiet_ms after the first byte
 * (a kept-alive connection), or timeout_ms in all. */
static void raw_exchange_fd(int fd, const char *req, size_t len, bool half_close, int quiet_ms,
			    int timeout_ms, struct raw_resp *out)
{
	int64_t until = mono_ms() + (int64_t)timeout_ms * slow_factor();
	const char *body;

	memset(out, 0, sizeof(*out));
	if (write(fd, req, len) != (ssize_t)len)
		return;
	if (half_close)
		shutdown(fd, SHUT_WR);
	while (mono_ms() < until && out->len + 1 < sizeof(out->buf)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int wait = out->len ? quiet_ms * slow_factor() : (int)(until - mono_ms());
		ssize_t n;

		if (poll(&p, 1, wait > 0 ? wait : 0) <= 0)
			break;
		n = read(fd, out->buf + out->len, sizeof(out->buf) - 1 - out->len);
		if (n <= 0) {
			out->eof = true;
			break;
		}
		out->len += (size_t)n;
	}
	out->buf[out->len] = '\0';
	sscanf(out->buf, "HTTP/1.%*d %d", &out->status);
	body = strstr(out->buf, "\r\n\r\n");
	if (body)
		out->json = json_loads(body + 4, JSON_DISABLE_EOF_CHECK, NULL);
}

static int raw_exchange(int port, const char *req, bool half_close, struct raw_resp *out)
{
	int fd = raw_connect(port);

	if (fd < 0)
		return -1;
	raw_exchange_fd(fd, req, strlen(req), half_close, 1500, 10000, out);
	close(fd);
	return 0;
}

static const char *raw_error(const struct raw_resp *r)
{
	json_t *e = r->json ? json_object_get(r->json, "error") : NULL;

	return e && json_is_string(e) ? json_string_value(e) : "(none)";
}

static void raw_free(struct raw_resp *r)
{
	if (r->json)
		json_decref(r->json);
	r->json = NULL;
}

/* ----- D6: framing ----- */

/* Send req (len bytes: it may hold NULs) to d on a connection of its own
 * and check that it is refused with 400 (invalid_request when code is given;
 * NULL: MHD's own answer, not JSON) and the connection closed, so the
 * force release of vpath smuggled behind it never ran, and that took (a
 * lock path the request would have taken, cut or whole) stays free. */
static void refused_and_closed(const struct dlockd_srv *d, const char *what, const char *req,
			       size_t len, const char *code, const char *vpath, const char *took)
{
	struct raw_resp r;
	int fd = raw_connect(d->port);

	CHECK(fd >= 0, "connect");
	raw_exchange_fd(fd, req, len, false, 1500, 10000, &r);
	close(fd);
	CHECK(r.status == 400, "%s: 400, got %d: %s", what, r.status, r.buf);
	if (code)
		CHECK(!strcmp(raw_error(&r), code), "%s: %s, got %s", what, code, raw_error(&r));
	CHECK(strstr(r.buf, "Connection: close"), "%s: says it closes", what);
	CHECK(r.eof, "%s: the connection is closed after the answer", what);
	CHECK(!strstr(r.buf + 12, "HTTP/1.1 200"), "%s: no second answer: %s", what, r.buf);
	raw_free(&r);
	if (vpath)
		CHECK(flag_of(d, "locked", "%s", vpath) == 1,
		      "%s: the smuggled force release did not run", what);
	if (took)
		CHECK(flag_of(d, "locked", "%s", took) == 0,
		      "%s: the refused request took no lock (%s)", what, took);
}

/* Each of n cases (what, a request format: %s the victim's name, then %s
 * the smuggled request) is refused and closed on the shared dlockd, the
 * force release of the victim smuggled behind it never runs, and case i
 * takes no lock <victim>-<'a' + i>. */
static void each_refused_and_closed(const char *const cases[][2], size_t n, const char *victim,
				    const char *smuggled)
{
	char req[1024], vpath[300], took[300];

	snprintf(vpath, sizeof(vpath), "/locks/%s", victim);
	for (size_t i = 0; i < n; i++) {
		snprintf(req, sizeof(req), cases[i][1], victim, smuggled);
		snprintf(took, sizeof(took), "/locks/%s-%c", victim, (char)('a' + i));
		refused_and_closed(&H_dlockd, cases[i][0], req, strlen(req), "invalid_request", vpath,
				   took);
	}
}

TEST(ambiguous_framing_is_refused_and_closed)
{
	/* each smuggles "DELETE /locks/<victim>?force=true" past a proxy that
	 * frames the body the other way */
	static const char *const cases[][2] = {
		{ "Content-Length and Transfer-Encoding",
		  "PUT /locks/%s-a?owner=a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s" },
		{ "two Content-Length",
		  "PUT /locks/%s-b?owner=a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
		  "Content-Length: 200\r\n\r\n%s" },
		{ "space before the colon",
		  "PUT /locks/%s-c?owner=a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n"
		  "\r\n0\r\n\r\n%s" },
		{ "space before the colon of Content-Length",
		  "PUT /locks/%s-d?owner=a HTTP/1.1\r\nHost: x\r\nContent-Length : 70\r\n\r\n%s" },
		{ "a coding other than chunked",
		  "PUT /locks/%s-e?owner=a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n"
		  "\r\n0\r\n\r\n%s" },
		{ "Transfer-Encoding twice",
		  "PUT /locks/%s-f?owner=a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s" },
		{ "Transfer-Encoding in HTTP/1.0",
		  "PUT /locks/%s-g?owner=a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s" },
		{ "an obsolete line folding",
		  "PUT /locks/%s-h?owner=a HTTP/1.1\r\nHost: x\r\n Content-Length: 0\r\n\r\n%s" },
	};
	const char *victim = lockname("victim");
	char smuggled[256], req[1024];

	snprintf(smuggled, sizeof(smuggled),
		 "DELETE /locks/%s?force=true HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		 victim);
	CHECK(lock_hold(NULL, victim, "keeper", 60000), "keeper takes %s", victim);
	each_refused_and_closed(cases, sizeof(cases) / sizeof(cases[0]), victim, smuggled);
	/* chunked alone is fine */
	snprintf(req, sizeof(req), "PUT /locks/%s-ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		 "\r\n11\r\n{\"owner\":\"chunk\"}\r\n0\r\n\r\n", victim);
	{
		struct raw_resp r;

		CHECK(raw_exchange(H_dlockd.port, req, false, &r) == 0, "connect");
		CHECK(r.status == 200 && !r.eof, "a chunked body is taken: %s", r.buf);
		raw_free(&r);
	}
}

/* MHD 0.9.75 takes an obs-fold (RFC 9112 §5.2) by gluing the continuation
 * to the field NAME ("Content-Length: 0" + " 53" is a field
 * "Content-Length53" with the value "0"): the body length is then what no
 * proxy would make of it. Any folded line is refused, on any field. */
TEST(folded_header_lines_are_refused_and_closed)
{
	static const char *const cases[][2] = {
		{ "a folded Content-Length",
		  "PUT /locks/%s-a?owner=a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n 53\r\n\r\n%s" },
		{ "a folded Content-Length with a body",
		  "PUT /locks/%s-b?owner=a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n 3\r\n\r\n"
		  "{\"owner\":\"b\"}%s" },
		{ "a folded Transfer-Encoding",
		  "PUT /locks/%s-c?owner=a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n chunked\r\n"
		  "\r\n0\r\n\r\n%s" },
		{ "a fold on an unrelated field",
		  "PUT /locks/%s-d?owner=a HTTP/1.1\r\nHost: x\r\nX-Pad: a\r\n b\r\n\r\n%s" },
		{ "a fold with a tab",
		  "PUT /locks/%s-e?owner=a HTTP/1.1\r\nHost: x\r\nX-Pad: a\r\n\tb\r\n\r\n%s" },
		{ "a folded Authorization",
		  "PUT /locks/%s-f?owner=a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n tok\r\n"
		  "\r\n%s" },
		{ "a field folded over three lines",
		  "PUT /locks/%s-g?owner=a HTTP/1.1\r\nX-Pad: a\r\n b\r\n c\r\nHost: x\r\n\r\n%s" },
		{ "a fold on the last field, bare LF",
		  "PUT /locks/%s-h?owner=a HTTP/1.1\nHost: x\nContent-Length: 0\n 7\n\n%s" },
	};
	const char *victim = lockname("fvictim");
	char smuggled[256], req[1024], vpath[300];

	snprintf(smuggled, sizeof(smuggled),
		 "DELETE /locks/%s?force=true HTTP/1.1\r\nHost: x\r\n\r\n", victim);
	snprintf(vpath, sizeof(vpath), "/locks/%s", victim);
	CHECK(lock_hold(NULL, victim, "keeper", 60000), "keeper takes %s", victim);
	each_refused_and_closed(cases, sizeof(cases) / sizeof(cases[0]), victim, smuggled);
	/* what MHD refuses itself (not JSON): a Content-Length not all digits */
	snprintf(req, sizeof(req), "PUT /locks/%s-x?owner=a HTTP/1.1\r\nHost: x\r\n"
		 "Content-Length: 1 3\r\n\r\n%s", victim, smuggled);
	{
		char p[300];

		snprintf(p, sizeof(p), "/locks/%s-x", victim);
		refused_and_closed(&H_dlockd, "Content-Length '1 3'", req, strlen(req), NULL, vpath, p);
		snprintf(req, sizeof(req), "PUT /locks/%s-y?owner=a HTTP/1.1\r\nHost: x\r\n"
			 "Content-Length: +0\r\n\r\n%s", victim, smuggled);
		snprintf(p, sizeof(p), "/locks/%s-y", victim);
		refused_and_closed(&H_dlockd, "Content-Length '+0'", req, strlen(req), NULL, vpath, p);
	}
}

/* MHD 0.9.75 takes a line with an empty field name (": x") after a field
 * for the end of the header block: the fields after it are dropped
 * (Content-Length too) and what follows is read as the next request --
 * here a force release a proxy would have taken for the body (a probe:
 * "PUT /locks/smuggled" granted). A NUL in a value ends it for MHD, the
 * rest of the line unseen ("Bearer tok\0junk" authenticated as "tok").
 * Each is refused and closed; trailing blanks and empty values are not. */
TEST(header_lines_without_a_name_or_with_a_nul_are_refused_and_closed)
{
	static const char *const cases[][2] = {
		{ "an empty field name after a field",
		  "PUT /locks/%s-a?owner=a HTTP/1.1\r\nHost: x\r\n: x\r\nContent-Length: 77\r\n\r\n%s" },
		{ "an empty field name, no blank",
		  "PUT /locks/%s-b?owner=a HTTP/1.1\r\nHost: x\r\n:x\r\nContent-Length: 77\r\n\r\n%s" },
		{ "an empty field name and value",
		  "PUT /locks/%s-c?owner=a HTTP/1.1\r\nHost: x\r\n:\r\nContent-Length: 77\r\n\r\n%s" },
		{ "an empty field name first",
		  "PUT /locks/%s-d?owner=a HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n%s" },
		{ "an empty field name, bare LF",
		  "PUT /locks/%s-e?owner=a HTTP/1.1\nHost: x\n: x\nContent-Length: 77\n\n%s" },
		{ "a bare ':' line after bare-LF lines",
		  "PUT /locks/%s-f?owner=a HTTP/1.1\nHost: x\nX-Pad: 1\n:\nContent-Length: 77\n\n%s" },
		{ "a bare LF among CR LFs",
		  "PUT /locks/%s-g?owner=a HTTP/1.1\r\nHost: x\nX-Pad: 1\r\n\r\n%s" },
	};
	/* a NUL inside a value, and a NUL line after bare-LF lines (each then
	 * "junk" or LF) */
	static const char *const nuls[] = { "X-Request-Id: ab", "Authorization: Bearer tok",
					    "X-Pad: 1\n" };
	const char *victim = lockname("evictim");
	char smuggled[256], req[1024], vpath[300], p[300];
	struct raw_resp r;
	size_t len;

	snprintf(smuggled, sizeof(smuggled),
		 "DELETE /locks/%s?force=true HTTP/1.1\r\nHost: x\r\n\r\n", victim);
	snprintf(vpath, sizeof(vpath), "/locks/%s", victim);
	CHECK(lock_hold(NULL, victim, "keeper", 60000), "keeper takes %s", victim);
	each_refused_and_closed(cases, sizeof(cases) / sizeof(cases[0]), victim, smuggled);
	for (size_t i = 0; i < sizeof(nuls) / sizeof(nuls[0]); i++) {
		bool lf = i == 2;

		len = (size_t)snprintf(req, sizeof(req), "PUT /locks/%s-n%zu?owner=a HTTP/1.1%s"
				       "Host: x%s%s", victim, i, lf ? "\n" : "\r\n", lf ? "\n" : "\r\n",
				       nuls[i]);
		len += (size_t)snprintf(req + len + 1, sizeof(req) - len - 1, "%s%s",
					lf ? "\n" : "junk\r\n\r\n", smuggled) + 1;	/* the NUL */
		snprintf(p, sizeof(p), "/locks/%s-n%zu", victim, i);
		refused_and_closed(&H_dlockd, nuls[i], req, len, "invalid_request", vpath, p);
	}
	/* blanks after a value, an empty value, the last field's too, are
	 * fine; so are bare-LF lines, all of them */
	snprintf(req, sizeof(req), "PUT /locks/%s-ok?owner=ok HTTP/1.1\r\nHost: x \t\r\n"
		 "X-Pad:\r\nX-Pad-2:   \r\n\r\n", victim);
	CHECK(raw_exchange(H_dlockd.port, req, false, &r) == 0, "connect");
	CHECK(r.status == 200 && !r.eof, "blanks and empty values are taken: %s", r.buf);
	raw_free(&r);
	snprintf(req, sizeof(req), "PUT /locks/%s-lf?owner=lf HTTP/1.1\nHost: x\nX-Pad:\n\n",
		 victim);
	CHECK(raw_exchange(H_dlockd.port, req, false, &r) == 0, "connect");
	CHECK(r.status == 200 && !r.eof, "bare-LF lines are taken: %s", r.buf);
	raw_free(&r);
}

/* Many long fields make MHD grow (and move) its read buffer, past half of
 * what a connection has (16 KiB, api/server.c): none of them is taken for
 * a folded line, and a fold after them still is. */
TEST(long_header_fields_are_not_taken_for_folds)
{
	static char req[24000];
	const char *n = lockname("longh");
	char took[300];
	size_t len;
	struct raw_resp r;
	int fd;

	len = (size_t)snprintf(req, sizeof(req), "PUT /locks/%s?owner=a HTTP/1.1\r\nHost: x\r\n", n);
	for (int i = 0; i < 11; i++) {
		len += (size_t)snprintf(req + len, sizeof(req) - len, "X-Pad-%d:%s", i, i % 2 ? " " : "\t ");
		memset(req + len, 'a' + i, 1000);
		len += 1000;
		len += (size_t)snprintf(req + len, sizeof(req) - len, "\r\n");
	}
	memcpy(req + len, "\r\n", 3);
	fd = raw_connect(H_dlockd.port);
	CHECK(fd >= 0, "connect");
	raw_exchange_fd(fd, req, len + 2, false, 1500, 10000, &r);
	close(fd);
	CHECK(r.status == 200, "11 KB of header fields are taken: %.300s", r.buf);
	raw_free(&r);
	snprintf(took, sizeof(took), "/locks/%s-f", n);
	len = (size_t)snprintf(req, sizeof(req), "PUT %s?owner=a HTTP/1.1\r\nHost: x\r\n", took);
	for (int i = 0; i < 11; i++) {
		len += (size_t)snprintf(req + len, sizeof(req) - len, "X-Pad-%d: ", i);
		memset(req + len, 'a' + i, 1000);
		len += 1000;
		len += (size_t)snprintf(req + len, sizeof(req) - len, "\r\n");
	}
	len += (size_t)snprintf(req + len, sizeof(req) - len, "X-Last: a\r\n b\r\n\r\n");
	refused_and_closed(&H_dlockd, "a fold after 11 KB of fields", req, len, "invalid_request",
			   NULL, took);
}

/* MHD finds the HTTP version from the end of the request line, so a raw
 * NUL stays inside the target, where every C string of it ends: the name,
 * owner or parameters would be cut short silently. Such a target, and one
 * with any other control character or a raw space, is refused; the log
 * does not show the cut path as if it were the request. ('^' below stands
 * for the NUL.) */
TEST(nul_and_control_bytes_in_the_target_are_refused)
{
	static const char *const cases[][3] = {
		/* what, target (%s: the name), the lock a cut request would take */
		{ "a NUL in the path", "/locks/%sfair^/../../x?owner=zz", "%sfair" },
		{ "a NUL in the owner", "/locks/%sb?owner=z^z", "%sb" },
		{ "a NUL before a parameter", "/locks/%sc?owner=zz^&ttl_ms=5", "%sc" },
		{ "a NUL ending the target", "/locks/%sd?owner=zz^", "%sd" },
		{ "a raw 0x01 in the path", "/locks/%se\x01?owner=zz", "%se" },
		{ "a raw DEL in the owner", "/locks/%sf?owner=z\x7fz", "%sf" },
		{ "a raw tab in the owner", "/locks/%sg?owner=z\tz", "%sg" },
		{ "a raw space in the owner", "/locks/%sh?owner=zz ttl_ms=5", "%sh" },
	};
	const char *n = lockname("nul");
	const char *victim = lockname("nvictim");
	struct dlockd_srv d;
	char target[400], req[1024], took[300], vpath[300], fair[400], line[4096];
	bool cut_logged = false, nul_logged = false;
	FILE *log;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start");	/* for its log */
	snprintf(vpath, sizeof(vpath), "/locks/%s", victim);
	CHECK(lock_hold(&d, victim, "keeper", 60000), "keeper takes %s", victim);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *caret;
		size_t len;

		snprintf(target, sizeof(target), cases[i][1], n);
		snprintf(took, sizeof(took), cases[i][2], n);
		len = (size_t)snprintf(req, sizeof(req), "PUT %s HTTP/1.1\r\nHost: x\r\n\r\n"
				       "DELETE %s?force=true HTTP/1.1\r\nHost: x\r\n\r\n", target, vpath);
		caret = strchr(req, '^');
		if (caret)
			*caret = '\0';
		snprintf(target, sizeof(target), "/locks/%s", took);
		refused_and_closed(&d, cases[i][0], req, len, "invalid_request", vpath, target);
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	snprintf(fair, sizeof(fair), "\"path\":\"/locks/%sfair\"", n);
	log = fopen(d.log, "r");
	CHECK(log, "the log");
	while (log && fgets(line, sizeof(line), log)) {
		cut_logged |= strstr(line, fair) && strstr(line, "\"method\":\"PUT\"");
		nul_logged |= strstr(line, "fair%00") && strstr(line, "\"status\":400");
	}
	if (log)
		fclose(log);
	CHECK(!cut_logged, "the log does not show the cut path as the request");
	CHECK(nul_logged, "the log shows where the NUL was, and the 400");
}

/* A NUL or control byte in the method, or a bare CR or other control in a
 * header value (found by hostile probing): MHD served "GET\0PUT /x" as a
 * GET and took "X: a\rContent-Length: 0" as one field where a parser
 * ending lines on a bare CR sees a Content-Length; each is refused and
 * closed, and the force release sent behind it never runs. */
TEST(control_bytes_in_the_method_or_a_field_value_are_refused)
{
	static const char *const cases[][2] = {
		/* what, request head ('^' becomes a NUL; %s: the lock name) */
		{ "a NUL in the method", "GET^PUT /locks/%sa?owner=c HTTP/1.1\r\nHost: x\r\n\r\n" },
		{ "a control byte before the method", "\x01PUT /locks/%sb?owner=c HTTP/1.1\r\nHost: x\r\n\r\n" },
		{ "a NUL inside the method", "PU^T /locks/%sc?owner=c HTTP/1.1\r\nHost: x\r\n\r\n" },
		{ "a bare CR in a field value", "PUT /locks/%sd?owner=c HTTP/1.1\r\nHost: x\r\n"
		  "X: a\rContent-Length: 0\r\nContent-Length: 0\r\n\r\n" },
		{ "a control byte in a field value", "PUT /locks/%se?owner=c HTTP/1.1\r\nHost: x\r\n"
		  "X: a\x0b" "b\r\n\r\n" },
	};
	const char *n = lockname("ctl");
	const char *victim = lockname("cvictim");
	char head[512], req[1024], vpath[300], took[300];

	snprintf(vpath, sizeof(vpath), "/locks/%s", victim);
	CHECK(lock_hold(NULL, victim, "keeper", 60000), "keeper takes %s", victim);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;

		snprintf(head, sizeof(head), cases[i][1], n);
		len = (size_t)snprintf(req, sizeof(req), "%sDELETE %s?force=true HTTP/1.1\r\n"
				       "Host: x\r\n\r\n", head, vpath);
		for (char *c = req; c < req + len; c++)
			if (*c == '^')
				*c = '\0';
		snprintf(took, sizeof(took), "/locks/%s%c", n, "abcde"[i]);
		refused_and_closed(&H_dlockd, cases[i][0], req, len, NULL, vpath, took);
	}
}

/* The first Authorization would win (an admin token, then a client's, and
 * a force release is let through); RFC 9112 §3.2 refuses two Hosts. */
TEST(a_repeated_authorization_or_host_is_refused)
{
	struct dlockd_srv d;
	const char *victim = lockname("avictim");
	const char *n = lockname("twohost");
	char req[1024], vpath[300], p[400];
	struct http_resp r;

	CHECK(dlockd_start_auth(&d, "http-tokens", "tok-http-admin-5c1e admin * ops\n"
				"tok-http-client-9a7d client * app\n") == 0, "start with --auth-file");
	snprintf(vpath, sizeof(vpath), "/locks/%s", victim);
	snprintf(p, sizeof(p), "%s?owner=keeper&ttl_ms=60000", vpath);
	http_bearer("tok-http-client-9a7d");
	http_on(d.base, "PUT", p, NULL, &r);
	if (r.status != 200)
		http_bearer(NULL);	/* CHECK returns */
	CHECK_STATUS(r, 200, "the keeper takes the lock");
	http_free(&r);
	snprintf(req, sizeof(req), "DELETE %s?force=true HTTP/1.1\r\nHost: x\r\n"
		 "Authorization: Bearer tok-http-admin-5c1e\r\n"
		 "Authorization: Bearer tok-http-client-9a7d\r\n\r\n", vpath);
	refused_and_closed(&d, "admin then client", req, strlen(req), "invalid_request", vpath, NULL);
	snprintf(req, sizeof(req), "DELETE %s?force=true HTTP/1.1\r\nHost: x\r\n"
		 "Authorization: Bearer tok-http-client-9a7d\r\n"
		 "Authorization: Bearer tok-http-admin-5c1e\r\n\r\n", vpath);
	refused_and_closed(&d, "client then admin", req, strlen(req), "invalid_request", vpath, NULL);
	snprintf(req, sizeof(req), "PUT /locks/%s?owner=a HTTP/1.1\r\nHost: x\r\nHost: y\r\n"
		 "Authorization: Bearer tok-http-client-9a7d\r\n\r\n", n);
	snprintf(p, sizeof(p), "/locks/%s", n);
	refused_and_closed(&d, "Host twice", req, strlen(req), "invalid_request", vpath, p);
	http_bearer(NULL);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	rcmd_int("DEL %s", victim);
}

/* RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without
 * a Host field (dlockd served it). HTTP/1.0 needs none. */
TEST(an_http_1_1_request_without_host_is_refused)
{
	static const char *const cases[][2] = {
		{ "HTTP/1.1 without Host",
		  "PUT /locks/%s-a?owner=a HTTP/1.1\r\nContent-Length: 0\r\n\r\n%s" },
		{ "HTTP/1.1 without Host, keep-alive asked",
		  "PUT /locks/%s-b?owner=a HTTP/1.1\r\nConnection: keep-alive\r\n"
		  "Content-Length: 0\r\n\r\n%s" },
	};
	const char *victim = lockname("nohost");
	char smuggled[256], req[512];
	struct raw_resp r;

	snprintf(smuggled, sizeof(smuggled),
		 "DELETE /locks/%s?force=true HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		 victim);
	CHECK(lock_hold(NULL, victim, "keeper", 60000), "keeper takes %s", victim);
	each_refused_and_closed(cases, sizeof(cases) / sizeof(cases[0]), victim, smuggled);
	snprintf(req, sizeof(req), "PUT /locks/%s-c?owner=old HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
		 victim);
	CHECK(raw_exchange(H_dlockd.port, req, false, &r) == 0, "connect");
	CHECK(r.status == 200, "HTTP/1.0 without Host is served: %s", r.buf);
	raw_free(&r);
}

/* ----- D7: half-close ----- */

TEST(half_closed_client_gets_its_answer)
{
	const char *n = lockname("hc");
	char req[512];
	struct raw_resp r;

	CHECK(lock_hold(NULL, n, "a", 60000), "a takes %s", n);
	snprintf(req, sizeof(req), "GET /locks/%s?owner=a HTTP/1.1\r\nHost: x\r\n\r\n", n);
	CHECK(raw_exchange(H_dlockd.port, req, true, &r) == 0, "connect");
	CHECK(r.status == 200 && r.json && json_is_true(json_object_get(r.json, "held")),
	      "status after SHUT_WR: %s", r.buf);
	raw_free(&r);
	snprintf(req, sizeof(req), "POST /locks/%s/heartbeat?owner=a HTTP/1.1\r\nHost: x\r\n\r\n", n);
	CHECK(raw_exchange(H_dlockd.port, req, true, &r) == 0, "connect");
	CHECK(r.status == 200 && r.json && json_object_get(r.json, "ttl_ms"),
	      "heartbeat after SHUT_WR: %s", r.buf);
	raw_free(&r);
	for (int i = 0; i < 5; i++) {	/* it lost the answer every time */
		char p[300];

		if (i)
			CHECK(lock_hold(NULL, n, "a", 60000), "a takes %s", n);
		snprintf(req, sizeof(req), "DELETE /locks/%s?owner=a HTTP/1.1\r\nHost: x\r\n\r\n", n);
		CHECK(raw_exchange(H_dlockd.port, req, true, &r) == 0, "connect");
		CHECK(r.status == 200 && r.json && json_is_true(json_object_get(r.json, "released")),
		      "release after SHUT_WR (round %d): %s", i, r.buf);
		CHECK(r.eof, "then the connection is closed");
		raw_free(&r);
		snprintf(p, sizeof(p), "/locks/%s", n);
		CHECK(flag_of(NULL, "locked", "%s", p) == 0, "released");
	}
	CHECK(raw_exchange(H_dlockd.port, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", true, &r) == 0,
	      "connect");
	CHECK(r.status == 200, "readyz after SHUT_WR: %s", r.buf);
	raw_free(&r);
}

/* A waiting acquire takes a half-close for a hang-up: it stops waiting
 * and no grant is made for it (docs/reference/http-api.md, "half-close"). */
TEST(half_closed_waiting_acquire_is_given_up)
{
	const char *n = lockname("hcw");
	char req[512];
	struct raw_resp r;
	int fd;

	CHECK(lock_hold(NULL, n, "keeper", 60000), "keeper takes %s", n);
	fd = raw_connect(H_dlockd.port);
	CHECK(fd >= 0, "connect");
	snprintf(req, sizeof(req), "PUT /locks/%s?owner=w&wait_ms=20000 HTTP/1.1\r\nHost: x\r\n\r\n",
		 n);
	raw_exchange_fd(fd, req, strlen(req), true, 1500, 10000, &r);
	close(fd);
	CHECK(r.eof && r.len == 0, "closed without an answer, well before wait_ms: %s", r.buf);
	CHECK(wait_no_waiters(NULL, 3000), "and it waits no more");
	CHECK(lock_release(NULL, n, "keeper") == 200, "the keeper releases");
	/* nothing to wait for: a window in which a waiter wrongly kept
	 * would take the lock */
	sleep_ms(300);
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0,
	      "nobody got the lock for the half-closed waiter");
	raw_free(&r);
}

/* ----- D8: escaped slashes ----- */

TEST(escaped_slash_is_part_of_the_name)
{
	const char *n = lockname("enc");
	struct http_resp r;
	char p[512];

	snprintf(p, sizeof(p), "/rwlocks/%s%%2Fwrite?owner=z", n);
	http("PUT", p, NULL, &r);
	CHECK(r.status == 405 || r.status == 400, "PUT on an escaped '/write' is no write lock: %ld %s",
	      r.status, r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/rwlocks/%s", n);
	CHECK(flag_of(NULL, "locked", "%s", p) == 0, "no write lock taken on %s", n);

	CHECK(lock_hold(NULL, n, "z", 60000), "z takes %s", n);
	snprintf(p, sizeof(p), "/locks/%s%%2Fheartbeat?owner=z&ttl_ms=3600000", n);
	http("POST", p, NULL, &r);
	CHECK(r.status == 405 || r.status == 400, "an escaped '/heartbeat' renews nothing: %ld %s",
	      r.status, r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s", n);
	http("GET", p, NULL, &r);
	CHECK(json_int(&r, "ttl_ms") <= 60000, "the lease was not renewed: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s%%2Fheartbeat", n);
	http("GET", p, NULL, &r);
	CHECK_ERROR(r, 400, "invalid_name", "a name with an escaped slash");
	http_free(&r);
}

/* ----- HEAD ----- */

static size_t count_body(char *data, size_t size, size_t n, void *cls)
{
	*(size_t *)cls += size * n;
	(void)data;
	return size * n;
}

/* HEAD path with curl's NOBODY: status, Content-Length, bytes of body. */
static long head(const char *path, double *length, size_t *body, char *allow, size_t cap)
{
	CURL *c = curl_easy_init();
	struct curl_header *h;
	char url[512];
	long status = -1;
	curl_off_t len = -1;

	*body = 0;
	snprintf(url, sizeof(url), "%s%s", H_dlockd.base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, count_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L * slow_factor());
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
		if (allow) {
			allow[0] = '\0';
			if (curl_easy_header(c, "Allow", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
				snprintf(allow, cap, "%s", h->value);
		}
	}
	*length = (double)len;
	curl_easy_cleanup(c);
	return status;
}

TEST(head_is_answered_wherever_get_is)
{
	const char *n = lockname("head");
	static const char *const fixed[] = { "/healthz", "/readyz", "/metrics", "/openapi.yaml",
					     "/locks?limit=1" };
	const size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	char p[300], allow[64];
	double len;
	size_t body;
	struct http_resp r;

	CHECK(lock_hold(NULL, n, "h", 60000), "h takes %s", n);
	for (size_t i = 0; i < nfixed + 2; i++) {
		const char *path = i < nfixed ? fixed[i] : p;

		if (i == nfixed)
			snprintf(p, sizeof(p), "/locks/%s", n);
		if (i == nfixed + 1)
			snprintf(p, sizeof(p), "/rwlocks/%s-rw", n);
		CHECK(head(path, &len, &body, NULL, 0) == 200, "HEAD %s answers 200", path);
		CHECK(len > 0 && body == 0, "HEAD %s: Content-Length %.0f, %zu body bytes", path, len,
		      body);
	}
	CHECK(head("/locks/x/heartbeat", &len, &body, allow, sizeof(allow)) == 405,
	      "HEAD where GET is not allowed");
	CHECK(!strcmp(allow, "POST"), "Allow: %s", allow);
	http("PUT", "/healthz", NULL, &r);
	CHECK(!strcmp(r.allow, "GET, HEAD"), "405 lists HEAD with GET: %s", r.allow);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s", n);
	http("POST", p, NULL, &r);
	CHECK(!strcmp(r.allow, "GET, HEAD, PUT, DELETE"), "Allow: %s", r.allow);
	http_free(&r);
}

/* ----- D9: the log ----- */

/* Every line of d's log parses as JSON (text: is a line of its own);
 * returns the number of lines, or -1 at the first bad one (in bad). */
static int check_log(const struct dlockd_srv *d, bool json, char *bad, size_t cap,
		     int *forged, int *cafe)
{
	FILE *f = fopen(d->log, "r");
	char *line = NULL;
	size_t lcap = 0;
	ssize_t k;
	int n = 0;

	*forged = *cafe = 0;
	while (f && (k = getline(&line, &lcap, f)) > 0) {
		json_t *j, *lock;

		n++;
		if (json) {
			j = json_loads(line, 0, NULL);
			if (!j) {
				snprintf(bad, cap, "%.300s", line);
				n = -1;
				break;
			}
			if (json_object_get(j, "forged"))
				(*forged)++;
			lock = json_object_get(j, "lock");
			if (lock && json_is_string(lock) &&
			    !strcmp(json_string_value(lock), "caf\xc3\xa9"))
				(*cafe)++;
			json_decref(j);
		} else {
			if (strncmp(line, "20", 2) || !strchr(line, 'Z')) {
				snprintf(bad, cap, "%.300s", line);
				n = -1;
				break;
			}
			const char *at = strstr(line, " lock=caf\xc3\xa9");

			if (at && (at[11] == ' ' || at[11] == '\n'))
				(*cafe)++;
		}
		if (strstr(line, "forged\"") == line || !strncmp(line, "forged", 6))
			(*forged)++;
	}
	free(line);
	if (f)
		fclose(f);
	return n;
}

static void log_abuse(const struct dlockd_srv *d)
{
	static char big[5200];
	struct http_resp r;
	struct raw_resp rr;
	char req[600];

	/* a path over 4 KB, of escaped UTF-8 */
	strcpy(big, "/locks/");
	while (strlen(big) + 7 < sizeof(big))
		strcat(big, "%C3%A9");
	http_on(d->base, "GET", big, NULL, &r);
	http_free(&r);
	/* a line feed and a forged line in the path */
	http_on(d->base, "GET", "/locks/a%0A%7B%22forged%22%3A1%7D", NULL, &r);
	http_free(&r);
	http_on(d->base, "GET", "/nope%0Aforged%20line", NULL, &r);
	http_free(&r);
	http_on(d->base, "GET", "/locks/caf%C3%A9", NULL, &r);
	http_free(&r);
	/* raw control bytes and invalid UTF-8 in the request line */
	snprintf(req, sizeof(req), "GET /locks/x\x01\x7f\xff\xc3 HTTP/1.1\r\nHost: x\r\n\r\n");
	raw_exchange(d->port, req, false, &rr);
	raw_free(&rr);
}

TEST(log_lines_parse_whatever_the_path)
{
	static const char *const text[] = { "--log-format", "text", NULL };
	struct dlockd_srv d;
	char bad[400] = "";
	int n, forged, cafe;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start");
	log_abuse(&d);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	n = check_log(&d, true, bad, sizeof(bad), &forged, &cafe);
	CHECK(n > 5, "every JSON log line parses (%d lines); first bad: %s", n, bad);
	CHECK(forged == 0, "no forged line");
	CHECK(cafe == 1, "the name caf\xc3\xa9 is logged as the UTF-8 it is (%d lines)", cafe);

	CHECK(dlockd_start(&d, NULL, text) == 0, "start with --log-format text");
	log_abuse(&d);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	n = check_log(&d, false, bad, sizeof(bad), &forged, &cafe);
	CHECK(n > 5, "every text log line is a line of its own (%d lines); first bad: %s", n, bad);
	CHECK(forged == 0, "no forged line");
	CHECK(cafe == 1, "the name caf\xc3\xa9 is logged as the UTF-8 it is (%d lines)", cafe);
}

/* The status of method on the path (a printf format) on d, with token
 * (NULL: none). */
static long status_with(const struct dlockd_srv *d, const char *token, const char *method,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static long status_with(const struct dlockd_srv *d, const char *token, const char *method,
			const char *fmt, ...)
{
	struct http_resp r;
	char path[400];
	va_list ap;
	long s;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	http_bearer(token);
	s = http_on(d->base, method, path, NULL, &r) == 0 ? r.status : 0;
	http_bearer(NULL);
	http_free(&r);
	return s;
}

TEST(access_log_names_forced_releases_and_error_codes)
{
	static const char *const text[] = { "--log-format", "text", NULL };
	const char *a = "tok-log-admin-4c1d", *c = "tok-log-client-9e2b";
	const char *n = lockname("log"), *m = lockname("logrw");
	char tokens[128];
	struct dlockd_srv d;

	snprintf(tokens, sizeof(tokens), "%s admin * ops\n%s client * app\n", a, c);
	CHECK(dlockd_start_auth(&d, "log-tokens", tokens) == 0, "start with --auth-file");
	CHECK(status_with(&d, c, "PUT", "/locks/%s?owner=w1", n) == 200, "w1 takes it");
	CHECK(status_with(&d, c, "PUT", "/locks/%s?owner=w2", n) == 409, "locked");
	CHECK(status_with(&d, c, "DELETE", "/locks/%s?owner=w2", n) == 409, "not_owner");
	CHECK(status_with(&d, c, "DELETE", "/locks/%s?force=true", n) == 403,
	      "a client may not force");
	CHECK(status_with(&d, a, "DELETE", "/locks/%s?force=true", n) == 200, "an admin may");
	CHECK(status_with(&d, c, "DELETE", "/locks/%s?owner=w1", n) == 409, "not_held");
	CHECK(status_with(&d, c, "PUT", "/rwlocks/%s/read?owner=r1&ttl_ms=5000", m) == 200,
	      "a read lock");
	CHECK(status_with(&d, c, "PUT", "/locks/%s?owner=w1", m) == 409, "wrong_kind");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");

	CHECK(file_lines_with(d.log, "\"method\":\"DELETE\"", "\"status\":200",
			      "\"force\":true", "\"principal\":\"ops\"",
			      "\"peer\":\"127.0.0.1:", NULL) == 1,
	      "the forced release says force, the token's name and the peer");
	CHECK(file_lines_with(d.log, "\"status\":403", "\"error\":\"forbidden\"",
			      "\"force\":true", "\"principal\":\"app\"",
			      "\"peer\":\"127.0.0.1:", NULL) == 1,
	      "so does a refused one");
	CHECK(file_lines_with(d.log, "\"force\"", NULL) == 2, "and no other line");
	CHECK(file_lines_with(d.log, "\"msg\":\"request\"", NULL) ==
	      file_lines_with(d.log, "\"msg\":\"request\"", "\"peer\":\"127.0.0.1:",
			      "\"request_id\":\"", NULL),
	      "every access line names the peer and the request id");
	CHECK(file_lines_with(d.log, "\"path\":\"/locks/", NULL) ==
	      file_lines_with(d.log, "\"path\":\"/locks/", "\"principal\":\"", NULL),
	      "every lock request's line names the token's name");
	CHECK(file_lines_with(d.log, "\"method\":\"PUT\"", "\"status\":409",
			      "\"error\":\"locked\"", "\"owner\":\"w2\"", NULL) == 1,
	      "a 409 locked says so");
	CHECK(file_lines_with(d.log, "\"status\":409", "\"error\":\"not_owner\"", NULL) == 1,
	      "a 409 not_owner says so");
	CHECK(file_lines_with(d.log, "\"status\":409", "\"error\":\"not_held\"", NULL) == 1,
	      "a 409 not_held says so");
	CHECK(file_lines_with(d.log, "\"status\":409", "\"error\":\"wrong_kind\"", NULL) == 1,
	      "a 409 wrong_kind says so");
	CHECK(file_lines_with(d.log, "\"status\":200", "\"error\"", NULL) == 0,
	      "a success names no error");

	/* the same in text lines */
	CHECK(dlockd_start(&d, NULL, text) == 0, "start with --log-format text");
	CHECK(status_with(&d, NULL, "PUT", "/locks/%s?owner=w1", n) == 200, "w1 takes it");
	CHECK(status_with(&d, NULL, "PUT", "/locks/%s?owner=w2", n) == 409, "locked");
	CHECK(status_with(&d, NULL, "DELETE", "/locks/%s?force=true", n) == 200, "forced");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	CHECK(file_lines_with(d.log, " DELETE /locks/", " 200 ", " force", " peer=127.0.0.1:",
			      NULL) == 1, "a forced release in text says force and the peer");
	CHECK(file_lines_with(d.log, " PUT /locks/", " 409 ", " owner=w2 error=locked", NULL) == 1,
	      "a 409 in text says its code");
	rcmd_int("DEL %s", m);
}

/* ----- --max-connections ----- */

TEST(past_max_connections_a_client_gets_503_at_once)
{
	static const char *const flags[] = { "--max-connections", "16", "--max-connections-per-client",
					     "16", "--threads", "2", NULL };
	struct dlockd_srv d;
	struct raw_resp r;
	struct http_resp h;
	int idle[16], fd;
	int64_t t0;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start");
	for (int i = 0; i < 16; i++) {
		idle[i] = raw_connect(d.port);
		CHECK(idle[i] >= 0, "idle connection %d", i);
	}
	/* the idle ones are accepted asynchronously: until all are, one more
	 * may still be taken */
	CHECK(WAIT_FOR(({ bool o; int f = raw_connect(d.port);
			  raw_exchange_fd(f, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35,
					  false, 300, 3000, &r);
			  o = r.status == 503; raw_free(&r); close(f); o; }), 5000),
	      "a connection past the limit is refused");
	fd = raw_connect(d.port);
	CHECK(fd >= 0, "connect");
	t0 = mono_ms();
	raw_exchange_fd(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35, false, 1000, 10000, &r);
	close(fd);
	CHECK(r.status == 503 && !strcmp(raw_error(&r), "overloaded"),
	      "503 overloaded past the limit: %s", r.buf);
	CHECK(strstr(r.buf, "Retry-After: 1\r\n") && strstr(r.buf, "Connection: close\r\n"),
	      "with Retry-After and Connection: close: %s", r.buf);
	CHECK(r.eof, "and the connection is closed");
	CHECK(mono_ms() - t0 < 1000 * slow_factor(), "at once (%lld ms)", (long long)(mono_ms() - t0));
	raw_free(&r);
	for (int i = 0; i < 16; i++)
		close(idle[i]);
	CHECK(WAIT_FOR(({ bool ok = http_on(d.base, "GET", "/healthz", NULL, &h) == 0 &&
				     h.status == 200; http_free(&h); ok; }), 5000),
	      "requests are served again once the idle connections are gone");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
}

/* One client (127.0.0.1) fills its half of --max-connections (40) with
 * waiting requests and tries for more: each one past its 20 gets 503
 * overloaded at once, naming --max-connections-per-client, while another
 * client (127.0.0.2) is served, its health check too. Before the share,
 * one client's waits took every connection and everyone else got 503,
 * /healthz included (a probe, 3 of 3 at --max-connections 300). */
TEST(one_client_cannot_take_every_connection)
{
	static const char *const flags[] = { "--max-connections", "40", "--threads", "2", NULL };
	const char *n = lockname("share");
	struct dlockd_srv d;
	struct raw_resp r;
	char req[400];
	int fds[40], refused = 0, waiting = 0, other;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start");
	CHECK(lock_hold(&d, n, "keeper", 60000), "keeper takes %s", n);
	snprintf(req, sizeof(req), "PUT /locks/%s?owner=w&ttl_ms=5000&wait_ms=60000 HTTP/1.1\r\n"
		 "Host: x\r\n\r\n", n);
	for (int i = 0; i < 40; i++) {
		fds[i] = raw_connect(d.port);
		CHECK(fds[i] >= 0, "connection %d", i);
		raw_exchange_fd(fds[i], req, strlen(req), false, 100, 300, &r);	/* a wait: silent */
		if (r.status == 503) {
			refused++;
			CHECK(!strcmp(raw_error(&r), "overloaded") &&
			      strstr(r.buf, "--max-connections-per-client"),
			      "the refusal names the client's share: %s", r.buf);
		} else if (r.status == 0) {
			waiting++;
		}
		raw_free(&r);
	}
	printf("# one client, 40 waits at --max-connections 40: %d waiting, %d refused\n", waiting,
	       refused);
	CHECK(waiting >= 18 && waiting <= 20 && refused == 40 - waiting,
	      "at most its half waits (%d), the rest refused (%d)", waiting, refused);
	for (int pass = 0; pass < 2; pass++) {
		other = raw_connect_from(d.port, 0x7f000002);
		CHECK(other >= 0, "another client connects");
		raw_exchange_fd(other, pass ? "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" :
				"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", pass ? 35 : 34, false,
				1000, 10000, &r);
		CHECK(r.status == 200, "another client is served (%s): %s",
		      pass ? "/healthz" : "/readyz", r.buf);
		raw_free(&r);
		close(other);
	}
	for (int i = 0; i < 40; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
}

/* ----- First contact ----- */

/* GET / is an index: JSON by default, HTML for a browser (Accept:
 * text/html), each linking the contract, the metrics, the health checks
 * and the status page. */
TEST(root_is_an_index_of_the_other_resources)
{
	static const char *const links[] = { "/openapi.yaml", "/metrics", "/healthz", "/readyz",
					     "/ui" };
	struct raw_resp r = { 0 };
	struct http_resp h;
	char req[256];

	CHECK(http("GET", "/", NULL, &h) == 0 && h.status == 200, "GET / answers 200 (%ld: %s)",
	      h.status, h.body ? h.body : "");
	CHECK(h.json && !strncmp(h.content_type, "application/json", 16),
	      "as JSON by default (%s): %s", h.content_type, h.body);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		CHECK(h.body && strstr(h.body, links[i]), "it links %s: %s", links[i], h.body);
	CHECK(json_str(&h, "version") && *json_str(&h, "version"), "and says the version: %s",
	      h.body);
	http_free(&h);

	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\nAccept: text/html,*/*;q=0.8\r\n"
		 "Connection: close\r\n\r\n");
	CHECK(raw_exchange(H_dlockd.port, req, false, &r) == 0 && r.status == 200,
	      "GET / for a browser: 200 (%d)", r.status);
	CHECK(strstr(r.buf, "Content-Type: text/html") && strstr(r.buf, "<a href=\"/openapi.yaml\""),
	      "HTML with links: %s", r.buf);
	raw_free(&r);
	http("PUT", "/", NULL, &h);
	CHECK_ERROR(h, 405, "method_not_allowed", "PUT /");
	http_free(&h);
}

/* curl -d 'owner=a' sends a form (application/x-www-form-urlencoded): the
 * 400 says so and how to send JSON or a query string instead. */
TEST(a_form_encoded_body_gets_a_hint)
{
	const char *n = lockname("form");
	struct raw_resp r = { 0 };
	struct http_resp h;
	char req[512];

	snprintf(req, sizeof(req), "PUT /locks/%s HTTP/1.1\r\nHost: x\r\n"
		 "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 15\r\n"
		 "Connection: close\r\n\r\nowner=a&ttl_ms=", n);
	CHECK(raw_exchange(H_dlockd.port, req, false, &r) == 0 && r.status == 400,
	      "a form body: 400 (%d)", r.status);
	CHECK(!strcmp(raw_error(&r), "invalid_json"), "still invalid_json: %s", raw_error(&r));
	CHECK(strstr(r.buf, "form") && strstr(r.buf, "query string") && strstr(r.buf, "JSON"),
	      "the message says it is a form and what to send instead: %s", r.buf);
	raw_free(&r);
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "nothing is held");
	/* what is simply bad JSON gets no such hint */
	{
		char path[300];

		snprintf(path, sizeof(path), "/locks/%s", n);
		http("PUT", path, "{\"owner\":", &h);
		CHECK_ERROR(h, 400, "invalid_json", "bad JSON");
		CHECK(!strstr(h.body, "form"), "no form hint for JSON: %s", h.body);
		http_free(&h);
	}
}
