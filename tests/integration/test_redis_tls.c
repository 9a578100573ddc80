/* test_redis_tls.c -- TLS to Redis: dlockd on rediss:// to a redis-server
 * that serves TLS only (--port 0 --tls-port P, the certificates of the
 * harness' pki_ready) runs a lock cycle and wakes a waiter with a release
 * (pub/sub over TLS); a certificate from another CA, or one that does not
 * name the host, is refused (503 with Retry-After, readyz 503, one clear
 * log line naming the problem); redis:// to the TLS port gets no answer;
 * with --tls-auth-clients yes a client certificate (--redis-cert,
 * --redis-key) is needed, and its absence is named in the log; a
 * --redis-ca (or -cert, -key) with a plaintext URL, and bad files, stop
 * dlockd at start; a Sentinel topology served over TLS (sentinels and
 * data nodes, replication too) is reached with rediss-sentinel:// and a
 * failover followed; so is a Redis Cluster served over TLS (bus and
 * replication too) with rediss://seed,seed,...: every kind of lock on
 * each master, a waiter on each woken by sharded pub/sub over TLS, and a
 * CLUSTER FAILOVER. Each test runs its own Redis and dlockd. */
#include "../harness/cluster.h"
#include "../harness/sentinel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A Redis serving TLS only, with extra redis-server arguments. */
static bool tls_redis(struct redis_srv *rs, const char *extra)
{
	memset(rs, 0, sizeof(*rs));
	rs->tls_only = true;
	snprintf(rs->extra, sizeof(rs->extra), "%s", extra);
	return redis_start(rs) == 0;
}

/* The scripts Redis has run (EVAL, EVALSHA and FCALL calls), as
 * redis-cli over TLS reads them; -1 if it cannot. */
static long long script_calls(const struct redis_srv *rs)
{
	char info[16384];

	if (redis_tls_cli(rs, "INFO commandstats", info, sizeof(info)) != 0)
		return -1;
	return script_calls_of(info, true);
}

/* A lock cycle through d: acquire, a second owner refused, release. */
static bool lock_cycle(const struct dlockd_srv *d, const char *n, char *why, size_t len)
{
	long s;

	if (!lock_hold(d, n, "alice", 30000)) {
		snprintf(why, len, "acquire refused (see %s)", d->log);
		return false;
	}
	s = status_of(d, "PUT", "/locks/%s?owner=bob", n);
	if (s != 409) {
		snprintf(why, len, "a second owner got %ld, want 409", s);
		return false;
	}
	s = lock_release(d, n, "alice");
	if (s != 200) {
		snprintf(why, len, "release got %ld, want 200", s);
		return false;
	}
	return true;
}

/* Redis has run no command since CONFIG RESETSTAT but redis-cli's INFO:
 * none of dlockd's (its set-up, TIME, PING, a script) went out. */
static bool only_info_ran(const struct redis_srv *rs, char *why, size_t len)
{
	char info[4096];
	const char *p;

	if (redis_tls_cli(rs, "INFO commandstats", info, sizeof(info)) != 0) {
		snprintf(why, len, "redis-cli could not ask");
		return false;
	}
	for (p = info; (p = strstr(p, "cmdstat_")); p++)
		if (strncmp(p, "cmdstat_info:", 13) && strncmp(p, "cmdstat_config|resetstat:", 25)) {
			snprintf(why, len, "%.300s", p);
			return false;
		}
	return true;
}

/* The 503 dlockd answers while it cannot reach Redis: with Retry-After,
 * and readyz 503 too. */
static bool refuses(const struct dlockd_srv *d, const char *n, char *why, size_t len)
{
	struct http_resp r;
	char path[300];
	bool ok;

	snprintf(path, sizeof(path), "/locks/%s?owner=alice", n);
	http_on(d->base, "PUT", path, NULL, &r);
	ok = r.status == 503 && r.retry_after[0] && json_str(&r, "error") &&
	     !strcmp(json_str(&r, "error"), "backend_unavailable");
	snprintf(why, len, "PUT: status %ld, Retry-After '%s', body %s", r.status, r.retry_after,
		 r.body ? r.body : "");
	http_free(&r);
	if (ok && status_of(d, "GET", "/readyz") != 503) {
		snprintf(why, len, "readyz is not 503");
		ok = false;
	}
	return ok;
}

/* Start d on rediss://127.0.0.1:port (written to url), trusting the test
 * CA (flags[1] is set to it), and wait until it is ready: 0, or -1 (its
 * log says why). */
static int start_ready_over_tls(struct dlockd_srv *d, int port, const char **flags, char *url,
				size_t len)
{
	flags[1] = pki_path("ca.pem");
	snprintf(url, len, "rediss://127.0.0.1:%d", port);
	if (dlockd_start(d, url, flags) != 0)
		return -1;
	return WAIT_FOR(status_of(d, "GET", "/readyz") == 200, 5000) ? 0 : -1;
}

