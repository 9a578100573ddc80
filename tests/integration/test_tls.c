/* test_tls.c -- HTTPS: --tls-cert/--tls-key serve the API over TLS (a
 * lock cycle, the probes and /metrics, with the client checking the
 * certificate against its CA, by IP and by name); plain HTTP to the port
 * gets nothing; --tls-client-ca refuses the handshake of a client without
 * a certificate or with one the CA did not sign; the certificate rotates
 * without a restart (rewritten in place, swapped behind a symlink as a
 * mounted Secret is, or on SIGHUP) for new connections while a request
 * waiting on a connection made before goes on; a bad new file keeps the
 * old certificate, logged once; bad files or flags stop dlockd at start
 * (exit 2) naming the file and the problem; past --max-connections a TLS
 * connection is closed unanswered; --idle-timeout-s closes connections
 * stuck before, in or after the handshake, so they cannot lock the
 * others out; an answer's header and body leave in one write, and every
 * answer reaches a client that pipelines and reads late, one with a 1 KB
 * receive window, and (only if it was sent) one that resets as its grant
 * comes. The certificates are made with openssl in the run's directory
 * (the harness' pki_ready). Each test runs its own dlockd. */
#include "../harness/harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ----- Certificates ----- */

/* Every certificate and key file a test serves is padded to this size
 * (PEM readers skip what follows the END line), so that one rewritten in
 * place with its old mtime looks unchanged to stat(2): only SIGHUP can
 * make dlockd read it. */
#define PAD_TO 4096

/* Write text into a new file at path. */
static bool file_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	return f && fputs(text, f) >= 0 && fclose(f) == 0;
}

/* Write the file src to dst in place (through symlinks, same inode),
 * padded to PAD_TO; with keep_mtime its mtime is put back as it was, so
 * that stat(2) sees no change. */
static bool put_file(const char *dst, const char *src, bool keep_mtime)
{
	static char buf[PAD_TO];
	struct stat before;
	FILE *in = fopen(src, "rb"), *out;
	size_t n;

	if (!in)
		return false;
	n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	if (n == 0 || n >= PAD_TO)
		return false;
	memset(buf + n, '\n', PAD_TO - n);
	if (keep_mtime && stat(dst, &before) < 0)
		return false;
	out = fopen(dst, "r+b");
	if (!out)
		out = fopen(dst, "wb");
	if (!out)
		return false;
	n = fwrite(buf, 1, PAD_TO, out);
	if (fclose(out) != 0 || n != PAD_TO)
		return false;
	if (keep_mtime) {
		struct timespec t[2] = { before.st_atim, before.st_mtim };

		return utimensat(AT_FDCWD, dst, t, 0) == 0;
	}
	return true;
}

/* ----- Requests ----- */

/* method path on base, over a new connection; the status (-1: no answer)
 * and the subject of the certificate it was served (into subject). */
static long fresh(const char *base, const struct http_tls *t, const char *method,
		  const char *path, char *subject, size_t len)
{
	struct http_tls f = *t;
	struct http_resp r;
	long s;

	f.fresh = true;
	http_tls(&f);
	http_on(base, method, path, NULL, &r);
	s = r.status;
	if (subject)
		snprintf(subject, len, "%s", r.peer_subject);
	http_free(&r);
	http_tls(t);
	return s;
}

/* What the last serves() saw, for the failure message. */
static char seen[300];

/* Is a new connection to d served the certificate with subject CN=cn? */
static bool serves(const struct dlockd_srv *d, const struct http_tls *t, const char *cn)
{
	char subject[256];
	long s = fresh(d->base, t, "GET", "/healthz", subject, sizeof(subject));

	snprintf(seen, sizeof(seen), "status %ld, subject '%s'", s, subject);
	return s == 200 && strstr(subject, cn) != NULL;
}

