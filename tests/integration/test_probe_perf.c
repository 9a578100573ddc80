/* test_probe_perf.c -- hostile probes of issue 28's faster paths: requests
 * reused by a loop (api/server.c's spares) answer each its own, whatever
 * the request before them on the connection or the loop carried, and a
 * waiter reset as its grant comes keeps only a grant it was sent; the MHD
 * daemons a loop deals connections to once SPREAD_AT requests wait serve a
 * resumed waiter at once (HTTPS too, across a SIGHUP reload), time out
 * idle connections, keep waiters past the idle timeout, and count toward
 * one --max-connections;
 * one owner waiting on both loops is told of its grant on each; a key of
 * another type under any key of a lock never leaves half a write; the
 * one-pass RESP writer carries names, owners and values at their longest
 * and of every UTF-8 width byte for byte; rediss:// calls queued behind a
 * stall when Redis restarts are answered as they ran. Raw connections
 * where the connection itself is under test. */
#include "../harness/harness.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One request on the kept-alive fd and its answer in a; its status. */
static int raw_call(int fd, const char *method, const char *path, const char *headers,
		    struct raw_answer *a)
{
	if (!raw_send(fd, method, path, headers)) {
		memset(a, 0, sizeof(*a));
		return a->status = -1;
	}
	return raw_read(fd, 10000 * slow_factor(), a);
}

/* Has fd ended (EOF or reset) within timeout_ms? Reads and drops what
 * comes before. */
static bool raw_closed_within(int fd, int timeout_ms)
{
	int64_t until = mono_ms() + timeout_ms;
	char junk[1024];

	while (mono_ms() < until) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, (int)(until - mono_ms())) <= 0)
			return false;
		if (read(fd, junk, sizeof(junk)) <= 0)
			return true;
	}
	return false;
}

/* A new connection to d with method path (no extra headers) sent; -1 if
 * it failed. */
static int raw_open(const struct dlockd_srv *d, const char *method, const char *path)
{
	int fd = raw_connect(d->port);

	if (fd >= 0 && !raw_send(fd, method, path, NULL)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void close_all(int *fd, int n)
{
	for (int i = 0; i < n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
}

/* ----- Reused requests ----- */

#define TOK_A "tok-probe-perf-a-51d0"
#define TOK_B "tok-probe-perf-b-9e27"
#define TOK_ADMIN "tok-probe-perf-admin-c3"

/* Does a's body hold the JSON text want? */
#define HAS(a, want) (strstr((a)->body, (want)) != NULL)

TEST(probe_perf_reused_requests_answer_each_their_own)
{
	struct dlockd_srv d;
	char file[300], p[512], h[512], want[512];
	const char *flags[] = { "--threads", "1", "--auth-file", file, NULL };
	struct raw_answer a;
	int ca, cb;
	FILE *f;

	snprintf(file, sizeof(file), "%s/probe-perf-tokens", test_tmpdir());
	f = fopen(file, "w");
	CHECK(f && fputs(TOK_A " client pa- team-a\n" TOK_B " client pb- team-b\n"
			 TOK_ADMIN " admin * ops\n", f) >= 0 && fclose(f) == 0, "write %s", file);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --threads 1 --auth-file");
	/* one loop: both connections' requests come from its one set of spares */
	ca = raw_connect(d.port);
	cb = raw_connect(d.port);
	CHECK(ca >= 0 && cb >= 0, "two kept-alive connections");
	for (int i = 0; i < 40; i++) {
		/* A takes pa-lock as oa<i>, tagged ra<i> */
		snprintf(p, sizeof(p), "/locks/pa-lock?owner=oa%d&ttl_ms=30000", i);
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_A "\r\nX-Request-Id: ra%d\r\n", i);
		CHECK(raw_call(ca, "PUT", p, h, &a) == 200, "round %d: A takes pa-lock: %d %s", i,
		      a.status, a.body);
		snprintf(want, sizeof(want), "\"owner\":\"oa%d\"", i);
		CHECK(HAS(&a, want) && HAS(&a, "\"name\":\"pa-lock\"") && HAS(&a, "\"holds\":1"),
		      "round %d: A's grant is A's: %s", i, a.body);
		snprintf(want, sizeof(want), "ra%d", i);
		CHECK(!strcmp(a.request_id, want), "round %d: A's request id %s, got '%s'", i, want,
		      a.request_id);

		/* B, without a token, right after: nothing of A's token or id */
		snprintf(p, sizeof(p), "/locks/pa-lock?owner=ob%d", i);
		CHECK(raw_call(cb, "PUT", p, NULL, &a) == 401 && HAS(&a, "\"unauthorized\""),
		      "round %d: no token is refused, not taken for A's: %d %s", i, a.status,
		      a.body);
		CHECK(strcmp(a.request_id, want) != 0, "round %d: B's answer has its own id", i);
		/* B's token, on A's lock: out of its scope */
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_B "\r\nX-Request-Id: rb%d\r\n", i);
		CHECK(raw_call(cb, "DELETE", p, h, &a) == 403 && HAS(&a, "\"forbidden\""),
		      "round %d: B may not release A's lock: %d %s", i, a.status, a.body);
		/* a bad name between, then B's own lock with a value */
		CHECK(raw_call(cb, "PUT", "/locks/pb-%20?owner=x", h, &a) == 400 &&
		      HAS(&a, "\"invalid_name\""), "round %d: bad name: %d %s", i, a.status, a.body);
		snprintf(p, sizeof(p), "/semaphores/pb-sem?owner=ob%d&limit=2&ttl_ms=30000&value=vb%d",
			 i, i);
		CHECK(raw_call(cb, "PUT", p, h, &a) == 200, "round %d: B takes a permit: %d %s", i,
		      a.status, a.body);
		snprintf(want, sizeof(want), "\"owner\":\"ob%d\"", i);
		CHECK(HAS(&a, want) && HAS(&a, "\"limit\":2") && !HAS(&a, "\"holds\""),
		      "round %d: B's grant is B's: %s", i, a.body);

		/* A looks at its lock: sees its owner, no error of B's */
		snprintf(p, sizeof(p), "/locks/pa-lock?owner=oa%d", i);
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_A "\r\n");
		CHECK(raw_call(ca, "GET", p, h, &a) == 200 && HAS(&a, "\"held\":true") &&
		      !HAS(&a, "\"error\""), "round %d: A's status: %d %s", i, a.status, a.body);
		/* B looks at A's: no, and at its own semaphore: its value */
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_B "\r\n");
		CHECK(raw_call(cb, "GET", "/locks/pa-lock", h, &a) == 403, "round %d: B may not "
		      "look at pa-lock: %d %s", i, a.status, a.body);
		CHECK(raw_call(cb, "GET", "/semaphores/pb-sem", h, &a) == 200, "round %d: B's "
		      "semaphore: %d %s", i, a.status, a.body);
		snprintf(want, sizeof(want), "\"value\":\"vb%d\"", i);
		CHECK(HAS(&a, want), "round %d: B sees its value: %s", i, a.body);

		/* both let go, each with its own answer */
		snprintf(p, sizeof(p), "/locks/pa-lock?owner=oa%d", i);
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_A "\r\n");
		CHECK(raw_call(ca, "DELETE", p, h, &a) == 200 &&
		      !strcmp(a.body, "{\"released\":true,\"holds\":0}\n"),
		      "round %d: A releases: %d %s", i, a.status, a.body);
		snprintf(p, sizeof(p), "/semaphores/pb-sem?owner=ob%d", i);
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_B "\r\n");
		CHECK(raw_call(cb, "DELETE", p, h, &a) == 200 &&
		      !strcmp(a.body, "{\"released\":true,\"holds\":0}\n"),
		      "round %d: B gives its permit back: %d %s", i, a.status, a.body);
		/* an admin's force on A's free lock: nothing to release */
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_ADMIN "\r\n");
		CHECK(raw_call(ca, "DELETE", "/locks/pa-lock?force=true", h, &a) == 200 &&
		      !strcmp(a.body, "{\"released\":false}\n"),
		      "round %d: force on a free lock: %d %s", i, a.status, a.body);
		/* and A's token may not force (admin not carried over) */
		snprintf(h, sizeof(h), "Authorization: Bearer " TOK_A "\r\n");
		CHECK(raw_call(ca, "DELETE", "/locks/pa-lock?force=true", h, &a) == 403,
		      "round %d: A may not force: %d %s", i, a.status, a.body);
	}
	close(ca);
	close(cb);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* ----- Connections dealt over a loop's daemons ----- */