TEST(redis_tls_lock_cycle_and_wake)
{
	const char *flags[] = { "--redis-ca", NULL, NULL };
	const char *n = lockname("rtls");
	char url[96], why[400], numsub[300], want[300], path[300];
	long long calls0;
	double msgs0;
	struct redis_srv rs;
	struct dlockd_srv d;
	struct bg b;
	int64_t t;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(start_ready_over_tls(&d, rs.port, flags, url, sizeof(url)) == 0,
	      "start on %s, ready over TLS (see %s)", url, d.log);
	CHECK(lock_cycle(&d, n, why, sizeof(why)), "a lock cycle over TLS: %s", why);

	/* a waiter woken by a release: the message comes over the
	 * subscriber's TLS connection (without it the waiter would sleep
	 * until the 30 s lease ends, past its wait) */
	CHECK(lock_hold(&d, n, "alice", 30000), "alice holds");
	calls0 = script_calls(&rs);
	msgs0 = metric_value(&d, "dlockd_pubsub_messages_total");
	snprintf(path, sizeof(path), "/locks/%s?owner=bob&wait_ms=10000", n);
	bg_start_on(&b, d.base, "PUT", path, NULL);
	snprintf(want, sizeof(want), "redisson_lock__channel:{%s} 1", n);
	/* parked: waiting, and its try after the subscription made */
	CHECK(WAIT_FOR(waiters_of(&d) >= 1 && script_calls(&rs) >= calls0 + 2, 10000),
	      "bob waits (see %s)", d.log);
	snprintf(path, sizeof(path), "PUBSUB NUMSUB 'redisson_lock__channel:{%s}'", n);
	CHECK(WAIT_FOR(redis_tls_cli(&rs, path, numsub, sizeof(numsub)) == 0 &&
		       !strcmp(numsub, want), 10000),
	      "bob's dlockd subscribed over TLS: '%s', want '%s'", numsub, want);
	CHECK(lock_release(&d, n, "alice") == 200, "alice releases");
	t = mono_ms();
	CHECK_GRANTED_WITHIN(b, t, 2000, "bob, woken by the release");
	http_free(&b.r);
	CHECK(metric_value(&d, "dlockd_pubsub_messages_total") >= msgs0 + 1,
	      "the release message came through the subscriber");
	CHECK(lock_release(&d, n, "bob") == 200, "bob releases");
	CHECK(!file_contains(d.log, "redis tls"), "no TLS trouble logged (see %s)", d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

TEST(redis_tls_refuses_untrusted_or_misnamed_certificates)
{
	const char *flags[] = { "--redis-ca", NULL, NULL };
	const char *n = lockname("rtls-ca");
	char url[96], why[400], where[64], extra[256];
	struct redis_srv rs, named;
	struct dlockd_srv d;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(redis_tls_cli(&rs, "CONFIG RESETSTAT", why, sizeof(why)) == 0,
	      "the harness' own commands forgotten");

	/* trusting another CA: refused, said once however often it is tried */
	flags[1] = pki_path("other-ca.pem");
	snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", rs.port);
	CHECK(dlockd_start(&d, url, flags) == 0, "start on %s (see %s)", url, d.log);
	for (int i = 0; i < 5; i++) {
		CHECK(refuses(&d, n, why, sizeof(why)), "try %d with another CA: %s", i, why);
		sleep_ms(300);	/* across reconnects: each is refused again */
	}
	snprintf(where, sizeof(where), "redis tls 127.0.0.1:%d", rs.port);
	CHECK(file_lines_with(d.log, "\"level\":\"error\"", where, "certificate is refused",
			      "issuer is unknown", "--redis-ca", NULL) == 1,
	      "one error line naming the certificate problem (see %s)", d.log);
	CHECK(only_info_ran(&rs, why, sizeof(why)),
	      "nothing reached Redis over the refused sessions: %s", why);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");

	/* the right CA, but a certificate that does not name 127.0.0.1 */
	memset(&named, 0, sizeof(named));
	named.tls_only = true;
	snprintf(extra, sizeof(extra), "--tls-cert-file %s --tls-key-file %s",
		 pki_path("elsewhere.pem"), pki_path("elsewhere.key"));
	CHECK(tls_redis(&named, extra), "redis-server named elsewhere.invalid (see %s/redis.log)",
	      named.dir);
	flags[1] = pki_path("ca.pem");
	snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", named.port);
	CHECK(dlockd_start(&d, url, flags) == 0, "start on %s (see %s)", url, d.log);
	CHECK(refuses(&d, n, why, sizeof(why)), "a certificate for another name: %s", why);
	CHECK(WAIT_FOR(file_lines_with(d.log, "\"level\":\"error\"", "certificate is refused",
				       "does not name the host", NULL) == 1, 5000),
	      "the log says the certificate does not name the host (see %s)", d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&named, false);
	redis_stop(&rs, false);
}

TEST(redis_tls_plaintext_to_tls_port_gets_nothing)
{
	const char *n = lockname("rtls-plain");
	struct redis_srv rs;
	struct dlockd_srv d;
	char url[96], why[400];

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start on %s (see %s)", url, d.log);
	CHECK(refuses(&d, n, why, sizeof(why)), "plaintext to the TLS port: %s", why);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

TEST(redis_tls_client_certificate)
{
	const char *none[] = { "--redis-ca", NULL, NULL };
	const char *with[] = { "--redis-ca", NULL, "--redis-cert", NULL, "--redis-key", NULL,
			       NULL };
	const char *n = lockname("rtls-mtls");
	struct redis_srv rs;
	struct dlockd_srv d;
	char url[96], why[400];

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, "--tls-auth-clients yes"),
	      "redis-server requires client certificates (see %s/redis.log)", rs.dir);
	none[1] = with[1] = pki_path("ca.pem");
	with[3] = pki_path("client.pem");
	with[5] = pki_path("client.key");
	snprintf(url, sizeof(url), "rediss://127.0.0.1:%d/0", rs.port);

	CHECK(dlockd_start(&d, url, none) == 0, "start without a client certificate (see %s)",
	      d.log);
	CHECK(refuses(&d, n, why, sizeof(why)), "no client certificate: %s", why);
	CHECK(WAIT_FOR(file_lines_with(d.log, "\"level\":\"error\"", "client certificate",
				       "--redis-cert", NULL) >= 1, 5000),
	      "the log says a client certificate is wanted (see %s)", d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");

	CHECK(dlockd_start(&d, url, with) == 0, "start with --redis-cert (see %s)", d.log);
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000),
	      "ready with a client certificate (see %s)", d.log);
	CHECK(lock_cycle(&d, n, why, sizeof(why)), "a lock cycle with a client certificate: %s",
	      why);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A session under way when Redis stalls (SIGSTOP): dlockd's pipelined
 * connection does its TLS on its own socket, so it must give up on time
 * as a plaintext one does (redis_node.c): a call sent to the stalled
 * Redis is 503 when its reply is 10 s late (REPLY_WAIT_MS: not before, as
 * a call that ran must not be 503), a call made once the first is 2 s
 * late at once (the connection is overdue: nothing more is sent), neither
 * taking effect when Redis resumes; the session given up on then, a new
 * one works. */
TEST(redis_tls_stalled_redis_is_503_on_time_and_the_session_recovers)
{
	/* one loop: both calls on the one connection */
	const char *flags[] = { "--redis-ca", NULL, "--threads", "1", NULL };
	const char *n = lockname("rtls-stall");
	char url[96], why[400], out[64], args[300];
	struct redis_srv rs;
	struct dlockd_srv d;
	struct http_resp r;
	struct bg b;
	int64_t t0, took;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(start_ready_over_tls(&d, rs.port, flags, url, sizeof(url)) == 0,
	      "start on %s, ready over TLS (see %s)", url, d.log);
	CHECK(lock_cycle(&d, n, why, sizeof(why)), "a lock cycle (scripts loaded): %s", why);

	kill(rs.pid, SIGSTOP);
	t0 = mono_ms();
	bg_start_on(&b, d.base, "PUT", "/locks/rtls-stalled?owner=a&ttl_ms=60000", NULL);
	sleep_ms(2500);		/* its 2 s command timeout has passed */
	http_on(d.base, "PUT", "/locks/rtls-stalled2?owner=a&ttl_ms=60000", NULL, &r);
	took = (int64_t)r.ms;
	CHECK_ERROR(r, 503, "backend_unavailable", "a call on the overdue connection");
	CHECK(r.retry_after[0], "with Retry-After");
	http_free(&r);
	CHECK(took < 500 * slow_factor(), "answered at once, took %lld ms", (long long)took);
	bg_join(&b);
	took = b.done_ms - t0;
	CHECK_ERROR(b.r, 503, "backend_unavailable", "the call sent to the stalled Redis");
	http_free(&b.r);
	CHECK(took >= 9500 && took < 10000 + 2000 * slow_factor(),
	      "answered when its reply was 10 s late, took %lld ms", (long long)took);
	kill(rs.pid, SIGCONT);

	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000),
	      "ready again once Redis resumes (see %s)", d.log);
	for (int i = 0; i < 2; i++) {
		snprintf(args, sizeof(args), "EXISTS rtls-stalled%s", i ? "2" : "");
		CHECK(redis_tls_cli(&rs, args, out, sizeof(out)) == 0 && !strcmp(out, "0"),
		      "the acquire answered 503 left no lock (%s: '%s')", args, out);
	}
	CHECK(lock_cycle(&d, n, why, sizeof(why)), "a lock cycle after the stall: %s", why);
	CHECK(file_lines_with(d.log, "\"level\":\"warn\"", "redis connection lost",
			      "no reply within", NULL) == 1,
	      "the session given up is logged once, and a new one works (see %s)", d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* ----- A relay between dlockd and Redis that can cut a reply ----- */

#define RELAY_PAIRS 32
/* A read from Redis at least this big is a large reply, not a handshake
 * message, a pub/sub message or a small answer. */
#define RELAY_BIG 2000

/* What the relay is to each connection it accepts (the mode when it was
 * accepted holds for its life). */
enum relay_mode {
	RELAY_PASS,		/* copies both ways (and cuts a large reply, armed) */
	RELAY_SILENT,		/* takes the connection and never answers */
	RELAY_GARBAGE,		/* answers the ClientHello with plaintext */
	RELAY_SHORT_RECORD,	/* answers with a record header promising 16 KiB, and 2 bytes */
	RELAY_CUT_HANDSHAKE,	/* forwards half of Redis' handshake answer, then closes */
	RELAY_STALL,		/* the handshake through, nothing of Redis' after it */
};

/* Copies bytes both ways between dlockd and a Redis, a pair of sockets
 * per connection; armed, it forwards half of the next large read from
 * Redis, then closes that connection's two sockets: Redis' side of the
 * TLS session ends in the middle of a record. The other modes play a
 * Redis that breaks the TLS handshake, or stalls right after it. */
struct relay {
	int lfd, port, to_port;
	int fd[RELAY_PAIRS][2];		/* [0] dlockd's side, [1] Redis' (-1: none); -1 */
	enum relay_mode pmode[RELAY_PAIRS];
	int reads[RELAY_PAIRS];		/* reads from dlockd's side so far */
	pthread_t thread;
	volatile int stop, armed, cuts;
	volatile enum relay_mode mode;	/* for connections accepted from now on */
	bool running;
};

static struct relay relay;

static void relay_close(struct relay *y, int i)
{
	close(y->fd[i][0]);
	if (y->fd[i][1] >= 0)
		close(y->fd[i][1]);
	y->fd[i][0] = y->fd[i][1] = -1;
}

/* A mode in which the relay answers dlockd itself, with no Redis. */
static bool relay_alone(enum relay_mode m)
{
	return m == RELAY_SILENT || m == RELAY_GARBAGE || m == RELAY_SHORT_RECORD;
}

static void relay_accept(struct relay *y)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)y->to_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	enum relay_mode m = y->mode;
	int c = accept(y->lfd, NULL, NULL), u = -1, i = 0;

	if (c < 0)
		return;
	while (i < RELAY_PAIRS && y->fd[i][0] >= 0)
		i++;
	if (i < RELAY_PAIRS && !relay_alone(m)) {
		u = socket(AF_INET, SOCK_STREAM, 0);
		if (u >= 0 && connect(u, (struct sockaddr *)&a, sizeof(a)) < 0) {
			close(u);
			u = -1;
		}
	}
	if (i == RELAY_PAIRS || (u < 0 && !relay_alone(m))) {
		close(c);
		return;
	}
	y->fd[i][0] = c;
	y->fd[i][1] = u;
	y->pmode[i] = m;
	y->reads[i] = 0;
}