TEST(tls_lock_cycle_over_https)
{
	struct http_tls t = { .ca = NULL };
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, NULL };
	const char *n = lockname("tls");
	char plain[64], byname[64], subject[256], path[300];
	struct dlockd_srv d;
	struct http_resp r;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	flags[1] = pki_path("server1.pem");
	flags[3] = pki_path("server1.key");
	t.ca = pki_path("ca.pem");
	http_tls(&t);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --tls-cert (see %s)", d.log);
	CHECK(!strncmp(d.base, "https://", 8), "served over https: %s", d.base);

	/* the client checks the certificate against the CA: by IP, and by name */
	CHECK(fresh(d.base, &t, "GET", "/healthz", subject, sizeof(subject)) == 200,
	      "/healthz over https, the certificate verified by IP");
	CHECK(strstr(subject, "dlockd server 1"), "served the certificate: '%s'", subject);
	snprintf(byname, sizeof(byname), "https://localhost:%d", d.port);
	CHECK(fresh(byname, &t, "GET", "/readyz", NULL, 0) == 200,
	      "/readyz over https, the certificate verified by name");

	/* a lock cycle on one keep-alive connection */
	snprintf(path, sizeof(path), "/locks/%s?owner=alice&ttl_ms=30000", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "acquire over https");
	CHECK(json_int(&r, "fencing_token") > 0, "a fencing token: %s", r.body);
	http_free(&r);
	CHECK(flag_of(&d, "locked", "/locks/%s", n) == 1, "the lock reads as held");
	snprintf(path, sizeof(path), "/locks/%s?owner=bob", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_ERROR(r, 409, "locked", "another owner over https");
	http_free(&r);
	CHECK(lock_release(&d, n, "alice") == 200, "release over https");
	CHECK(flag_of(&d, "locked", "/locks/%s", n) == 0, "the lock reads as free");
	http_on(d.base, "GET", "/metrics", NULL, &r);
	CHECK_STATUS(r, 200, "/metrics over https");
	CHECK(r.body && strstr(r.body, "dlockd_"), "metrics listed");
	http_free(&r);

	/* plain HTTP to the TLS port gets no answer */
	snprintf(plain, sizeof(plain), "http://127.0.0.1:%d", d.port);
	http_on(plain, "GET", "/healthz", NULL, &r);
	CHECK(r.status == -1, "plain HTTP to the TLS port: status %ld, want none", r.status);
	http_free(&r);
	/* a client that trusts another CA refuses the certificate */
	t.ca = pki_path("other-ca.pem");
	CHECK(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == -1,
	      "a client trusting another CA gets no answer");
	t.ca = pki_path("ca.pem");
	CHECK(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == 200,
	      "dlockd serves on after refused handshakes");
	CHECK(!file_contains(d.log, "\"level\":\"warn\""), "failed handshakes are no warnings");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(tls_client_certificates_required)
{
	struct http_tls t = { .ca = NULL }, none, self, good;
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, "--tls-client-ca", NULL,
				NULL };
	const char *n = lockname("mtls");
	struct dlockd_srv d;
	struct http_resp r;
	char path[300];

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	flags[1] = pki_path("server1.pem");
	flags[3] = pki_path("server1.key");
	flags[5] = pki_path("ca.pem");
	t.ca = pki_path("ca.pem");
	none = self = good = t;
	self.cert = pki_path("self.pem");
	self.key = pki_path("self.key");
	good.cert = pki_path("client.pem");
	good.key = pki_path("client.key");
	http_tls(&good);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --tls-client-ca (see %s)", d.log);

	CHECK(fresh(d.base, &none, "GET", "/healthz", NULL, 0) == -1,
	      "no client certificate: no answer");
	CHECK(fresh(d.base, &none, "PUT", "/locks/x?owner=a", NULL, 0) == -1,
	      "no client certificate: no lock either");
	CHECK(fresh(d.base, &self, "GET", "/healthz", NULL, 0) == -1,
	      "a self-signed client certificate: no answer");
	CHECK(WAIT_FOR(file_lines_with(d.log, "client certificate of CN=self-signed client "
				       "refused", "issuer is unknown", NULL) >= 1, 2000),
	      "the refused certificate is logged with its subject and why");
	{
		/* signed by the CA, but for servers only (extended key usage):
		 * a leaked server key must not open the lock service */
		struct http_tls server_only = none;

		server_only.cert = pki_path("server2.pem");
		server_only.key = pki_path("server2.key");
		CHECK(fresh(d.base, &server_only, "GET", "/healthz", NULL, 0) == -1,
		      "a server certificate of the CA as a client's: no answer");
		CHECK(WAIT_FOR(file_lines_with(d.log, "client certificate of CN=dlockd server 2",
					       "refused", NULL) >= 1, 2000),
		      "and the refusal is logged");
	}
	CHECK(fresh(d.base, &good, "GET", "/healthz", NULL, 0) == 200,
	      "a certificate signed by the CA: 200");

	snprintf(path, sizeof(path), "/locks/%s?owner=alice", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "acquire with a client certificate");
	http_free(&r);
	CHECK(lock_release(&d, n, "alice") == 200, "release with a client certificate");
	CHECK(flag_of(&d, "locked", "/locks/%s", n) == 0, "free again");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* Kubernetes' AtomicWriter: a version's files go into a new directory, a
 * symlink to it is made beside ..data and renamed over it. */
static bool k8s_publish(const char *dir, const char *version, const char *server)
{
	char path[600], link[600], src[64];

	snprintf(path, sizeof(path), "%s/%s", dir, version);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s/tls.crt", dir, version);
	snprintf(src, sizeof(src), "%s.pem", server);
	if (!put_file(path, pki_path(src), false))
		return false;
	snprintf(path, sizeof(path), "%s/%s/tls.key", dir, version);
	snprintf(src, sizeof(src), "%s.key", server);
	if (!put_file(path, pki_path(src), false))
		return false;
	snprintf(link, sizeof(link), "%s/..data_tmp", dir);
	unlink(link);
	snprintf(path, sizeof(path), "%s/..data", dir);
	return symlink(version, link) == 0 && rename(link, path) == 0;
}

TEST(tls_certificate_rotates_without_dropping_connections)
{
	struct http_tls t = { .ca = NULL };
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, NULL };
	const int s = 5000;	/* the files are looked at every second */
	const char *n = lockname("rotate");
	char dir[300], crt[400], key[400], path[300];
	struct dlockd_srv d;
	struct bg waiter;
	int refused, mismatched;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	/* a mounted Secret: tls.crt -> ..data/tls.crt, ..data -> ..v1 */
	snprintf(dir, sizeof(dir), "%s/tls-secret-%d", test_tmpdir(), (int)getpid());
	mkdir(dir, 0700);
	CHECK(k8s_publish(dir, "..v1", "server1"), "the Secret's first version");
	snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
	snprintf(key, sizeof(key), "%s/tls.key", dir);
	CHECK(symlink("..data/tls.crt", crt) == 0 && symlink("..data/tls.key", key) == 0,
	      "the Secret's symlinks");
	flags[1] = crt;
	flags[3] = key;
	t.ca = pki_path("ca.pem");
	http_tls(&t);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start (see %s)", d.log);
	CHECK(serves(&d, &t, "dlockd server 1"), "the first certificate: %s", seen);

	/* a request waiting on a connection made before any rotation */
	CHECK(lock_hold(&d, n, "holder", 60000), "hold the lock");
	snprintf(path, sizeof(path), "/locks/%s?owner=waiter&wait_ms=60000", n);
	bg_start_on(&waiter, d.base, "PUT", path, NULL);
	CHECK(wait_waiters(&d, 1, 5000), "the waiter waits");

	/* rewritten in place through the symlinks (cert-manager), no signal */
	CHECK(put_file(key, pki_path("server2.key"), false) &&
	      put_file(crt, pki_path("server2.pem"), false), "rewrite in place");
	CHECK(WAIT_FOR(serves(&d, &t, "dlockd server 2"), s),
	      "new connections get the rewritten certificate, without SIGHUP: %s", seen);

	/* the Kubernetes way: a new version swapped in behind ..data */
	CHECK(k8s_publish(dir, "..v3", "server3"), "publish a new version");
	CHECK(WAIT_FOR(serves(&d, &t, "dlockd server 3"), s),
	      "new connections get the swapped-in certificate: %s", seen);

	/* written keeping size and mtime: the ctime still shows the change */
	CHECK(put_file(key, pki_path("server4.key"), true) &&
	      put_file(crt, pki_path("server4.pem"), true), "rewrite, keeping size and mtime");
	CHECK(WAIT_FOR(serves(&d, &t, "dlockd server 4"), s),
	      "new connections get it without SIGHUP (the ctime changed): %s", seen);
	/* SIGHUP reads the files again whatever stat says */
	kill(d.pid, SIGHUP);
	CHECK(WAIT_FOR(file_lines_with(d.log, "tls certificates reloaded (SIGHUP)",
				       "dlockd server 4", NULL) == 1, 3000),
	      "SIGHUP reloads, and the log says so");
	CHECK(serves(&d, &t, "dlockd server 4"), "still the same certificate: %s", seen);

	/* the waiter's connection, made with the first certificate, goes on */
	CHECK(waiters_of(&d) == 1, "the waiter still waits");
	CHECK(lock_release(&d, n, "holder") == 200, "release");
	bg_join(&waiter);
	CHECK_STATUS(waiter.r, 200, "the waiter from before the rotations is granted");
	http_free(&waiter.r);
	CHECK(lock_release(&d, n, "waiter") == 200, "the waiter releases");

	/* a broken certificate: the old one stays, and the log says why, once
	 * (a look between the two writes above may have refused a pair) */
	refused = file_lines_with(d.log, "not reloaded", NULL);
	CHECK(file_write(crt, "not a certificate\n"), "break the certificate");
	CHECK(WAIT_FOR(file_lines_with(d.log, "tls certificates not reloaded (a file changed on "
				       "disk)", "--tls-cert", "no PEM certificate", NULL) == 1, s),
	      "the broken file is refused, naming it");
	CHECK(serves(&d, &t, "dlockd server 4"), "the old certificate is served on: %s", seen);
	/* the wait is what is tested: a bad file is tried once per change */
	sleep_ms(2500);
	CHECK(file_lines_with(d.log, "not reloaded", NULL) == refused + 1,
	      "logged once, not every second");

	/* a new certificate before its key (files written one by one): the
	 * pair is refused until the key follows */
	mismatched = file_lines_with(d.log, "is not the key of the certificate", NULL);
	CHECK(put_file(crt, pki_path("server5.pem"), false), "the new certificate alone");
	CHECK(WAIT_FOR(file_lines_with(d.log, "not reloaded", "is not the key of the "
				       "certificate", NULL) == mismatched + 1, s),
	      "a key that does not match is refused, naming it");
	CHECK(serves(&d, &t, "dlockd server 4"), "the old certificate is served meanwhile: %s", seen);
	CHECK(put_file(key, pki_path("server5.key"), false), "then its key");
	CHECK(WAIT_FOR(serves(&d, &t, "dlockd server 5"), s), "the new pair is served: %s", seen);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* tmpl into out, each files[i][0] in it replaced by files[i][1]. */
static void subst(char *out, size_t cap, const char *tmpl, const char *const files[][2],
		  size_t nfiles)
{
	size_t o = 0;

	while (*tmpl && o + 1 < cap) {
		size_t i;

		for (i = 0; i < nfiles; i++)
			if (!strncmp(tmpl, files[i][0], strlen(files[i][0])))
				break;
		if (i < nfiles) {
			o += (size_t)snprintf(out + o, cap - o, "%s", files[i][1]);
			if (o >= cap)
				o = cap - 1;
			tmpl += strlen(files[i][0]);
		} else {
			out[o++] = *tmpl++;
		}
	}
	out[o] = '\0';
}

/* Each bad setting or file stops dlockd at start (exit 2), naming the
 * flag or file and what is wrong. */
TEST(tls_bad_files_stop_dlockd_at_start)
{
	char garbage[400], missing[400], cmd[3000], out[2048];
	const char *bin = dlockd_binary();

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	snprintf(garbage, sizeof(garbage), "%s/garbage.pem", pki_dir());
	snprintf(missing, sizeof(missing), "%s/missing.pem", pki_dir());
	CHECK(file_write(garbage, "no PEM here\n"), "a garbage file");

	const struct {
		const char *env, *args;	/* {cert} and the like: the files below */
		const char *want;
	} bad[] = {
		{ "", "--tls-cert {cert}", "--tls-cert and --tls-key go together: --tls-cert was "
		  "given without --tls-key" },
		{ "DLOCKD_TLS_KEY={key}", "", "--tls-key was given without --tls-cert" },
		{ "", "--tls-client-ca {ca}", "--tls-client-ca needs --tls-cert and --tls-key" },
		{ "", "--tls-cert {missing} --tls-key {key}", "--tls-cert {missing}: No such file" },
		{ "", "--tls-cert {garbage} --tls-key {key}", "--tls-cert {garbage}: no PEM "
		  "certificate" },
		{ "", "--tls-cert {cert} --tls-key {garbage}", "--tls-key {garbage}: not a PEM "
		  "private key" },
		{ "DLOCKD_TLS_CERT={cert} DLOCKD_TLS_KEY={other_key}", "",
		  "--tls-key {other_key} is not the key of the certificate in --tls-cert {cert}" },
		{ "", "--tls-cert {cert} --tls-key {key} --tls-client-ca {garbage}",
		  "--tls-client-ca {garbage}: no PEM certificate" },
		{ "", "--tls-cert {cert} --tls-key {key} --tls-client-ca {missing}",
		  "--tls-client-ca {missing}: No such file" },
	};
	const char *files[][2] = {
		{ "{cert}", pki_path("server1.pem") }, { "{key}", pki_path("server1.key") },
		{ "{ca}", pki_path("ca.pem") }, { "{other_key}", pki_path("server2.key") },
		{ "{garbage}", garbage }, { "{missing}", missing },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char env[1000], args[1000], want[1000];
		FILE *p;
		size_t nr;
		int rc;

		subst(env, sizeof(env), bad[i].env, files, 6);
		subst(args, sizeof(args), bad[i].args, files, 6);
		subst(want, sizeof(want), bad[i].want, files, 6);
		/* bounded: a dlockd that wrongly accepts the setting would serve on */
		snprintf(cmd, sizeof(cmd), "env %s timeout -s KILL 20 %s %s --listen 127.0.0.1:0 "
			 "--redis redis://127.0.0.1:%d/0 2>&1", env, bin, args, H_redis.port);
		p = popen(cmd, "r");
		nr = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
		out[nr] = '\0';
		rc = p ? pclose(p) : -1;
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit 2 (%d) for: %s %s: %s", rc,
		      env, args, out);
		CHECK(strstr(out, want), "says '%s': %s", want, out);
	}
}