/* Past SPREAD_AT (64) suspended on the one loop, connections are dealt
 * over its 32 daemons: FILL waiters make sure of it. */
enum { FILL = 70, LATE = 32 };

/* FILL waiters on lock n (held by "holder") on d, into fd[]. */
static bool fill_waiters(const struct dlockd_srv *d, const char *n, int *fd, int count)
{
	char p[512];

	if (!lock_hold(d, n, "holder", 120000))
		return false;
	for (int i = 0; i < count; i++) {
		snprintf(p, sizeof(p), "/locks/%s?owner=f%d&wait_ms=120000", n, i);
		fd[i] = raw_open(d, "PUT", p);
		if (fd[i] < 0)
			return false;
	}
	return wait_waiters(d, count, 10000 * slow_factor());
}

/* The first of fd[0..n) with something to read within timeout_ms, or -1. */
static int first_readable(const int *fd, int n, int timeout_ms)
{
	int64_t until = mono_ms() + timeout_ms;

	do {
		for (int i = 0; i < n; i++) {
			struct pollfd p = { .fd = fd[i], .events = POLLIN };

			if (fd[i] >= 0 && poll(&p, 1, 0) > 0)
				return i;
		}
		sleep_ms(1);
	} while (mono_ms() < until);
	return -1;
}