/* What the relay answers dlockd's first bytes (its ClientHello) with, in
 * mode m, by itself: garbage, or a TLS handshake record's header saying
 * 16 KiB follow and then 2 bytes of them. */
static bool relay_answer(struct relay *y, int i)
{
	static const char garbage[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
	static const char short_record[] = "\x16\x03\x03\x40\x00\x02\x00";

	if (y->pmode[i] == RELAY_SILENT || y->reads[i] > 1)
		return true;
	if (y->pmode[i] == RELAY_GARBAGE)
		return write(y->fd[i][0], garbage, sizeof(garbage) - 1) > 0;
	return write(y->fd[i][0], short_record, sizeof(short_record) - 1) > 0;
}

/* Forward what is readable on side k of pair i; false once it is closed. */
static bool relay_move(struct relay *y, int i, int k)
{
	static char buf[65536];
	ssize_t n = read(y->fd[i][k], buf, sizeof(buf));

	if (n <= 0)
		return false;
	if (k == 0 && ++y->reads[i] && relay_alone(y->pmode[i]))
		return relay_answer(y, i);
	if (k == 1 && y->pmode[i] == RELAY_CUT_HANDSHAKE) {
		(void)!write(y->fd[i][0], buf, (size_t)n / 2);
		return false;
	}
	/* TLS 1.3: dlockd's second write is its Finished, sent once the
	 * whole of the server's handshake came: what Redis says after that
	 * is swallowed */
	if (k == 1 && y->pmode[i] == RELAY_STALL && y->reads[i] >= 2)
		return true;
	if (k == 1 && y->armed && n >= RELAY_BIG) {
		n /= 2;
		y->armed = 0;
		y->cuts++;
		(void)!write(y->fd[i][0], buf, (size_t)n);
		return false;
	}
	return write(y->fd[i][!k], buf, (size_t)n) == n;
}

static void *relay_main(void *arg)
{
	struct relay *y = arg;

	while (!y->stop) {
		struct pollfd p[1 + 2 * RELAY_PAIRS] = { { .fd = y->lfd, .events = POLLIN } };

		for (int i = 0; i < RELAY_PAIRS; i++)
			for (int k = 0; k < 2; k++)
				p[1 + 2 * i + k] = (struct pollfd){ .fd = y->fd[i][k], .events = POLLIN };
		if (poll(p, 1 + 2 * RELAY_PAIRS, 50) <= 0)
			continue;
		if (p[0].revents)
			relay_accept(y);
		for (int i = 0; i < RELAY_PAIRS; i++)
			for (int k = 0; k < 2 && y->fd[i][0] >= 0; k++)
				if (p[1 + 2 * i + k].revents && !relay_move(y, i, k))
					relay_close(y, i);
	}
	return NULL;
}

static void relay_stop(void *arg)
{
	struct relay *y = arg;

	if (!y->running)
		return;
	y->stop = 1;
	pthread_join(y->thread, NULL);
	for (int i = 0; i < RELAY_PAIRS; i++)
		if (y->fd[i][0] >= 0)
			relay_close(y, i);
	close(y->lfd);
	y->running = false;
}

/* A relay on a free loopback port to 127.0.0.1:to_port, stopped at the
 * end of the test. */
static bool relay_start(struct relay *y, int to_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	memset(y, 0, sizeof(*y));
	for (int i = 0; i < RELAY_PAIRS; i++)
		y->fd[i][0] = y->fd[i][1] = -1;
	y->to_port = to_port;
	y->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (y->lfd < 0 || bind(y->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(y->lfd, 16) < 0 || getsockname(y->lfd, (struct sockaddr *)&a, &len) < 0 ||
	    pthread_create(&y->thread, NULL, relay_main, y) != 0) {
		if (y->lfd >= 0)
			close(y->lfd);
		return false;
	}
	y->port = ntohs(a.sin_port);
	y->running = true;
	test_at_end(relay_stop, y);
	return true;
}

/* GET /locks?prefix=prefix&limit=1000 on d: how many locks it listed, -1
 * (with the status in why) unless 200. */
static int listed(const struct dlockd_srv *d, const char *prefix, char *why, size_t len)
{
	struct http_resp r;
	char path[300];
	json_t *locks;
	int n = -1;

	snprintf(path, sizeof(path), "/locks?prefix=%s&limit=1000", prefix);
	http_on(d->base, "GET", path, NULL, &r);
	locks = r.json ? json_object_get(r.json, "locks") : NULL;
	if (r.status == 200 && json_is_array(locks))
		n = (int)json_array_size(locks);
	snprintf(why, len, "status %ld, error %s", r.status,
		 json_str(&r, "error") ? json_str(&r, "error") : "none");
	http_free(&r);
	return n;
}

/* Replies bigger than a TLS record (16 KiB) come in several; a listing of
 * 600 locks with long names is some 200 KiB of them, read by the loop's
 * own session record by record (and whatever GnuTLS holds decrypted,
 * which does not wake the socket). Then Redis' end of the session goes
 * in the middle of such a reply (a relay forwards half a read and closes
 * the connection): that listing is 503, the connection is made anew and
 * the next listing is whole again. */
TEST(redis_tls_large_replies_and_a_session_cut_mid_reply)
{
	enum { LOCKS = 600 };
	const char *flags[] = { "--redis-ca", NULL, NULL };
	char url[96], why[400], prefix[64], path[600], pad[151];
	struct redis_srv rs;
	struct dlockd_srv d;
	int n;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(relay_start(&relay, rs.port), "a relay to Redis' TLS port");
	flags[1] = pki_path("ca.pem");
	snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", relay.port);
	CHECK(dlockd_start(&d, url, flags) == 0, "start on %s (see %s)", url, d.log);
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000),
	      "ready over TLS through the relay (see %s)", d.log);
	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	snprintf(prefix, sizeof(prefix), "rtls-big");	/* the test's own Redis */
	for (int i = 0; i < LOCKS; i++) {
		snprintf(path, sizeof(path), "/locks/%s-%04d-%s?owner=%.120s&ttl_ms=120000", prefix,
			 i, pad, pad);
		long st = status_of(&d, "PUT", "%s", path);

		CHECK(st == 200, "lock %d of %d taken: %ld for %s", i, LOCKS, st, path);
	}

	n = listed(&d, prefix, why, sizeof(why));
	CHECK(n == LOCKS, "the listing has all %d locks: %d (%s)", LOCKS, n, why);

	relay.armed = 1;
	n = listed(&d, prefix, why, sizeof(why));
	CHECK(relay.cuts == 1, "the relay cut a reply (%d)", relay.cuts);
	CHECK(n < 0 && strstr(why, "status 503") && strstr(why, "backend_unavailable"),
	      "a listing whose reply was cut is 503: %s", why);
	CHECK(WAIT_FOR(listed(&d, prefix, why, sizeof(why)) == LOCKS, 5000),
	      "a new connection lists them all again: %s (see %s)", why, d.log);
	CHECK(file_lines_with(d.log, "\"level\":\"warn\"", "redis connection lost", NULL) >= 1,
	      "the lost connection is logged (see %s)", d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	relay_stop(&relay);
	redis_stop(&rs, false);
}

/* ----- A Redis that breaks the TLS handshake, or stalls after it ----- */

/* Whether a waiter of n on d is woken by a release at once: through the
 * subscriber's TLS connection, as without it the waiter would sleep
 * until the 30 s lease ends, past its wait. rs is the Redis behind d. */
static bool waiter_woken(const struct dlockd_srv *d, const struct redis_srv *rs, const char *n,
			 char *why, size_t len)
{
	char path[300], numsub[300] = "", want[300];
	long long calls0 = script_calls(rs);
	double msgs0 = metric_value(d, "dlockd_pubsub_messages_total");
	struct bg b;
	int64_t t;
	bool ok;

	if (!lock_hold(d, n, "alice", 30000)) {
		snprintf(why, len, "alice could not take %s", n);
		return false;
	}
	snprintf(path, sizeof(path), "/locks/%s?owner=bob&wait_ms=10000", n);
	bg_start_on(&b, d->base, "PUT", path, NULL);
	snprintf(want, sizeof(want), "redisson_lock__channel:{%s} 1", n);
	snprintf(path, sizeof(path), "PUBSUB NUMSUB 'redisson_lock__channel:{%s}'", n);
	/* parked: waiting, subscribed, and its try after the subscription made */
	ok = WAIT_FOR(waiters_of(d) >= 1 && script_calls(rs) >= calls0 + 2 &&
		      redis_tls_cli(rs, path, numsub, sizeof(numsub)) == 0 &&
		      !strcmp(numsub, want), 10000);
	snprintf(why, len, "bob did not wait subscribed: '%.150s', want '%.150s'", numsub, want);
	if (ok && lock_release(d, n, "alice") != 200) {
		snprintf(why, len, "alice could not release");
		ok = false;
	}
	t = mono_ms();
	bg_join(&b);
	if (ok && (b.r.status != 200 || b.done_ms - t >= 2000 * slow_factor())) {
		snprintf(why, len, "bob got %ld %lld ms after the release", b.r.status,
			 (long long)(b.done_ms - t));
		ok = false;
	}
	http_free(&b.r);
	if (ok && metric_value(d, "dlockd_pubsub_messages_total") < msgs0 + 1) {
		snprintf(why, len, "no message came through the subscriber");
		ok = false;
	}
	if (ok && lock_release(d, n, "bob") != 200) {
		snprintf(why, len, "bob could not release");
		ok = false;
	}
	return ok;
}

/* dlockd on rediss:// to a relay in mode m, in front of a real TLS
 * Redis: it starts serving at once (its connects and handshakes never
 * block a loop); each failing connection is logged, at error level with
 * the host:port and want_log, within its 2 s deadline; calls made
 * meanwhile, several at once on both loops, are 503 backend_unavailable
 * with Retry-After within the deadline, not held longer, and take no
 * effect in Redis; /healthz answers at once throughout. Then the relay
 * passes new connections to Redis and dlockd serves again, waking a
 * waiter through a new subscriber session. */
static void hostile_redis(enum relay_mode m, const char *want_log)
{
	enum { CALLS = 4 };
	const char *flags[] = { "--redis-ca", NULL, "--threads", "2", NULL };
	char url[96], why[400], where[64], names[CALLS][128], out[64], args[300];
	struct redis_srv rs;
	struct dlockd_srv d;
	struct http_resp r;
	struct bg b[CALLS];
	int64_t t0, took;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(relay_start(&relay, rs.port), "a relay to Redis' TLS port");
	relay.mode = m;
	flags[1] = pki_path("ca.pem");
	snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", relay.port);
	t0 = mono_ms();
	CHECK(dlockd_start(&d, url, flags) == 0, "start on %s (see %s)", url, d.log);
	took = mono_ms() - t0;
	/* its start-up check of Redis waits out one deadline at most */
	CHECK(took < 2000 + 1500 * slow_factor(), "healthz answered %lld ms after the start: "
	      "past the 2 s deadline (see %s)", (long long)took, d.log);
	CHECK(file_contains(d.log, "cannot reach Redis at rediss://"), "the start says Redis "
	      "is not reached (see %s)", d.log);

	snprintf(where, sizeof(where), "redis tls 127.0.0.1:%d", relay.port);
	CHECK(WAIT_FOR(file_lines_with(d.log, "\"level\":\"error\"", where, want_log, NULL) >= 1,
		       6000),
	      "an error line naming %s and '%s' (see %s)", where, want_log, d.log);
	took = mono_ms() - t0;
	CHECK(took < 2000 + 2500 * slow_factor(), "logged %lld ms after the start, past the 2 s "
	      "deadline", (long long)took);

	for (int round = 0; round < 2; round++) {
		t0 = mono_ms();
		for (int i = 0; i < CALLS; i++) {
			snprintf(names[i], sizeof(names[i]), "%s", lockname("rtls-hostile"));
			snprintf(args, sizeof(args), "/locks/%.127s?owner=a&ttl_ms=60000", names[i]);
			bg_start_on(&b[i], d.base, "PUT", args, NULL);
		}
		http_on(d.base, "GET", "/healthz", NULL, &r);
		took = (int64_t)r.ms;
		CHECK_STATUS(r, 200, "healthz while calls wait on Redis");
		http_free(&r);
		CHECK(took < 500 * slow_factor(), "healthz took %lld ms", (long long)took);
		for (int i = 0; i < CALLS; i++) {
			bg_join(&b[i]);
			took = b[i].done_ms - t0;
			CHECK_ERROR(b[i].r, 503, "backend_unavailable", "a call while Redis fails");
			CHECK(b[i].r.retry_after[0], "with Retry-After");
			http_free(&b[i].r);
			CHECK(took < 2000 + 1500 * slow_factor(),
			      "call %d of round %d answered in %lld ms, past the 2 s deadline", i,
			      round, (long long)took);
		}
	}
	CHECK(status_of(&d, "GET", "/readyz") == 503, "readyz 503 while Redis fails");
	for (int i = 0; i < CALLS; i++) {
		snprintf(args, sizeof(args), "EXISTS %.127s", names[i]);
		CHECK(redis_tls_cli(&rs, args, out, sizeof(out)) == 0 && !strcmp(out, "0"),
		      "a call answered 503 left no lock (%s: '%s')", args, out);
	}

	/* a Redis that works from now on: served again, pub/sub too */
	relay.mode = RELAY_PASS;
	t0 = mono_ms();
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 20000),
	      "ready once Redis answers (see %s)", d.log);
	printf("# ready again %lld ms after Redis answers\n", (long long)(mono_ms() - t0));
	/* readyz is one loop's word: a loop whose session stalled gives it
	 * up when its first call is 10 s late (REPLY_WAIT_MS), not before */
	CHECK(WAIT_FOR(lock_cycle(&d, lockname("rtls-hostile"), why, sizeof(why)) &&
		       waiter_woken(&d, &rs, lockname("rtls-hostile"), why, sizeof(why)), 20000),
	      "a lock cycle, and a waiter woken by a release: %s (see %s)", why, d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	relay_stop(&relay);
	redis_stop(&rs, false);
}