/* Past --max-connections a TLS connection is closed unanswered (a
 * plaintext 503 would be garbage to it), and counted as a 503. */
TEST(tls_over_max_connections_is_closed)
{
	struct http_tls t = { .ca = NULL };
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, "--max-connections", "16",
				"--max-connections-per-client", "16", NULL };
	struct dlockd_srv d;
	int fds[16], n = 0;
	bool refused = false;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	flags[1] = pki_path("server1.pem");
	flags[3] = pki_path("server1.key");
	t.ca = pki_path("ca.pem");
	http_tls(&t);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start (see %s)", d.log);
	/* 16 connections that never start their handshake fill dlockd up */
	while (n < 16 && (fds[n] = raw_connect(d.port)) >= 0)
		n++;
	if (n == 16)
		refused = WAIT_FOR(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == -1, 3000);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	CHECK(n == 16 && refused, "16 connections open (%d) and a 17th refused", n);
	CHECK(file_lines_with(d.log, "over --max-connections: closed unanswered (TLS)", NULL) >= 1,
	      "the refusal is logged");
	CHECK(WAIT_FOR(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == 200, 5000),
	      "served again once they are gone");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* ----- Connections stuck before or after the handshake ----- */

enum { STUCK = 16, STUCK_TIMEOUT_S = 2 };