TEST(probe_perf_late_daemons_serve_a_resumed_waiter_at_once_and_time_out_idlers)
{
	const char *flags[] = { "--threads", "1", "--idle-timeout-s", "3", NULL };
	struct dlockd_srv d;
	const char *fill = lockname("ppfill"), *n = lockname("pplate");
	int ffd[FILL], lfd[LATE], idle[2 * LATE], served = 0, worst = 0;
	int64_t t_fill;
	struct raw_answer a;
	char p[512];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --threads 1 --idle-timeout-s 3");
	CHECK(fill_waiters(&d, fill, ffd, FILL), "%d waiters on %s", FILL, fill);
	t_fill = mono_ms();
	/* one waiter of n on each daemon, dealt in turn */
	CHECK(lock_hold(&d, n, "holder", 120000), "holder takes %s", n);
	for (int i = 0; i < LATE; i++) {
		snprintf(p, sizeof(p), "/locks/%s?owner=w%d&wait_ms=120000", n, i);
		lfd[i] = raw_open(&d, "PUT", p);
		CHECK(lfd[i] >= 0, "waiter w%d sent", i);
	}
	CHECK(wait_waiters(&d, FILL + LATE, 10000 * slow_factor()), "%d wait (%.0f)",
	      FILL + LATE, waiters_of(&d));
	/* each hand-off is served by its daemon's run at once, not at the
	 * daemon's next timeout (none: it has only suspended connections) */
	CHECK(lock_release(&d, n, "holder") == 200, "holder releases %s", n);
	for (int64_t t = mono_ms(); served < LATE; ) {
		int i = first_readable(lfd, LATE, 5000 * slow_factor()), ms;

		CHECK(i >= 0, "a waiter is served after hand-off %d", served);
		CHECK(raw_read(lfd[i], 5000 * slow_factor(), &a) == 200, "w%d granted: %d %s", i,
		      a.status, a.body);
		ms = (int)(mono_ms() - t);
		worst = ms > worst ? ms : worst;
		snprintf(p, sizeof(p), "\"owner\":\"w%d\"", i);
		CHECK(HAS(&a, p), "w%d's own grant: %s", i, a.body);
		snprintf(p, sizeof(p), "/locks/%s?owner=w%d", n, i);
		t = mono_ms();
		CHECK(raw_call(lfd[i], "DELETE", p, NULL, &a) == 200, "w%d releases: %d %s", i,
		      a.status, a.body);
		close(lfd[i]);
		lfd[i] = -1;
		served++;
	}
	printf("# %d waiters on late daemons: slowest hand-off %d ms\n", LATE, worst);
	CHECK(worst < 1500 * slow_factor(), "every hand-off within 1.5 s (slowest %d ms)", worst);

	/* idle connections on every daemon: half sent part of a request
	 * (slowloris), half one whole request and then nothing */
	for (int i = 0; i < 2 * LATE; i++) {
		idle[i] = raw_connect(d.port);
		CHECK(idle[i] >= 0, "idle connection %d", i);
		if (i % 2)
			CHECK(raw_call(idle[i], "GET", "/healthz", NULL, &a) == 200,
			      "idle %d is served once: %d", i, a.status);
		else
			CHECK(write(idle[i], "GET /healthz HTTP/1.1\r\nHost:", 28) == 28,
			      "idle %d sends part of a request", i);
	}
	for (int i = 0; i < 2 * LATE; i++)
		CHECK(raw_closed_within(idle[i], 15000 * slow_factor()),
		      "idle connection %d closed by the idle timeout", i);
	/* the waiters, on the same daemons, are kept however long they wait */
	CHECK(waiters_of(&d) == FILL, "the %d waiters still wait (%.0f)", FILL, waiters_of(&d));
	CHECK(first_readable(ffd, FILL, 0) < 0, "no waiter answered or closed");
	close_all(idle, 2 * LATE);
	/* and, having waited past the idle timeout, each is served in turn */
	while (mono_ms() - t_fill < 4500)
		sleep_ms(100);	/* the wait under test: 1.5 s past the idle timeout */
	CHECK(lock_release(&d, fill, "holder") == 200, "holder releases %s", fill);
	for (served = 0; served < FILL; served++) {
		int i = first_readable(ffd, FILL, 5000 * slow_factor());

		CHECK(i >= 0 && raw_read(ffd[i], 5000 * slow_factor(), &a) == 200,
		      "a waiter of %s granted after the idle timeout (%d served): %d %s", fill,
		      served, a.status, a.body);
		snprintf(p, sizeof(p), "/locks/%s?owner=f%d", fill, i);
		CHECK(raw_call(ffd[i], "DELETE", p, NULL, &a) == 200, "f%d releases: %d %s", i,
		      a.status, a.body);
		close(ffd[i]);
		ffd[i] = -1;
	}
	CHECK(dlockd_stop(&d, 10000) == 0, "clean exit");
}

/* Open count connections to d, each asking GET /healthz: how many were
 * served (kept open in fd[]), how many refused with 503 (closed). */
static void open_healthz(const struct dlockd_srv *d, int *fd, int count, int *ok, int *refused)
{
	struct raw_answer a;

	*ok = *refused = 0;
	for (int i = 0; i < count; i++) {
		fd[i] = raw_connect(d->port);
		if (fd[i] < 0 || raw_call(fd[i], "GET", "/healthz", NULL, &a) != 200) {
			*refused += a.status == 503 && HAS(&a, "\"overloaded\"");
			if (fd[i] >= 0)
				close(fd[i]);
			fd[i] = -1;
			continue;
		}
		(*ok)++;
	}
}

TEST(probe_perf_max_connections_hold_over_every_daemon_and_come_back)
{
	const char *flags[] = { "--threads", "1", "--max-connections", "100",
				"--max-connections-per-client", "100", NULL };
	struct dlockd_srv d;
	const char *fill = lockname("ppcap");
	int ffd[80], hfd[60], ok, refused, live, base;
	struct raw_answer a;
	char p[512];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --max-connections 100");
	CHECK(fill_waiters(&d, fill, ffd, 80), "80 waiters, dealt over the daemons past 64");
	/* the harness' own kept-alive connection counts too */
	base = (int)metric_value(&d, "dlockd_http_connections");
	CHECK(base >= 80 && base <= 82, "80 waiters and the harness' connection open (%d)", base);
	open_healthz(&d, hfd, 30, &ok, &refused);
	CHECK(ok == 100 - base && refused == 30 - ok, "%d more served, the rest refused: %d "
	      "served, %d refused", 100 - base, ok, refused);
	/* hang-ups on every daemon give their places back */
	for (int i = 40; i < 80; i++) {
		close(ffd[i]);
		ffd[i] = -1;
	}
	close_all(hfd, 30);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_http_connections") == base - 40, 5000),
	      "%d connections open (%.0f)", base - 40, metric_value(&d, "dlockd_http_connections"));
	CHECK(WAIT_FOR(waiters_of(&d) == 40, 5000), "40 wait (%.0f)", waiters_of(&d));
	open_healthz(&d, hfd, 60, &ok, &refused);
	CHECK(ok == 100 - (base - 40) && refused == 60 - ok, "the places given back are taken "
	      "again: %d served, %d refused", ok, refused);
	/* the waiters that stayed are served in turn */
	CHECK(lock_release(&d, fill, "holder") == 200, "holder releases");
	live = 40;
	while (live > 0) {
		int i = first_readable(ffd, 40, 5000 * slow_factor());

		CHECK(i >= 0, "a waiter served (%d left)", live);
		CHECK(raw_read(ffd[i], 5000 * slow_factor(), &a) == 200, "f%d granted: %d", i,
		      a.status);
		snprintf(p, sizeof(p), "/locks/%s?owner=f%d", fill, i);
		CHECK(raw_call(ffd[i], "DELETE", p, NULL, &a) == 200, "f%d releases", i);
		close(ffd[i]);
		ffd[i] = -1;
		live--;
	}
	close_all(hfd, 60);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_http_connections") <= 1, 5000),
	      "none but the harness' connection open at the end (%.0f)", metric_value(&d, "dlockd_http_connections"));
	CHECK(dlockd_stop(&d, 10000) == 0, "clean exit");
}

/* ----- The RESP writer ----- */