/* A Redis that takes the TCP connection and never answers the ClientHello. */
TEST(redis_tls_handshake_unanswered_is_given_up_in_2s)
{
	hostile_redis(RELAY_SILENT, "no TLS handshake within 2000 ms");
}

/* One that answers the ClientHello with plaintext: refused at once. */
TEST(redis_tls_handshake_answered_with_garbage)
{
	hostile_redis(RELAY_GARBAGE, "TLS handshake failed");
}

/* One that answers with the start of a record whose rest never comes. */
TEST(redis_tls_handshake_short_record_is_given_up_in_2s)
{
	hostile_redis(RELAY_SHORT_RECORD, "no TLS handshake within 2000 ms");
}

/* One that closes the connection in the middle of its handshake answer. */
TEST(redis_tls_handshake_cut_midway)
{
	hostile_redis(RELAY_CUT_HANDSHAKE, "TLS handshake failed");
}

/* One that completes the handshake and then answers nothing. */
TEST(redis_tls_stall_after_the_handshake)
{
	hostile_redis(RELAY_STALL, "no answer within 2000 ms after the TLS handshake");
}

/* ----- Calls that wait for a batch in flight (conn_corked) ----- */

/* Over TLS a loop's calls queued while a batch is unanswered go together
 * once its replies come. Many at once on one loop, with long names and
 * owners (more than one 16 KiB record of calls): on one name exactly
 * one is granted and the others refused; on names of their own, all
 * granted. */