/* How a stuck connection stops: before its ClientHello, halfway through
 * it, halfway and then a byte of it every half second (never idle), after
 * a whole one (dlockd's answer unread, the handshake never finished), or
 * after the handshake (no request). */
enum stuck_kind {
	STUCK_SILENT, STUCK_HALF_HELLO, STUCK_TRICKLED_HELLO, STUCK_WHOLE_HELLO, STUCK_HANDSHAKEN
};

/* A TLS record header announcing a 512-byte handshake message, and the
 * start of a ClientHello, never finished. */
static const char half_hello[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc,
				   0x03, 0x03 };

struct stuck {
	int fd;
	gnutls_session_t tls;		/* STUCK_WHOLE_HELLO */
	CURL *curl;			/* STUCK_HANDSHAKEN: the socket is curl's */
};

static gnutls_certificate_credentials_t stuck_cred;
/* How many of them the last stuck_closed_after() could open. */
static int stuck_opened;

/* Open a connection to d stuck as kind says (a handshake as t says);
 * fd -1 on failure. */
static struct stuck stuck_open(const struct dlockd_srv *d, enum stuck_kind kind,
			       const struct http_tls *t)
{
	struct stuck st = { .fd = -1 };
	curl_socket_t cs = CURL_SOCKET_BAD;
	int rc;

	if (kind == STUCK_HANDSHAKEN) {
		if (!(st.curl = curl_easy_init()))
			return st;
		curl_easy_setopt(st.curl, CURLOPT_URL, d->base);
		curl_easy_setopt(st.curl, CURLOPT_CAINFO, t->ca);
		if (t->cert) {
			curl_easy_setopt(st.curl, CURLOPT_SSLCERT, t->cert);
			curl_easy_setopt(st.curl, CURLOPT_SSLKEY, t->key);
		}
		curl_easy_setopt(st.curl, CURLOPT_CONNECT_ONLY, 1L);
		if (curl_easy_perform(st.curl) == CURLE_OK &&
		    curl_easy_getinfo(st.curl, CURLINFO_ACTIVESOCKET, &cs) == CURLE_OK)
			st.fd = cs == CURL_SOCKET_BAD ? -1 : (int)cs;
		return st;
	}
	if ((st.fd = raw_connect(d->port)) < 0)
		return st;
	if ((kind == STUCK_HALF_HELLO || kind == STUCK_TRICKLED_HELLO) &&
	    write(st.fd, half_hello, sizeof(half_hello)) != (ssize_t)sizeof(half_hello)) {
		close(st.fd);
		st.fd = -1;
	}
	if (kind == STUCK_WHOLE_HELLO) {
		/* non-blocking: the first step sends the ClientHello and
		 * returns, waiting for dlockd's answer, which it never reads */
		fcntl(st.fd, F_SETFL, O_NONBLOCK);
		gnutls_init(&st.tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK);
		gnutls_set_default_priority(st.tls);
		gnutls_credentials_set(st.tls, GNUTLS_CRD_CERTIFICATE, stuck_cred);
		gnutls_transport_set_int(st.tls, st.fd);
		rc = gnutls_handshake(st.tls);
		if (rc != GNUTLS_E_AGAIN && rc != GNUTLS_E_INTERRUPTED) {
			gnutls_deinit(st.tls);
			close(st.fd);
			st.fd = -1;
		}
	}
	return st;
}