TEST(probe_perf_longest_names_owners_and_values_of_every_utf8_width_round_trip)
{
	char name[201], owner[129], value[1025], big[1030], body[4200], p[700];
	static const char unit[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";	/* 1+2+3+4 bytes */
	struct http_resp r;
	const char *got;

	snprintf(name, sizeof(name), "%s", lockname("ppmax"));
	for (size_t i = strlen(name); i < 200; i++)
		name[i] = "Az09._:-"[i % 8];
	name[200] = '\0';
	for (int i = 0; i < 128; i++)
		owner[i] = "zA9_.-:"[i % 7];
	owner[128] = '\0';
	for (int i = 0; i < 102; i++)
		memcpy(value + 10 * i, unit, 10);
	memcpy(value + 1020, "abcd", 5);
	CHECK(strlen(value) == 1024, "a value of 1024 bytes");

	snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"limit\":2,\"ttl_ms\":30000,\"value\":\"%s\"}",
		 owner, value);
	snprintf(p, sizeof(p), "/semaphores/%s", name);
	http("PUT", p, body, &r);
	CHECK_STATUS(r, 200, "a permit at the longest name and owner with a 1024-byte value");
	CHECK(json_str(&r, "owner") && !strcmp(json_str(&r, "owner"), owner), "the owner back: %s",
	      r.body);
	http_free(&r);
	http("GET", p, NULL, &r);
	CHECK_STATUS(r, 200, "its status");
	got = json_string_value(json_object_get(json_array_get(json_object_get(r.json, "holders"),
								0), "value"));
	CHECK(got && !strcmp(got, value), "the value byte for byte: %s", r.body);
	http_free(&r);

	/* a byte more, a NUL, or bytes that are not UTF-8: refused, nothing kept */
	snprintf(big, sizeof(big), "%sx", value);
	snprintf(body, sizeof(body), "{\"owner\":\"other\",\"limit\":2,\"value\":\"%s\"}", big);
	http("PUT", p, body, &r);
	CHECK_STATUS(r, 400, "a value of 1025 bytes");
	http_free(&r);
	http("PUT", p, "{\"owner\":\"other\",\"limit\":2,\"value\":\"a\\u0000b\"}", &r);
	CHECK_STATUS(r, 400, "a value with a NUL");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=other&limit=2&value=a%%FFb", name);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 400, "a value with a byte 0xFF");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s?owner=other&limit=2&value=%%C0%%AF", name);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 400, "an overlong UTF-8 form");
	http_free(&r);
	snprintf(p, sizeof(p), "/semaphores/%s", name);
	http("GET", p, NULL, &r);
	CHECK_STATUS(r, 200, "the status after the refusals");
	CHECK(json_int(&r, "held") == 1, "only the first permit is out: %s", r.body);
	http_free(&r);

	/* a plain lock at the longest name and owner, held and let go */
	name[199] = 'L';
	snprintf(p, sizeof(p), "/locks/%s?owner=%s", name, owner);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "the longest lock name and owner");
	CHECK(json_str(&r, "owner") && !strcmp(json_str(&r, "owner"), owner) &&
	      json_str(&r, "name") && !strcmp(json_str(&r, "name"), name), "%s", r.body);
	http_free(&r);
	http("GET", p, NULL, &r);
	CHECK_STATUS(r, 200, "the lock's status");
	CHECK(json_bool(&r, "held") == 1, "held by the longest owner: %s", r.body);
	http_free(&r);
	http("DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "the lock's release");
	http_free(&r);
	name[199] = "Az09._:-"[199 % 8];
	snprintf(p, sizeof(p), "/semaphores/%s?owner=%s", name, owner);
	http("DELETE", p, NULL, &r);
	CHECK_STATUS(r, 200, "the permit's release");
	http_free(&r);
}

/* ----- One owner waiting several times ----- */

enum { TWICE = 8 };

/* Were all the waits of fd[0..n) whose owner is who answered 200 within
 * ms, with one fencing token (*token; 0: take the first's), and no other? */
static bool all_granted(const int *fd, const char *const *owner, int n, const char *who, int ms,
			long long *token)
{
	for (int i = 0; i < n; i++) {
		struct raw_answer a;
		json_t *j;
		long long t;

		if (strcmp(owner[i], who))
			continue;
		if (raw_read(fd[i], ms, &a) != 200) {
			printf("# wait %d of %s: %d %s\n", i, who, a.status, a.body);
			return false;
		}
		j = json_loads(a.body, 0, NULL);
		t = json_integer_value(json_object_get(j, "fencing_token"));
		json_decref(j);
		if (!*token)
			*token = t;
		if (t != *token) {
			printf("# wait %d of %s: %s (token %lld)\n", i, who, a.body, *token);
			return false;
		}
	}
	return true;
}

/* Owners o and q wait TWICE / 2 times each on a lock of kind (its path's
 * first part; extra: more of its query) on a dlockd of two loops, each
 * connection made once the one before it waits: should the loops take
 * turns (the listening socket is watched with EPOLLEXCLUSIVE), the order
 * q o o q puts both owners on both loops, with q the oldest on one and o
 * on the other (not seen from here: a test that silences the posts to
 * other loops alone still passes). Whichever is granted, each of its
 * waits is answered at once
 * with its one holding (repeats, told through the owner's sleepers on both
 * loops), the other's none; one release then serves the other's every
 * wait. held: the status field that says the owner asked about holds it. */