TEST(redis_tls_calls_at_once_on_one_loop)
{
	enum { CALLS = 40 };
	const char *flags[] = { "--redis-ca", NULL, "--threads", "1", NULL };
	char url[96], pad[121], one[200], name[220], path[CALLS][600], why[400];
	struct redis_srv rs;
	struct dlockd_srv d;
	struct bg b[CALLS];

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(start_ready_over_tls(&d, rs.port, flags, url, sizeof(url)) == 0,
	      "start on %s, ready over TLS (see %s)", url, d.log);
	memset(pad, 'o', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	snprintf(one, sizeof(one), "rtls-burst-%s", pad);
	for (int own = 0; own < 2; own++) {
		int granted = 0, refused = 0;

		for (int i = 0; i < CALLS; i++) {
			snprintf(name, sizeof(name), own ? "%s-%02d" : "%s", one, i);
			snprintf(path[i], sizeof(path[i]), "/locks/%s?owner=%.100s%d&ttl_ms=60000",
				 name, pad, i);
			bg_start_on(&b[i], d.base, "PUT", path[i], NULL);
		}
		for (int i = 0; i < CALLS; i++) {
			bg_join(&b[i]);
			granted += b[i].r.status == 200;
			refused += b[i].r.status == 409;
			http_free(&b[i].r);
		}
		if (!own)
			CHECK(granted == 1 && refused == CALLS - 1, "one name: %d granted, %d "
			      "refused, want 1 and %d (see %s)", granted, refused, CALLS - 1, d.log);
		else
			CHECK(granted == CALLS, "names of their own: %d of %d granted (see %s)",
			      granted, CALLS, d.log);
	}
	CHECK(lock_cycle(&d, lockname("rtls-burst"), why, sizeof(why)), "a lock cycle: %s", why);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* A call in flight when Redis stalls, and calls queued behind it on the
 * same connection: once Redis resumes (3 s later: past the calls' 1.5 s
 * deadline in its clock) every call is answered, and each answer is what
 * happened in Redis: a lock held for a 200, none for a 503. */
TEST(redis_tls_calls_queued_behind_a_stalled_call)
{
	enum { CALLS = 5 };
	const char *flags[] = { "--redis-ca", NULL, "--threads", "1", NULL };
	char url[96], why[400], names[CALLS][128], path[300], out[64];
	struct redis_srv rs;
	struct dlockd_srv d;
	struct bg b[CALLS];
	int64_t t0;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(tls_redis(&rs, ""), "redis-server serves TLS only (see %s/redis.log)", rs.dir);
	CHECK(start_ready_over_tls(&d, rs.port, flags, url, sizeof(url)) == 0,
	      "start on %s, ready over TLS (see %s)", url, d.log);
	CHECK(lock_cycle(&d, lockname("rtls-queued"), why, sizeof(why)),
	      "a lock cycle (scripts loaded): %s", why);

	kill(rs.pid, SIGSTOP);
	t0 = mono_ms();
	for (int i = 0; i < CALLS; i++) {
		snprintf(names[i], sizeof(names[i]), "%.100s", lockname("rtls-queued"));
		snprintf(path, sizeof(path), "/locks/%s?owner=a&ttl_ms=60000", names[i]);
		bg_start_on(&b[i], d.base, "PUT", path, NULL);
		if (!i)
			sleep_ms(300);	/* the first is in flight: the others queue */
	}
	sleep_ms(2700);		/* the stall under test */
	kill(rs.pid, SIGCONT);
	for (int i = 0; i < CALLS; i++) {
		long st;

		bg_join(&b[i]);
		st = b[i].r.status;
		CHECK(st == 200 || (st == 503 && json_str(&b[i].r, "error") &&
				    !strcmp(json_str(&b[i].r, "error"), "backend_unavailable")),
		      "call %d: %ld %s", i, st, b[i].r.body ? b[i].r.body : "");
		CHECK(b[i].done_ms - t0 < 10000 + 2000 * slow_factor(),
		      "call %d answered %lld ms after the stall began", i,
		      (long long)(b[i].done_ms - t0));
		http_free(&b[i].r);
		snprintf(path, sizeof(path), "EXISTS %.127s", names[i]);
		CHECK(redis_tls_cli(&rs, path, out, sizeof(out)) == 0 &&
		      !strcmp(out, st == 200 ? "1" : "0"),
		      "call %d answered %ld, and Redis says %s: '%s'", i, st, path, out);
	}
	CHECK(WAIT_FOR(lock_cycle(&d, lockname("rtls-queued"), why, sizeof(why)), 15000),
	      "a lock cycle after the stall: %s (see %s)", why, d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* Settings that cannot work stop dlockd at start (exit 2), saying why:
 * never a plaintext connection where TLS was asked for. */
TEST(redis_tls_bad_settings_stop_dlockd_at_start)
{
	const struct {
		const char *args, *want;
	} bad[] = {
		{ "--redis redis://127.0.0.1:1 --redis-ca {ca}",
		  "--redis-ca is for TLS to Redis, but --redis is not TLS" },
		{ "--redis unix:///tmp/x?tls=true", "tls=true on a unix socket" },
		{ "--redis rediss://127.0.0.1:1?tls=false", "tls=false with a rediss scheme" },
		{ "--redis rediss://127.0.0.1:1 --redis-cert {cert}",
		  "--redis-cert and --redis-key go together" },
		{ "--redis rediss://127.0.0.1:1 --redis-ca /nonexistent/ca.pem",
		  "--redis-ca /nonexistent/ca.pem: " },
		{ "--redis rediss://127.0.0.1:1 --redis-ca {ca} --redis-cert {cert} "
		  "--redis-key {other_key}", "--redis-cert {cert} with --redis-key {other_key}" },
	};

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char args[1000], want[1000], cmd[3000], out[2048];
		const char *files[][2] = { { "{ca}", pki_path("ca.pem") },
					   { "{cert}", pki_path("client.pem") },
					   { "{other_key}", pki_path("server2.key") } };
		FILE *p;
		size_t nr;
		int rc;

		for (int k = 0; k < 2; k++) {
			const char *src = k ? bad[i].want : bad[i].args;
			char *o = k ? want : args, *end = o + 999;

			/* {name} -> its file */
			while (*src && o < end) {
				size_t f = 0;

				while (f < 3 && strncmp(src, files[f][0], strlen(files[f][0])))
					f++;
				if (f < 3) {
					o += snprintf(o, (size_t)(end - o), "%s", files[f][1]);
					src += strlen(files[f][0]);
				} else {
					*o++ = *src++;
				}
			}
			*o = '\0';
		}
		/* bounded: a dlockd that wrongly accepts the setting would serve on */
		snprintf(cmd, sizeof(cmd), "timeout -s KILL 20 %s %s --listen 127.0.0.1:0 2>&1",
			 dlockd_binary(), args);
		p = popen(cmd, "r");
		nr = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
		out[nr] = '\0';
		rc = p ? pclose(p) : -1;
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit 2 (%d) for: %s: %s", rc, args,
		      out);
		CHECK(strstr(out, want), "says '%s': %s", want, out);
	}
}

/* rediss-sentinel://: the sentinels and the master they name over TLS,
 * and a failover followed to the promoted replica, over TLS too. */
TEST(redis_tls_sentinel_failover_is_followed)
{
	static struct sentinel_topo t;
	const char *flags[] = { "--redis-ca", NULL, NULL };
	const char *n = lockname("rtls-sentinel");
	char why[400] = "";
	struct dlockd_srv d;
	redisReply *rep;
	int old;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	CHECK(sentinel_topo_start_tls(&t, 1) == 0, "a master, a replica and three sentinels "
	      "over TLS");
	flags[1] = pki_path("ca.pem");
	CHECK(dlockd_start(&d, t.url, flags) == 0, "start on %s (see %s)", t.url, d.log);
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 10000),
	      "ready through the sentinels over TLS (see %s)", d.log);
	CHECK(lock_cycle(&d, n, why, sizeof(why)), "a lock cycle on the master: %s", why);

	old = sentinel_master_port(&t);
	CHECK(old == t.data[0].tls_port, "the sentinels name the master's TLS port: %d", old);
	rep = rcmd_on(&t.sent[0], "SENTINEL FAILOVER " SENTINEL_MASTER);
	CHECK(rep && rep->type == REDIS_REPLY_STATUS, "SENTINEL FAILOVER: %s",
	      rep && rep->str ? rep->str : "no reply");
	freeReplyObject(rep);
	CHECK(WAIT_FOR(sentinel_master_port(&t) == t.data[1].tls_port, 30000),
	      "the replica is promoted");
	/* readyz first (quiet), then cycles until one works on the new master */
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 20000),
	      "ready again after the failover (see %s)", d.log);
	CHECK(WAIT_FOR(lock_cycle(&d, lockname("rtls-sentinel"), why, sizeof(why)), 20000),
	      "a lock cycle on the promoted replica, over TLS: %s (see %s)", why, d.log);
	CHECK(file_lines_with(d.log, "\"level\":\"error\"", "redis tls", NULL) == 0,
	      "no TLS trouble logged (see %s)", d.log);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* The cluster test's processes: stopped at its end, whatever failed. */