static void stuck_close(struct stuck *st)
{
	if (st->curl) {
		curl_easy_cleanup(st->curl);
		return;
	}
	if (st->tls)
		gnutls_deinit(st->tls);
	close(st->fd);
}

/* Has the server closed fd (all it sent read, then EOF or a reset)? */
static bool server_closed(int fd)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Have all n been closed by the server? With trickle, a byte more of
 * the ClientHello on each every half second. */
static bool all_closed(const struct stuck *st, int n, bool trickle)
{
	static int64_t last;
	int closed = 0;
	bool write_now = trickle && mono_ms() - last >= 500;

	for (int i = 0; i < n; i++) {
		if (server_closed(st[i].fd))
			closed++;
		else if (write_now)	/* closed meanwhile: seen at the next look */
			(void)!write(st[i].fd, "\x03", 1);
	}
	if (write_now)
		last = mono_ms();
	return closed == n;
}

/* Fill d's --max-connections (STUCK) with connections stuck as kind says
 * and wait for dlockd to close them all; the seconds it took (-1: not all
 * of them within 10 s). */
static double stuck_closed_after(const struct dlockd_srv *d, enum stuck_kind kind,
				 const struct http_tls *t)
{
	struct stuck st[STUCK];
	int n = 0;
	int64_t t0 = mono_ms();
	bool closed;

	/* one may be refused while dlockd still counts the connection of
	 * the last request: open it again */
	while (n < STUCK && WAIT_FOR((st[n] = stuck_open(d, kind, t)).fd >= 0, 2000))
		n++;
	stuck_opened = n;
	closed = n == STUCK && WAIT_FOR(all_closed(st, n, kind == STUCK_TRICKLED_HELLO), 10000);
	for (int i = 0; i < n; i++)
		stuck_close(&st[i]);
	return closed ? (double)(mono_ms() - t0) / 1000.0 : -1;
}

/* --max-connections of TLS connections that never send a ClientHello,
 * send half of one, trickle one, send a whole one and stop there, or
 * finish the handshake and send no request: each kind is closed by
 * dlockd after --idle-timeout-s, and a real client is served after
 * them; over HTTPS, and with client certificates required. */
TEST(tls_idle_timeout_cuts_connections_stuck_in_the_handshake)
{
	static const char *const what[] = {
		[STUCK_SILENT] = "never send a ClientHello",
		[STUCK_HALF_HELLO] = "send half a ClientHello",
		[STUCK_TRICKLED_HELLO] = "trickle a ClientHello a byte each 0.5 s",
		[STUCK_WHOLE_HELLO] = "send a ClientHello and no more",
		[STUCK_HANDSHAKEN] = "finish the handshake and send nothing",
	};
	struct http_tls t = { .ca = NULL };
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, "--max-connections", "16",
				"--max-connections-per-client", "16", "--idle-timeout-s", "2",
				"--tls-client-ca", NULL, NULL };
	struct dlockd_srv d;
	double after;

	CHECK(pki_ready(), "openssl makes the test certificates in %s", pki_dir());
	flags[1] = pki_path("server1.pem");
	flags[3] = pki_path("server1.key");
	t.ca = pki_path("ca.pem");
	CHECK(gnutls_certificate_allocate_credentials(&stuck_cred) == 0, "gnutls credentials");
	for (int mtls = 0; mtls <= 1; mtls++) {
		const char *over = mtls ? "mTLS" : "HTTPS";

		flags[10] = mtls ? "--tls-client-ca" : NULL;	/* ends the flags over HTTPS */
		flags[11] = pki_path("ca.pem");
		t.cert = mtls ? pki_path("client.pem") : NULL;
		t.key = mtls ? pki_path("client.key") : NULL;
		http_tls(&t);
		CHECK(dlockd_start(&d, NULL, flags) == 0, "start over %s (see %s)", over, d.log);
		for (int k = STUCK_SILENT; k <= STUCK_HANDSHAKEN; k++) {
			after = stuck_closed_after(&d, k, &t);
			CHECK(after >= 0, "%s: %d connections that %s are closed by dlockd within "
			      "10 s (--idle-timeout-s %d; %d opened)", over, STUCK, what[k],
			      STUCK_TIMEOUT_S, stuck_opened);
			CHECK(WAIT_FOR(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == 200, 3000),
			      "%s: a real client is served after the %d that %s", over, STUCK,
			      what[k]);
			printf("# %s, --idle-timeout-s %d, %d connections that %s: all closed by "
			       "dlockd after %.1f s\n", over, STUCK_TIMEOUT_S, STUCK, what[k], after);
		}
		CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	}
	gnutls_certificate_free_credentials(stuck_cred);
}

/* ----- Answers over TLS ----- */

/* A TLS client on a raw socket (blocking), for what curl does not do:
 * pipelining, reading late, resetting. */
struct tls_client {
	int fd;
	gnutls_session_t tls;
};