static void owner_waits_on_every_loop(const char *kind, const char *extra, const char *held)
{
	const char *flags[] = { "--threads", "2", NULL };
	static const char *const owner[TWICE] = { "q", "o", "o", "q", "q", "o", "o", "q" };
	struct dlockd_srv d;
	const char *n = lockname("pptold"), *first;
	long long t1 = 0, t2 = 0;
	int fd[TWICE];
	char p[512];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --threads 2");
	CHECK(status_of(&d, "PUT", "/%s/%s?owner=holder&ttl_ms=60000%s", kind, n, extra) == 200,
	      "holder takes %s", n);
	for (int i = 0; i < TWICE; i++) {
		snprintf(p, sizeof(p), "/%s/%s?owner=%s&wait_ms=60000%s", kind, n, owner[i], extra);
		fd[i] = raw_open(&d, "PUT", p);
		CHECK(fd[i] >= 0, "wait %d sent", i);
		CHECK(wait_waiters(&d, i + 1, 10000 * slow_factor()), "%d wait (%.0f)", i + 1,
		      waiters_of(&d));
	}
	CHECK(status_of(&d, "DELETE", "/%s/%s?owner=holder", kind, n) == 200, "holder releases");
	CHECK(WAIT_FOR(flag_of(&d, "locked", "/%s/%s", kind, n) == 1, 5000), "an owner is served");
	first = flag_of(&d, held, "/%s/%s?owner=o", kind, n) == 1 ? "o" : "q";
	CHECK(all_granted(fd, owner, TWICE, first, 2000 * slow_factor(), &t1),
	      "every wait of %s answered with its grant within 2 s", first);
	CHECK(waiters_of(&d) == TWICE / 2, "the other owner's %d still wait (%.0f)", TWICE / 2,
	      waiters_of(&d));
	for (int i = 0; i < TWICE; i++)
		if (strcmp(owner[i], first))
			CHECK(first_readable(&fd[i], 1, 0) < 0,
			      "the other owner's wait %d is not answered while held", i);
	/* one release: the repeats added no hold */
	CHECK(status_of(&d, "DELETE", "/%s/%s?owner=%s", kind, n, first) == 200,
	      "the winner releases once");
	CHECK(all_granted(fd, owner, TWICE, *first == 'o' ? "q" : "o", 2000 * slow_factor(), &t2),
	      "every wait of the other owner answered within 2 s");
	CHECK(t2 > t1, "a new holding, a new token (%lld after %lld)", t2, t1);
	CHECK(status_of(&d, "DELETE", "/%s/%s?owner=%s", kind, n, *first == 'o' ? "q" : "o") == 200,
	      "the second releases once");
	CHECK(flag_of(&d, "locked", "/%s/%s", kind, n) == 0, "%s free at the end", n);
	close_all(fd, TWICE);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(probe_perf_an_owner_waiting_on_several_loops_is_served_on_each_at_once)
{
	owner_waits_on_every_loop("locks", "", "held");
}

TEST(probe_perf_a_fair_owner_waiting_on_several_loops_is_served_on_each_at_once)
{
	owner_waits_on_every_loop("fairlocks", "", "held");
}

TEST(probe_perf_a_permit_owner_waiting_on_several_loops_is_served_on_each_at_once)
{
	owner_waits_on_every_loop("semaphores", "&limit=1", "held_by_owner");
}

/* ----- Keys of another type, on every path ----- */

/* A key of a lock's layout (%s: the name) and how to give it another type. */
struct layout_key {
	const char *fmt;
	bool string;		/* a string in the layout: made a hash; else made a string */
};

struct layout {
	const char *kind, *extra;	/* path's first part, more of the query */
	struct layout_key keys[6];
};

static const struct layout layouts[] = {
	{ "locks", "", { { "%s", false }, { "redisson_lock_token:{%s}", true },
			 { "dlockd_lock_owners:{%s}", false } } },
	{ "fairlocks", "", { { "%s", false }, { "redisson_lock_token:{%s}", true },
			     { "dlockd_lock_owners:{%s}", false },
			     { "redisson_lock_queue:{%s}", false },
			     { "redisson_lock_timeout:{%s}", false } } },
	{ "semaphores", "&limit=1", { { "%s", true }, { "{%s}:timeout", false },
				      { "redisson_lock_token:{%s}", true },
				      { "dlockd_lock_owners:{%s}", false },
				      { "dlockd_sem_waiters:{%s}", false } } },
};

/* Every key of l for name n, DUMPed (a missing key as ""), one after the
 * other into out. */
static void layout_dump(const struct layout *l, const char *n, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (const struct layout_key *k = l->keys; k->fmt && len < cap; k++) {
		char key[300];
		redisReply *r;

		snprintf(key, sizeof(key), k->fmt, n);
		r = rcmd("DUMP %s", key);
		len += (size_t)snprintf(out + len, cap - len, "%s=", key);
		for (size_t i = 0; r && r->type == REDIS_REPLY_STRING && i < r->len && len + 3 < cap;
		     i++)
			len += (size_t)snprintf(out + len, cap - len, "%02x", (unsigned char)r->str[i]);
		if (len + 2 < cap)
			out[len++] = ';';
		out[len] = '\0';
		freeReplyObject(r);
	}
}

/* What is wrong with the answer r to a call on n of layout l, whose state
 * before was before: a status that is not 200, 409 or 503, or a refusal
 * that changed a key; NULL if nothing. */
static const char *refusal_wrong(const struct layout *l, const char *n, const struct http_resp *r,
				 const char *before)
{
	static char after[16384];

	if (r->status != 200 && r->status != 409 && r->status != 503)
		return "a status outside 200, 409, 503";
	if (r->status == 200)
		return NULL;
	layout_dump(l, n, after, sizeof(after));
	return strcmp(before, after) ? "a refusal that changed a key" : NULL;
}

/* One call (method path) on n of layout l, with key ki given another type
 * first; checks the answer with refusal_wrong. */
static int wt_answers[3];	/* 200, 409, 503 seen by wrong_type_call */

static void wrong_type_call(const struct layout *l, int ki, const char *n, const char *what,
			    const char *method, const char *path)
{
	static char before[16384];
	char key[300];
	struct http_resp r;
	const char *wrong;
	redisReply *x;

	snprintf(key, sizeof(key), l->keys[ki].fmt, n);
	x = l->keys[ki].string ? rcmd("HSET %s f v", key) : rcmd("SET %s x", key);
	freeReplyObject(x);
	layout_dump(l, n, before, sizeof(before));
	http(method, path, NULL, &r);
	wrong = refusal_wrong(l, n, &r, before);
	wt_answers[r.status == 200 ? 0 : r.status == 409 ? 1 : 2] += !wrong;
	CHECK(!wrong, "%s %s, %s with %s of another type: %s: %ld %s", l->kind, what, method, key,
	      wrong, r.status, r.body ? r.body : "");
	/* a grant is a holding in Redis (its status may be refused: it reads
	 * the key of another type) */
	if (r.status == 200 && !strcmp(method, "PUT"))
		CHECK(!strcmp(l->kind, "semaphores") ? rcmd_int("EXISTS {%s}:timeout", n) == 1 &&
						       rcmd_int("ZSCORE {%s}:timeout a", n) > 0
						     : rcmd_int("HEXISTS %s a", n) == 1,
		      "%s %s: a 200 with %s of another type is a holding", l->kind, what, key);
	http_free(&r);
}

TEST(probe_perf_a_key_of_another_type_never_half_writes_a_call)
{
	char p[600];

	for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
		const struct layout *l = &layouts[li];

		for (int ki = 0; l->keys[ki].fmt; ki++) {
			char n[3][160];

			for (int s = 0; s < 3; s++)
				snprintf(n[s], sizeof(n[s]), "%s", lockname("ppwt"));
			/* fresh: nobody holds it */
			snprintf(p, sizeof(p), "/%s/%s?owner=a&ttl_ms=30000%s", l->kind, n[0], l->extra);
			wrong_type_call(l, ki, n[0], "fresh", "PUT", p);
			/* a holds it: a repeat, a heartbeat, a release */
			CHECK(status_of(&H_dlockd, "PUT", "/%s/%s?owner=a&ttl_ms=30000%s", l->kind, n[1],
					l->extra) == 200, "a takes %s", n[1]);
			snprintf(p, sizeof(p), "/%s/%s?owner=a&ttl_ms=30000%s", l->kind, n[1], l->extra);
			wrong_type_call(l, ki, n[1], "held", "PUT", p);
			snprintf(p, sizeof(p), "/%s/%s/heartbeat?owner=a&ttl_ms=30000", l->kind, n[1]);
			wrong_type_call(l, ki, n[1], "held", "POST", p);
			snprintf(p, sizeof(p), "/%s/%s?owner=a", l->kind, n[1]);
			wrong_type_call(l, ki, n[1], "held", "DELETE", p);
			/* b holds it: a waits a little */
			CHECK(status_of(&H_dlockd, "PUT", "/%s/%s?owner=b&ttl_ms=30000%s", l->kind, n[2],
					l->extra) == 200, "b takes %s", n[2]);
			snprintf(p, sizeof(p), "/%s/%s?owner=a&ttl_ms=30000&wait_ms=300%s", l->kind,
				 n[2], l->extra);
			wrong_type_call(l, ki, n[2], "held by another", "PUT", p);
			for (int s = 0; s < 3; s++)
				for (int k = 0; l->keys[k].fmt; k++) {
					char key[300];

					snprintf(key, sizeof(key), l->keys[k].fmt, n[s]);
					freeReplyObject(rcmd("DEL %s", key));
				}
		}
	}
	printf("# calls with a key of another type: %d answered 200, %d 409, %d 503\n",
	       wt_answers[0], wt_answers[1], wt_answers[2]);
}