static struct redis_cluster tls_cluster;
static struct dlockd_srv tls_cluster_dlockd;

static void tls_cluster_stop(void *arg)
{
	dlockd_kill(&tls_cluster_dlockd);
	cluster_stop(arg);
}

/* PUT path?owner=owner&ttl_ms=30000 on d: its fencing token, or -1 (with
 * the answer printed) if not granted. */
static long long grant(const struct dlockd_srv *d, const char *path, const char *owner)
{
	char p[600];
	struct http_resp r;
	long long token = -1;

	snprintf(p, sizeof(p), "%s?owner=%s&ttl_ms=30000", path, owner);
	http_on(d->base, "PUT", p, NULL, &r);
	if (r.status == 200)
		token = json_int(&r, "fencing_token");
	else
		printf("# PUT %s: %ld %s\n", p, r.status, r.body ? r.body : "");
	http_free(&r);
	return token;
}

/* rediss://seed,seed,seed: a Redis Cluster of 3 masters with a replica
 * each, served over TLS only to dlockd (client certificates required; the
 * cluster bus and replication over TLS: tls-cluster, tls-replication, so
 * that the nodes name their TLS ports in CLUSTER SLOTS and MOVED). Every
 * kind of lock works on names of each master, with tokens growing; a
 * waiter on each master is woken by the release, at once (sharded pub/sub
 * over TLS, SSUBSCRIBEd on that master); a CLUSTER FAILOVER of one master
 * is followed, to the promoted replica's TLS port: a lock cycle there, and
 * a waiter held up across it woken by the release afterwards. */