static bool tls_client_open(struct tls_client *c, int port, gnutls_certificate_credentials_t cred)
{
	int rc;

	memset(c, 0, sizeof(*c));
	if ((c->fd = raw_connect(port)) < 0)
		return false;
	gnutls_init(&c->tls, GNUTLS_CLIENT);
	gnutls_set_default_priority(c->tls);
	gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, cred);
	gnutls_session_set_verify_cert(c->tls, "127.0.0.1", 0);
	gnutls_transport_set_int(c->tls, c->fd);
	do
		rc = gnutls_handshake(c->tls);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	return rc == 0;
}

static void tls_client_close(struct tls_client *c)
{
	gnutls_deinit(c->tls);
	close(c->fd);
}

/* Send "method path" on c. */
static bool tls_client_send(struct tls_client *c, const char *method, const char *path)
{
	char req[400];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Length: 0\r\n\r\n", method, path);

	return gnutls_record_send(c->tls, req, (size_t)n) == n;
}

/* What a tls_client has read and not yet taken as answers. */
struct answers {
	char buf[1 << 18];
	size_t have;
};

/* Take c's next whole answer (its Content-Length; head: a HEAD's, none)
 * off a, reading more as needed: its status, -1 when none came, -2 when
 * want (if not NULL) is not in it; the body's length in *body_len. */
static int tls_client_answer(struct tls_client *c, struct answers *a, bool head,
			     const char *want, size_t *body_len)
{
	size_t hdr_end = 0, clen = 0, total;
	int status;
	char *p;

	for (;;) {
		a->buf[a->have] = '\0';
		if (!hdr_end && (p = strstr(a->buf, "\r\n\r\n"))) {
			char *cl = strcasestr(a->buf, "Content-Length:");

			hdr_end = (size_t)(p - a->buf) + 4;
			clen = cl && cl < p && !head ? strtoul(cl + 15, NULL, 10) : 0;
		}
		if (hdr_end && a->have >= hdr_end + clen)
			break;
		ssize_t k = gnutls_record_recv(c->tls, a->buf + a->have, sizeof(a->buf) - 1 - a->have);

		if (k <= 0)
			return -1;
		a->have += (size_t)k;
	}
	status = atoi(a->buf + 9);
	total = hdr_end + clen;
	if (want && !memmem(a->buf, total, want, strlen(want)))
		status = -2;
	memmove(a->buf, a->buf + total, a->have - total);
	a->have -= total;
	if (body_len)
		*body_len = clen;
	return status;
}

static int tls_client_call(struct tls_client *c, struct answers *a, const char *method,
			   const char *path, size_t *body_len)
{
	return tls_client_send(c, method, path) ? tls_client_answer(c, a, false, NULL, body_len)
						: -1;
}

/* Write system calls (syscw of /proc/PID/io) of d so far. */
static long long writes_of(const struct dlockd_srv *d)
{
	char path[64], line[128];
	long long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/io", (int)d->pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "syscw: %lld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static gnutls_certificate_credentials_t trust_ca(void)
{
	gnutls_certificate_credentials_t cred = NULL;

	if (gnutls_certificate_allocate_credentials(&cred) < 0)
		return NULL;
	if (gnutls_certificate_set_x509_trust_file(cred, pki_path("ca.pem"),
						   GNUTLS_X509_FMT_PEM) != 1) {
		gnutls_certificate_free_credentials(cred);
		return NULL;
	}
	return cred;
}

/* Start d serving HTTPS with the test server certificate, with one more
 * flag (name, value; NULL: none); curl trusts the test CA, and so does
 * *cred (free it). */
static bool https_start(struct dlockd_srv *d, const char *name, const char *value,
			gnutls_certificate_credentials_t *cred)
{
	static struct http_tls t;
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, name, value, NULL };

	*cred = NULL;
	if (!pki_ready())
		return false;
	flags[1] = pki_path("server1.pem");
	flags[3] = pki_path("server1.key");
	t.ca = pki_path("ca.pem");
	http_tls(&t);
	if (dlockd_start(d, NULL, flags) != 0)
		return false;
	*cred = trust_ca();
	return *cred != NULL;
}

/* An answer over HTTPS leaves in one write (libmicrohttpd writes its
 * header and body as two records, two writes, unless dlockd pairs them):
 * 40 answers on a keep-alive connection cost dlockd about 40 writes, not
 * 80; lock answers come at once; a large answer (/metrics) comes whole
 * with small ones after it, and 200 requests pipelined are all answered
 * in order. */