/* ----- HTTPS over many daemons ----- */

/* The first of b[0..n) answered and not counted yet (status -2), or -1. */
static int bg_first_done(const struct bg *b, int n)
{
	for (int i = 0; i < n; i++)
		if (b[i].done_ms && b[i].r.status != -2)
			return i;
	return -1;
}

TEST(probe_perf_https_waiters_past_spread_outlive_a_reload_are_served_then_answered_at_shutdown)
{
	enum { W = 90, SERVE = 80 };	/* the oldest first: past 64, late daemons */
	struct http_tls t = { .ca = NULL };
	const char *flags[] = { "--threads", "1", "--tls-cert", NULL, "--tls-key", NULL, NULL };
	const char *n = lockname("pptls");
	static struct bg b[W];
	static char paths[W][300];
	int served = 0, worst = 0, rc, granted = 0, refused = 0;
	struct dlockd_srv d;
	int64_t t0;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	flags[3] = pki_path("server1.pem");
	flags[5] = pki_path("server1.key");
	t.ca = pki_path("ca.pem");
	http_tls(&t);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --tls-cert (see %s)", d.log);
	CHECK(lock_hold(&d, n, "holder", 60000), "holder takes %s", n);
	/* a connection is dealt by the waiters suspended when it comes: the
	 * first FILL all go to the first daemon, the rest to every daemon */
	for (int i = 0; i < W; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/locks/%s?owner=w%d&wait_ms=60000", n, i);
		bg_start_on(&b[i], d.base, "PUT", paths[i], NULL);
		if (i == FILL - 1)
			CHECK(wait_waiters(&d, FILL, 20000 * slow_factor()), "%d wait over TLS "
			      "(%.0f)", FILL, waiters_of(&d));
	}
	CHECK(wait_waiters(&d, W, 20000 * slow_factor()), "%d wait over TLS (%.0f)", W,
	      waiters_of(&d));
	/* an operator's reload with them spread: each keeps its session */
	kill(d.pid, SIGHUP);
	CHECK(WAIT_FOR(file_contains(d.log, "tls certificates reloaded"), 5000),
	      "SIGHUP reloads the certificates (see %s)", d.log);
	CHECK(waiters_of(&d) == W, "all %d still wait (%.0f)", W, waiters_of(&d));
	/* hand-offs among all, each at once, the oldest first: the last
	 * SERVE - FILL on late daemons */
	CHECK(lock_release(&d, n, "holder") == 200, "holder releases");
	t0 = mono_ms();
	while (served < SERVE) {
		int i = -1, ms;

		CHECK(WAIT_FOR((i = bg_first_done(b, W)) >= 0, 5000), "hand-off %d answered",
		      served);
		bg_join(&b[i]);
		CHECK(b[i].r.status == 200, "w%d granted: %ld %s", i, b[i].r.status,
		      b[i].r.body ? b[i].r.body : "");
		ms = (int)(b[i].done_ms - t0);
		worst = ms > worst ? ms : worst;
		b[i].r.status = -2;	/* counted */
		CHECK(waiters_of(&d) == W - served - 1, "one served at a time (%.0f wait)",
		      waiters_of(&d));
		snprintf(paths[i], sizeof(paths[i]), "w%d", i);
		t0 = mono_ms();
		CHECK(lock_release(&d, n, paths[i]) == 200, "w%d releases", i);
		served++;
	}
	printf("# %d hand-offs over TLS: slowest %d ms\n", SERVE, worst);
	CHECK(worst < 1500 * slow_factor(), "every hand-off within 1.5 s (slowest %d ms)", worst);
	/* a shutdown answers every waiter left, on every daemon */
	CHECK(WAIT_FOR(waiters_of(&d) == W - SERVE - 1, 5000), "%d wait (%.0f)", W - SERVE - 1,
	      waiters_of(&d));
	t0 = mono_ms();
	rc = dlockd_stop(&d, 15000);
	CHECK(rc == 0, "exit status 0 after SIGTERM, got %d (see %s)", rc, d.log);
	CHECK(mono_ms() - t0 < 5000 * slow_factor(), "stopped in %lld ms",
	      (long long)(mono_ms() - t0));
	for (int i = 0; i < W; i++) {
		if (b[i].r.status == -2)
			continue;
		bg_join(&b[i]);
		granted += b[i].r.status == 200;
		refused += b[i].r.status == 503;
	}
	/* the last release granted one; every other waiter: 503 */
	CHECK(granted == 1 && refused == W - SERVE - 1, "at shutdown: %d granted (want 1), %d "
	      "answered 503 (want %d)", granted, refused, W - SERVE - 1);
	for (int i = 0; i < W; i++)
		http_free(&b[i].r);
}