TEST(redis_tls_cluster_every_kind_wake_and_failover)
{
	static const char *const kinds[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s/write",
					     "/rwlocks/%s/read" };
	const char *flags[] = { "--redis-ca", NULL, "--redis-cert", NULL, "--redis-key", NULL,
				NULL };
	struct redis_cluster *c = &tls_cluster;
	struct dlockd_srv *d = &tls_cluster_dlockd;
	char url[300], names[3][128], why[400], chan[300], p[600], other[128];
	long long s0, t_h;
	double msgs0;
	struct bg w;
	int64_t t;
	int m, rep;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	test_at_end(tls_cluster_stop, c);
	CHECK(cluster_start_tls(c, 3, 1) == 0, "3 masters with a replica each, over TLS");
	flags[1] = pki_path("ca.pem");
	flags[3] = pki_path("client.pem");
	flags[5] = pki_path("client.key");
	snprintf(url, sizeof(url), "rediss://%s", c->seeds);
	CHECK(dlockd_start(d, url, flags) == 0, "start on %s (see %s)", url, d->log);
	CHECK(WAIT_FOR(status_of(d, "GET", "/readyz") == 200, 10000),
	      "ready on the cluster over TLS (see %s)", d->log);
	CHECK(file_contains(d->log, "sharded pub/sub"), "auto took sharded pub/sub (see %s)",
	      d->log);
	CHECK(cluster_names_per_master(c, "rtls-cl", names), "a name on each master");

	/* every kind, on a name of each master's (the slot of names[m]) */
	for (m = 0; m < 3; m++) {
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			char n[128], path[300];
			long long t1, t2;

			snprintf(p, sizeof(p), "k%zu", k);
			cluster_same_slot_name(names[m], p, n, sizeof(n));
			snprintf(path, sizeof(path), kinds[k], n);
			CHECK((t1 = grant(d, path, "a")) > 0, "a gets %s on master %d", path, m);
			CHECK(cluster_has_key(c, m, n), "%s is kept on master %d", n, m);
			CHECK(status_of(d, "DELETE", "%s?owner=a", path) == 200, "a releases %s",
			      path);
			CHECK((t2 = grant(d, path, "b")) > t1, "b gets %s, token %lld > %lld", path,
			      t2, t1);
			CHECK(status_of(d, "DELETE", "%s?owner=b", path) == 200, "b releases %s",
			      path);
		}
	}

	/* a waiter on each master, woken by the release through its
	 * subscriber's TLS connection to that master (SSUBSCRIBE) */
	msgs0 = metric_value(d, "dlockd_pubsub_messages_total");
	for (m = 0; m < 3; m++) {
		snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", names[m]);
		CHECK(lock_hold(d, names[m], "h", 30000), "h holds %s", names[m]);
		s0 = redis_script_calls(&c->node[m]);
		snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=30000&wait_ms=20000", names[m]);
		bg_start_on(&w, d->base, "PUT", p, NULL);
		CHECK(wait_parked_on(d, &c->node[m], s0, &c->node[m], true, chan),
		      "w waits, SSUBSCRIBEd on master %d (see %s)", m, d->log);
		CHECK(lock_release(d, names[m], "h") == 200, "h releases");
		t = mono_ms();
		CHECK_GRANTED_WITHIN(w, t, 3000, "w, woken by the release");
		http_free(&w.r);
		CHECK(lock_release(d, names[m], "w") == 200, "w releases");
	}
	CHECK(metric_value(d, "dlockd_pubsub_messages_total") >= msgs0 + 3,
	      "the release messages came through the subscriber");

	/* a CLUSTER FAILOVER of the master of names[0]: its replica, reached
	 * on its TLS port, takes over; a waiter held up across it is served */
	m = cluster_master_of(c, 0, names[0]);
	rep = cluster_replica_of(c, m);
	CHECK(m >= 0 && rep >= 0, "%s: master %d, replica %d", names[0], m, rep);
	snprintf(p, sizeof(p), "/locks/%s", names[0]);
	CHECK((t_h = grant(d, p, "h")) > 0, "h holds %s", names[0]);
	CHECK(WAIT_FOR(cluster_node_has_keys(c, rep), 20000), "the hold reaches the replica");
	s0 = redis_script_calls(&c->node[m]);
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", names[0]);
	snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=30000&wait_ms=25000", names[0]);
	bg_start_on(&w, d->base, "PUT", p, NULL);
	CHECK(wait_parked_on(d, &c->node[m], s0, &c->node[m], true, chan), "w waits");
	{
		redisReply *r = cluster_cmd(c, rep, "CLUSTER FAILOVER");

		CHECK(r && r->type == REDIS_REPLY_STATUS, "CLUSTER FAILOVER on node %d: %s", rep,
		      r && r->str ? r->str : "no answer");
		freeReplyObject(r);
	}
	CHECK(WAIT_FOR(cluster_master_of(c, rep, names[0]) == rep, 20000),
	      "node %d is the master of %s now", rep, names[0]);
	cluster_same_slot_name(names[0], "after", other, sizeof(other));
	CHECK(WAIT_FOR(lock_cycle(d, other, why, sizeof(why)), 20000),
	      "a lock cycle on the promoted replica, over TLS: %s (see %s)", why, d->log);
	CHECK(cluster_has_key(c, rep, names[0]), "h's lock is on the promoted replica");
	CHECK(lock_release(d, names[0], "h") == 200, "h releases on the new master");
	t = mono_ms();
	CHECK_GRANTED_WITHIN(w, t, 5000, "w, held up across the failover, woken by the release");
	CHECK(json_int(&w.r, "fencing_token") > t_h, "w's token %lld above h's %lld",
	      json_int(&w.r, "fencing_token"), t_h);
	http_free(&w.r);
	CHECK(lock_release(d, names[0], "w") == 200, "w releases");
	CHECK(file_lines_with(d->log, "\"level\":\"error\"", "redis tls", NULL) == 0,
	      "no TLS trouble logged (see %s)", d->log);
	CHECK(dlockd_stop(d, 5000) == 0, "clean exit");
}