TEST(tls_an_answer_leaves_in_one_write)
{
	enum { N = 40 };
	static struct answers a;
	gnutls_certificate_credentials_t cred;
	const char *n = lockname("onew");
	struct dlockd_srv d;
	struct tls_client c;
	char put[200], del[200], id[200];
	long long w0, writes;
	size_t len = 0;
	int64_t t0;
	double ms;

	CHECK(https_start(&d, "--log-level", "warn", &cred), "start with --tls-cert (see %s)", d.log);
	CHECK(tls_client_open(&c, d.port, cred), "TLS handshake with dlockd");
	a.have = 0;
	CHECK(tls_client_call(&c, &a, "GET", "/healthz", NULL) == 200, "/healthz");
	/* /healthz touches no Redis: its answers are the writes */
	w0 = writes_of(&d);
	for (int i = 0; i < N; i++)
		CHECK(tls_client_call(&c, &a, "GET", "/healthz", NULL) == 200, "/healthz %d", i);
	writes = writes_of(&d) - w0;
	printf("# %d answers over HTTPS: %lld writes by dlockd\n", N, writes);
	/* under valgrind (DLOCKD_PREFIX) the process writes for itself too */
	if (!getenv("DLOCKD_PREFIX"))
		CHECK(w0 >= 0 && writes >= N && writes < N + N / 4,
		      "%d answers cost dlockd %lld writes (want about %d, not %d)", N, writes, N,
		      2 * N);

	snprintf(put, sizeof(put), "/locks/%s?owner=alice&ttl_ms=30000", n);
	snprintf(del, sizeof(del), "/locks/%s?owner=alice", n);
	t0 = mono_ms();
	for (int i = 0; i < 10; i++) {
		CHECK(tls_client_call(&c, &a, "PUT", put, NULL) == 200, "acquire %d", i);
		CHECK(tls_client_call(&c, &a, "DELETE", del, NULL) == 200, "release %d", i);
	}
	ms = (double)(mono_ms() - t0);
	/* a record held and sent late would wait for the kernel's 200 ms
	 * cork timer: 4 s for the 20 */
	CHECK(ms < 2000.0 * slow_factor(), "20 lock answers on one connection took %.0f ms", ms);

	CHECK(tls_client_call(&c, &a, "GET", "/metrics", &len) == 200, "/metrics");
	CHECK(len > 8192, "/metrics is a large answer (%zu bytes)", len);
	CHECK(tls_client_call(&c, &a, "GET", "/healthz", NULL) == 200, "/healthz after /metrics");
	/* HEAD has no body: its header alone must leave */
	CHECK(tls_client_send(&c, "HEAD", "/healthz") &&
	      tls_client_answer(&c, &a, true, NULL, NULL) == 200, "HEAD /healthz answered");

	/* 200 requests sent before any answer is read: all answered, in order */
	for (int i = 0; i < 200; i++) {
		snprintf(id, sizeof(id), "/locks/%s-%d", n, i);
		CHECK(tls_client_send(&c, "GET", id), "pipelined request %d sent", i);
	}
	for (int i = 0; i < 200; i++) {
		snprintf(id, sizeof(id), "%s-%d\"", n, i);
		int st = tls_client_answer(&c, &a, false, id, NULL);

		CHECK(st == 200, "pipelined request %d answered, in its turn: %d (%.80s)", i, st,
		      a.buf);
	}
	tls_client_close(&c);
	gnutls_certificate_free_credentials(cred);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}
/* A waiter over HTTPS that resets its connection as its grant comes: it
 * keeps the lock only if the grant was sent to it (in its socket before
 * the reset, or logged as delivered); a held answer that could not be
 * sent is a grant not delivered, given back at once, not at the lease's
 * end. */