/* ----- Hang-ups racing a grant, with requests reused meanwhile ----- */

TEST(probe_perf_a_waiter_hanging_up_as_it_is_granted_keeps_only_a_grant_it_was_sent)
{
	enum { ROUNDS = 120 };
	const char *flags[] = { "--threads", "1", NULL };
	struct dlockd_srv d;
	const char *n = lockname("pphang"), *m = lockname("pphang-c");
	char p[512], want[128], who[16];
	struct raw_answer a;
	int h, c, kept = 0, freed = 0;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --threads 1");
	h = raw_connect(d.port);
	c = raw_connect(d.port);
	CHECK(h >= 0 && c >= 0, "the holder's and a bystander's kept-alive connections");
	for (int i = 0; i < ROUNDS; i++) {
		bool sent, held;
		int w;

		snprintf(p, sizeof(p), "/locks/%s?owner=h&ttl_ms=30000", n);
		CHECK(raw_call(h, "PUT", p, NULL, &a) == 200, "round %d: h takes %s: %d %s", i, n,
		      a.status, a.body);
		snprintf(who, sizeof(who), "w%d", i);
		snprintf(p, sizeof(p), "/locks/%s?owner=%s&ttl_ms=30000&wait_ms=10000", n, who);
		w = raw_open(&d, "PUT", p);
		CHECK(w >= 0 && wait_waiters(&d, 1, 5000 * slow_factor()), "round %d: w waits", i);
		/* the release and the hang-up race: the grant's call is in
		 * flight, or answered, or not yet sent when w goes */
		snprintf(p, sizeof(p), "/locks/%s?owner=h", n);
		CHECK(raw_send(h, "DELETE", p, NULL), "round %d: h releases", i);
		if (i % 4)
			sleep_ms(i % 4);	/* the race under test: where w hangs up */
		/* nothing between the look and the reset: a grant that came
		 * after the look was written to a socket reset before it */
		sent = poll(&(struct pollfd){ .fd = w, .events = POLLIN }, 1, 0) > 0;
		raw_reset(w);
		CHECK(raw_read(h, 10000 * slow_factor(), &a) == 200 &&
		      !strcmp(a.body, "{\"released\":true,\"holds\":0}\n"),
		      "round %d: h's release answered as its own: %d %s", i, a.status, a.body);
		/* meanwhile another client's requests, on the same loop */
		snprintf(p, sizeof(p), "/locks/%s?owner=c%d&ttl_ms=30000", m, i);
		snprintf(want, sizeof(want), "\"owner\":\"c%d\"", i);
		CHECK(raw_call(c, "PUT", p, NULL, &a) == 200 && HAS(&a, want) &&
		      HAS(&a, "\"holds\":1"), "round %d: c's grant is c's: %d %s", i, a.status,
		      a.body);
		snprintf(p, sizeof(p), "/locks/%s?owner=c%d", m, i);
		CHECK(raw_call(c, "DELETE", p, NULL, &a) == 200 &&
		      !strcmp(a.body, "{\"released\":true,\"holds\":0}\n"),
		      "round %d: c's release is c's: %d %s", i, a.status, a.body);
		CHECK(WAIT_FOR(waiters_of(&d) == 0, 3000), "round %d: nobody waits", i);
		/* w keeps the lock only if its grant was sent to it: one in its
		 * socket before the hang-up, or one logged as delivered (sent
		 * between the look and the reset); any other is given back at
		 * once, not at its lease's end */
		held = sent ? flag_of(&d, "held", "/locks/%s?owner=%s", n, who) == 1
			    : !WAIT_FOR(flag_of(&d, "held", "/locks/%s?owner=%s", n, who) == 0, 3000);
		if (held) {
			CHECK(sent || logged_delivered(&d, "PUT", who) == 1,
			      "round %d: %s holds a grant it was never sent", i, who);
			CHECK(lock_release(&d, n, who) == 200, "round %d: %s's grant let go", i, who);
			kept++;
		} else {
			CHECK(!sent, "round %d: %s had its grant and does not hold", i, who);
			freed++;
		}
	}
	printf("# %d waiters hung up as granted: %d had been sent their grant, %d given back\n",
	       ROUNDS, kept, freed);
	close(h);
	close(c);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* ----- rediss:// calls queued behind a stall, then a Redis restart ----- */

TEST(probe_perf_rediss_calls_queued_behind_a_stall_then_a_restart_answer_what_happened)
{
	enum { CALLS = 6 };
	const char *flags[] = { "--redis-ca", NULL, "--threads", "1", NULL };
	char url[96], names[CALLS][128], path[300], out[64];
	struct redis_srv rs;
	struct dlockd_srv d;
	struct bg b[CALLS];
	int64_t t0;
	int ok = 0, refused = 0;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	memset(&rs, 0, sizeof(rs));
	rs.tls_only = true;
	CHECK(redis_start(&rs) == 0, "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	flags[1] = pki_path("ca.pem");
	snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", rs.port);
	CHECK(dlockd_start(&d, url, flags) == 0, "start on %s (see %s)", url, d.log);
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready over TLS");
	CHECK(lock_hold(&d, "pp-rtls-warm", "a", 30000) &&
	      lock_release(&d, "pp-rtls-warm", "a") == 200, "a lock cycle (scripts loaded)");

	kill(rs.pid, SIGSTOP);
	t0 = mono_ms();
	for (int i = 0; i < CALLS; i++) {
		snprintf(names[i], sizeof(names[i]), "pp-rtls-%d-%lld", i, (long long)t0);
		snprintf(path, sizeof(path), "/locks/%.100s?owner=a&ttl_ms=60000", names[i]);
		bg_start_on(&b[i], d.base, "PUT", path, NULL);
		if (!i)
			sleep_ms(300);	/* the first is in flight: the others queue behind it */
	}
	sleep_ms(500);		/* the stall under test, then Redis dies and comes back */
	redis_stop(&rs, true);
	CHECK(redis_start(&rs) == 0, "Redis again, on the same port");
	for (int i = 0; i < CALLS; i++) {
		bg_join(&b[i]);
		CHECK(b[i].r.status == 200 || b[i].r.status == 503, "call %d: %ld %s", i,
		      b[i].r.status, b[i].r.body ? b[i].r.body : "");
		CHECK(b[i].done_ms - t0 < 12000 + 2000 * slow_factor(), "call %d answered after "
		      "%lld ms", i, (long long)(b[i].done_ms - t0));
		ok += b[i].r.status == 200;
		refused += b[i].r.status == 503;
	}
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 10000), "ready again (see %s)",
	      d.log);
	sleep_ms(1000);		/* a 503's call sent late would show by now */
	for (int i = 0; i < CALLS; i++) {
		snprintf(path, sizeof(path), "EXISTS %.100s", names[i]);
		CHECK(redis_tls_cli(&rs, path, out, sizeof(out)) == 0 &&
		      !strcmp(out, b[i].r.status == 200 ? "1" : "0"),
		      "call %d answered %ld, and the new Redis says %s: '%s'", i, b[i].r.status,
		      path, out);
		http_free(&b[i].r);
	}
	printf("# calls queued over TLS when Redis died: %d granted, %d answered 503\n", ok,
	       refused);
	CHECK(lock_hold(&d, "pp-rtls-after", "a", 30000) &&
	      lock_release(&d, "pp-rtls-after", "a") == 200, "a lock cycle after the restart");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* ----- Watches hung up, their requests reused ----- */

TEST(probe_perf_watches_hung_up_leave_nothing_to_the_requests_that_reuse_theirs)
{
	enum { K = 12 };
	const char *flags[] = { "--threads", "1", NULL };
	struct dlockd_srv d;
	const char *n = lockname("ppwatch"), *m = lockname("ppwatch-w");
	int wfd[K], afd[K];
	struct raw_answer a;
	long long index;
	struct http_resp r;
	char p[512];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --threads 1");
	snprintf(p, sizeof(p), "/locks/%s", n);
	http_on(d.base, "GET", p, NULL, &r);
	CHECK_STATUS(r, 200, "the status of the free lock");
	index = json_int(&r, "index");
	http_free(&r);
	for (int i = 0; i < K; i++) {
		snprintf(p, sizeof(p), "/locks/%s?index=%lld&wait_ms=30000", n, index);
		wfd[i] = raw_open(&d, "GET", p);
		CHECK(wfd[i] >= 0, "watch %d sent", i);
	}
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_watches") == K, 5000), "%d watch (%.0f)", K,
	      metric_value(&d, "dlockd_watches"));
	/* hung up, and at once new requests and a change: the watches are
	 * forgotten, their requests freed and reused, in whatever order */
	CHECK(lock_hold(&d, m, "holder", 60000), "holder takes %s", m);
	for (int i = 0; i < K; i++)
		raw_reset(wfd[i]);
	for (int i = 0; i < K; i++) {
		snprintf(p, sizeof(p), "/locks/%s?owner=a%d&wait_ms=30000", m, i);
		afd[i] = raw_open(&d, "PUT", p);
		CHECK(afd[i] >= 0, "waiter %d sent", i);
	}
	CHECK(wait_waiters(&d, K, 5000 * slow_factor()), "%d wait (%.0f)", K, waiters_of(&d));
	/* the watched lock changes: nothing reaches the waiters */
	CHECK(lock_hold(&d, n, "x", 60000) && lock_release(&d, n, "x") == 200,
	      "the watched lock is taken and let go");
	CHECK(first_readable(afd, K, 500) < 0, "no waiter answered by the change of %s", n);
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_watches") == 0, 5000 * slow_factor()),
	      "the hung-up watches are forgotten (%.0f)", metric_value(&d, "dlockd_watches"));
	CHECK(waiters_of(&d) == K, "all %d still wait (%.0f)", K, waiters_of(&d));
	/* and each is served its own grant in turn */
	CHECK(lock_release(&d, m, "holder") == 200, "holder releases %s", m);
	for (int k = 0; k < K; k++) {
		int i = first_readable(afd, K, 5000 * slow_factor());
		char want[32];

		CHECK(i >= 0 && raw_read(afd[i], 5000 * slow_factor(), &a) == 200,
		      "a waiter served (%d so far): %d %s", k, a.status, a.body);
		snprintf(want, sizeof(want), "\"owner\":\"a%d\"", i);
		CHECK(HAS(&a, want), "a%d's own grant: %s", i, a.body);
		snprintf(p, sizeof(p), "/locks/%s?owner=a%d", m, i);
		CHECK(raw_call(afd[i], "DELETE", p, NULL, &a) == 200, "a%d releases", i);
		close(afd[i]);
		afd[i] = -1;
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}