TEST(tls_a_waiter_reset_as_it_is_granted_keeps_only_a_grant_it_was_sent)
{
	enum { ROUNDS = 60 };
	struct http_tls t = { .ca = NULL };
	gnutls_certificate_credentials_t cred;
	const char *n = lockname("tlshang");
	char p[300], who[16];
	struct dlockd_srv d;
	struct tls_client h, w;
	static struct answers a;
	int kept = 0, freed = 0;

	CHECK(https_start(&d, "--threads", "1", &cred), "start with --tls-cert (see %s)", d.log);
	t.ca = pki_path("ca.pem");
	CHECK(tls_client_open(&h, d.port, cred), "the holder's TLS connection");
	a.have = 0;
	for (int i = 0; i < ROUNDS; i++) {
		bool sent, held;

		snprintf(p, sizeof(p), "/locks/%s?owner=h&ttl_ms=30000", n);
		CHECK(tls_client_call(&h, &a, "PUT", p, NULL) == 200, "round %d: h takes %s", i, n);
		snprintf(who, sizeof(who), "w%d", i);
		snprintf(p, sizeof(p), "/locks/%s?owner=%s&ttl_ms=30000&wait_ms=10000", n, who);
		CHECK(tls_client_open(&w, d.port, cred) && tls_client_send(&w, "PUT", p),
		      "round %d: w asks over TLS", i);
		CHECK(wait_waiters(&d, 1, 5000 * slow_factor()), "round %d: w waits", i);
		snprintf(p, sizeof(p), "/locks/%s?owner=h", n);
		CHECK(tls_client_send(&h, "DELETE", p), "round %d: h releases", i);
		if (i % 4)
			sleep_ms(i % 4);	/* where w resets, against its grant */
		sent = poll(&(struct pollfd){ .fd = w.fd, .events = POLLIN }, 1, 0) > 0;
		gnutls_deinit(w.tls);
		raw_reset(w.fd);
		CHECK(tls_client_answer(&h, &a, false, NULL, NULL) == 200,
		      "round %d: h's release answered", i);
		CHECK(WAIT_FOR(waiters_of(&d) == 0, 3000), "round %d: nobody waits", i);
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
	printf("# %d waiters over HTTPS reset as granted: %d had been sent their grant, %d "
	       "given back\n", ROUNDS, kept, freed);
	/* clients that reset right after asking: their answers cannot be
	 * written; that is libmicrohttpd's to log (one line), not dlockd's
	 * at warn too */
	for (int i = 0; i < 20; i++) {
		CHECK(tls_client_open(&w, d.port, cred) && tls_client_send(&w, "GET", "/healthz"),
		      "reset client %d asks", i);
		gnutls_deinit(w.tls);
		raw_reset(w.fd);
	}
	CHECK(WAIT_FOR(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == 200, 3000),
	      "dlockd serves on after the resets");
	CHECK(file_lines_with(d.log, "\"level\":\"warn\"", "could not be sent", NULL) == 0,
	      "no warning of dlockd's own for the resets (see %s)", d.log);
	tls_client_close(&h);
	gnutls_certificate_free_credentials(cred);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* A client that pipelines many requests over HTTPS and reads their
 * answers only later (a batch job writing from one thread and reading
 * from another): every answer comes, in order, as over plain HTTP, and
 * every grant it is sent is one it holds. Meanwhile another client is
 * served at once. */
struct late_writer {
	struct tls_client *c;
	const char *n;
	int count;
	bool ok;
};

static void *late_write(void *arg)
{
	struct late_writer *w = arg;
	char path[200];

	w->ok = true;
	for (int i = 0; i < w->count && w->ok; i++) {
		if (i % 100 == 0)
			snprintf(path, sizeof(path), "/locks/%s-%d?owner=late&ttl_ms=120000", w->n, i);
		else
			snprintf(path, sizeof(path), "/healthz");
		w->ok = tls_client_send(w->c, i % 100 ? "GET" : "PUT", path);
	}
	return NULL;
}

TEST(tls_a_client_reading_late_gets_every_answer)
{
	enum { COUNT = 20000 };
	struct http_tls t = { .ca = NULL };
	static struct answers a;
	gnutls_certificate_credentials_t cred;
	struct late_writer w = { .n = lockname("late"), .count = COUNT };
	struct dlockd_srv d;
	struct tls_client c;
	pthread_t th;
	int64_t worst = 0, start;
	int got = 0, granted = 0;

	CHECK(https_start(&d, "--log-level", "warn", &cred), "start with --tls-cert (see %s)", d.log);
	t.ca = pki_path("ca.pem");
	CHECK(tls_client_open(&c, d.port, cred), "TLS handshake with dlockd");
	w.c = &c;
	CHECK(pthread_create(&th, NULL, late_write, &w) == 0, "the writer thread");
	/* 3 s of answers piling up unread (megabytes: the sockets fill) */
	start = mono_ms();
	while (mono_ms() - start < 3000) {
		int64_t t0 = mono_ms();

		CHECK(fresh(d.base, &t, "GET", "/healthz", NULL, 0) == 200,
		      "another client is served while one reads nothing");
		if (mono_ms() - t0 > worst)
			worst = mono_ms() - t0;
		sleep_ms(200);
	}
	a.have = 0;
	for (int i = 0; i < COUNT; i++) {
		int st = tls_client_answer(&c, &a, false, NULL, NULL);

		if (st != 200)
			break;
		got++;
		granted += i % 100 == 0;
	}
	pthread_join(th, NULL);
	printf("# %d requests pipelined over HTTPS, read after 3 s: %d answered, %d grants; the "
	       "other client's slowest call %ld ms\n", COUNT, got, granted, (long)worst);
	CHECK(w.ok, "every request was written");
	CHECK(got == COUNT, "%d of %d answers came", got, COUNT);
	for (int i = 0; i < COUNT; i += 100)
		CHECK(flag_of(&d, "held", "/locks/%s-%d?owner=late", w.n, i) == 1,
		      "the lock of request %d is held, as its answer said", i);
	CHECK(worst < 1000 * slow_factor(), "the other client's slowest call took %ld ms",
	      (long)worst);
	CHECK(!file_contains(d.log, "could not be sent"), "no answer held back (see %s)", d.log);
	tls_client_close(&c);
	gnutls_certificate_free_credentials(cred);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* A client with a small receive buffer (1 KB) that pipelines 77 listings
 * and reads them 700 bytes at a time: every answer comes at the pace it
 * reads, as over plain HTTP (GnuTLS' writes through a push function that
 * takes one record at a time left a window that small filled only by
 * TCP's 200 ms probes: 15 s and more). */
TEST(tls_a_client_with_a_small_window_gets_its_answers_at_once)
{
	enum { LOCKS = 70, ASKS = 77 };
	static char buf[1 << 20];
	gnutls_certificate_credentials_t cred;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *n = lockname("win");
	struct dlockd_srv d;
	struct tls_client c;
	char path[200];
	int small = 1024, rc, got = 0;
	size_t have = 0;
	int64_t t0;
	double ms;

	CHECK(https_start(&d, "--log-level", "warn", &cred), "start with --tls-cert (see %s)", d.log);
	for (int i = 0; i < LOCKS; i++) {
		snprintf(path, sizeof(path), "%s-%d", n, i);
		CHECK(lock_hold(&d, path, "o", 120000), "take %s", path);
	}
	memset(&c, 0, sizeof(c));
	c.fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	sa.sin_port = htons((uint16_t)d.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(connect(c.fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
	gnutls_init(&c.tls, GNUTLS_CLIENT);
	gnutls_set_default_priority(c.tls);
	gnutls_credentials_set(c.tls, GNUTLS_CRD_CERTIFICATE, cred);
	gnutls_transport_set_int(c.tls, c.fd);
	do
		rc = gnutls_handshake(c.tls);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	CHECK(rc == 0, "TLS handshake with a 1 KB receive buffer");
	t0 = mono_ms();
	for (int i = 0; i < ASKS; i++) {
		snprintf(path, sizeof(path), "/locks?limit=%d&prefix=%s", 1 + i % LOCKS, n);
		CHECK(tls_client_send(&c, "GET", path), "listing %d asked", i);
	}
	/* 700 bytes a read, 0.3 ms apart: 230 KB in about 0.1 s of sleeps */
	while (got < ASKS && mono_ms() - t0 < 30000) {
		ssize_t k;

		usleep(300);
		k = gnutls_record_recv(c.tls, buf + have, have + 700 < sizeof(buf) ? 700 : 0);
		if (k <= 0)
			break;
		have += (size_t)k;
		buf[have] = '\0';
		got = 0;
		for (const char *p = buf; (p = strstr(p, "HTTP/1.1 200")); p++)
			got++;
	}
	ms = (double)(mono_ms() - t0);
	printf("# %d listings pipelined over HTTPS to a 1 KB receive buffer: %d answered in %.0f "
	       "ms\n", ASKS, got, ms);
	CHECK(got == ASKS, "%d of %d listings answered", got, ASKS);
	CHECK(ms < 5000.0 * slow_factor(), "they took %.0f ms", ms);
	tls_client_close(&c);
	gnutls_certificate_free_credentials(cred);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}
