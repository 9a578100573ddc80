/* redis_tls_session.c -- a client TLS session to Redis, set up and judged
 * the same way whichever code moves its bytes (redis_tls_session.h).
 *
 * Verification is GnuTLS': the chain against --redis-ca (or the system's
 * trust store), and the name against the host of the URL (or the address
 * a sentinel or a cluster named): a DNS name is also sent as SNI, an IP
 * address is checked against the certificate's IP addresses. It runs
 * inside the handshake (a session verify function), so a certificate
 * refused ends the handshake with an alert and nothing was sent.
 *
 * A failure -- a handshake refused, a certificate not trusted, an alert
 * later (a server that wants a client certificate says so after a TLS
 * 1.3 handshake) -- is logged with host:port and the reason by whoever
 * moves the bytes, through redis_tls_report_failure: the same failure
 * for the same host:port at error level once, again only at debug until
 * the server has answered through a session.
 *
 * Threads: the credentials are set before any session is made and only
 * read afterwards; a session is its owner's; the failure table has its
 * own mutex. */
#include "service/redis/redis_tls_session.h"

#include "service/base/log.h"

#include <arpa/inet.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* host:port pairs whose last failure is remembered, to log it once. */
#define FAILURES_MAX 32

static struct {
	gnutls_certificate_credentials_t cred;	/* NULL: not loaded */
	bool client_cert;
} C;

/* ----- Logging a failure once ----- */

static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;
/* The reasons logged for one host:port since it last worked: a few, as a
 * failing connection may fail in more than one way in turn (a TLS 1.3
 * alert read, or lost to the reset that follows it). */
#define FAILURE_WHYS 4
static struct failure {
	char where[300];	/* "host:port"; "" free */
	char why[FAILURE_WHYS][REDIS_TLS_WHY_MAX];
	unsigned next;		/* the slot of why the next new reason takes */
} failures[FAILURES_MAX];
static unsigned failures_next;	/* the slot reused when all are taken */

void redis_tls_report_failure(const char *host, int port, const char *why)
{
	char where[300];
	struct failure *f = NULL;
	bool again;

	snprintf(where, sizeof(where), "%s:%d", host, port);
	pthread_mutex_lock(&failures_lock);
	for (unsigned i = 0; i < FAILURES_MAX && !f; i++)
		if (!strcmp(failures[i].where, where))
			f = &failures[i];
	if (!f) {
		f = &failures[failures_next];
		failures_next = (failures_next + 1) % FAILURES_MAX;
		memset(f, 0, sizeof(*f));
		snprintf(f->where, sizeof(f->where), "%s", where);
	}
	again = false;
	for (unsigned i = 0; i < FAILURE_WHYS && !again; i++)
		again = !strcmp(f->why[i], why);
	if (!again) {
		snprintf(f->why[f->next], sizeof(f->why[f->next]), "%s", why);
		f->next = (f->next + 1) % FAILURE_WHYS;
	}
	pthread_mutex_unlock(&failures_lock);
	if (again)
		log_debug("redis tls %s: %s (again)", where, why);
	else
		log_error("redis tls %s: %s", where, why);
}

void redis_tls_session_answered(struct redis_tls_session *ts)
{
	char where[300];
	bool was = false;

	if (ts->answered)
		return;
	ts->answered = true;
	snprintf(where, sizeof(where), "%s:%d", ts->host, ts->port);
	pthread_mutex_lock(&failures_lock);
	for (unsigned i = 0; i < FAILURES_MAX; i++)
		if (!strcmp(failures[i].where, where)) {
			failures[i].where[0] = '\0';
			was = true;
		}
	pthread_mutex_unlock(&failures_lock);
	if (was)
		log_info("redis tls %s: connected and verified again", where);
}

/* ----- A session ----- */

static bool is_ip(const char *host)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* Inside the handshake, once the server's certificate is in: the chain
 * against the trust list, and its name against ts->host. */
static int verify_server(gnutls_session_t s)
{
	struct redis_tls_session *ts = gnutls_session_get_ptr(s);
	unsigned status = 0;
	int rc = gnutls_certificate_verify_peers3(s, ts->host, &status);

	if (rc < 0 || status) {
		ts->verify_refused = true;
		ts->verify_status = rc < 0 ? GNUTLS_CERT_INVALID : status;
		return GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
	}
	return 0;
}

int redis_tls_session_init(struct redis_tls_session *ts, const char *host, int port, char *why,
			   size_t len)
{
	memset(ts, 0, sizeof(*ts));
	snprintf(ts->host, sizeof(ts->host), "%s", host);
	ts->port = port;
	if (!C.cred) {
		snprintf(why, len, "redis tls is not set up");
		return -1;
	}
	if (gnutls_init(&ts->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0) {
		ts->s = NULL;
		snprintf(why, len, "cannot make a TLS session");
		return -1;
	}
	gnutls_session_set_ptr(ts->s, ts);
	if (gnutls_set_default_priority(ts->s) < 0 ||
	    gnutls_credentials_set(ts->s, GNUTLS_CRD_CERTIFICATE, C.cred) < 0 ||
	    (!is_ip(host) &&
	     gnutls_server_name_set(ts->s, GNUTLS_NAME_DNS, host, strlen(host)) < 0)) {
		snprintf(why, len, "cannot set up a TLS session");
		redis_tls_session_deinit(ts);
		return -1;
	}
	gnutls_session_set_verify_function(ts->s, verify_server);
	gnutls_handshake_set_timeout(ts->s, GNUTLS_INDEFINITE_TIMEOUT);	/* the caller's */
	return 0;
}

void redis_tls_session_deinit(struct redis_tls_session *ts)
{
	if (ts->s)
		gnutls_deinit(ts->s);
	ts->s = NULL;
}

int redis_tls_session_handshake(struct redis_tls_session *ts, bool *write, char *why,
				size_t len)
{
	int rc = gnutls_handshake(ts->s);

	if (rc == GNUTLS_E_SUCCESS) {
		ts->handshaken = true;
		return 1;
	}
	if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED ||
	    (rc < 0 && !gnutls_error_is_fatal(rc) && rc != GNUTLS_E_WARNING_ALERT_RECEIVED)) {
		*write = gnutls_record_get_direction(ts->s) == 1;
		return 0;
	}
	redis_tls_session_describe(ts, rc, why, len);
	return -1;
}

/* The server ended a session after the handshake before it answered
 * anything: under TLS 1.3 how it refuses a client certificate (or its
 * absence), when its alert is lost to the reset that follows. */
static void closed_unanswered(const struct redis_tls_session *ts, char *why, size_t len)
{
	bool asked = gnutls_certificate_client_get_request_status(ts->s);

	snprintf(why, len, "the server closed the TLS session before answering%s",
		 !asked ? "" : C.client_cert
			 ? " (it asked for a client certificate: does it accept --redis-cert, "
			   "signed by a CA in its tls-ca-cert-file?)"
			 : " (it asked for a client certificate and dlockd has none: give "
			   "--redis-cert and --redis-key)");
}

void redis_tls_session_closed(const struct redis_tls_session *ts, char *why, size_t len)
{
	why[0] = '\0';
	if (!ts->answered)
		closed_unanswered(ts, why, len);
	else
		log_debug("redis tls %s:%d: the server closed the connection", ts->host,
			  ts->port);
}

void redis_tls_session_describe(const struct redis_tls_session *ts, int rc, char *why,
				size_t len)
{
	gnutls_datum_t out = { NULL, 0 };

	if (ts->verify_refused) {
		unsigned st = ts->verify_status;

		if (gnutls_certificate_verification_status_print(st, GNUTLS_CRT_X509, &out, 0) < 0)
			out.data = NULL;
		while (out.data && out.size && out.data[out.size - 1] == ' ')
			out.data[--out.size] = '\0';	/* GnuTLS ends it with a space */
		snprintf(why, len, "the server's certificate is refused: %s%s%s",
			 out.data ? (const char *)out.data : "not trusted",
			 st & GNUTLS_CERT_SIGNER_NOT_FOUND
				 ? " (give the CA that signed it with --redis-ca)" : "",
			 st & GNUTLS_CERT_UNEXPECTED_OWNER
				 ? " (the certificate does not name the host dlockd connects to)"
				 : "");
		gnutls_free(out.data);
		return;
	}
	if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED || rc == GNUTLS_E_WARNING_ALERT_RECEIVED) {
		gnutls_alert_description_t a = gnutls_alert_get(ts->s);
		const char *name = gnutls_alert_get_name(a);
		bool wants_cert = a == GNUTLS_A_CERTIFICATE_REQUIRED ||
				  a == GNUTLS_A_HANDSHAKE_FAILURE || a == GNUTLS_A_BAD_CERTIFICATE;

		snprintf(why, len, "the server ended the TLS session with the alert '%s'%s",
			 name ? name : "unknown",
			 wants_cert && !C.client_cert
				 ? " (it may require a client certificate: give --redis-cert and "
				   "--redis-key)"
			 : a == GNUTLS_A_UNKNOWN_CA || a == GNUTLS_A_BAD_CERTIFICATE ||
					 a == GNUTLS_A_CERTIFICATE_UNKNOWN
				 ? " (it does not accept --redis-cert: is it signed by a CA in the "
				   "server's tls-ca-cert-file?)" : "");
		return;
	}
	if (!ts->handshaken)
		snprintf(why, len, "TLS handshake failed: %s (is this a TLS port of Redis?)",
			 gnutls_strerror(rc));
	else if (!ts->answered)
		closed_unanswered(ts, why, len);
	else
		snprintf(why, len, "TLS session failed: %s", gnutls_strerror(rc));
}

/* ----- The credentials ----- */

/* The trust list into C.cred: 0, or -1 after printing what is wrong. */
static int load_trust(const char *ca)
{
	int n = ca ? gnutls_certificate_set_x509_trust_file(C.cred, ca, GNUTLS_X509_FMT_PEM)
		   : gnutls_certificate_set_x509_system_trust(C.cred);

	if (n > 0)
		return 0;
	if (ca)
		fprintf(stderr, "dlockd: --redis-ca %s: %s\n", ca,
			n < 0 ? gnutls_strerror(n) : "no PEM certificate in it");
	else
		fprintf(stderr, "dlockd: --redis is TLS but the system trust store has no "
			"certificate (%s): give the CA of Redis' certificate with --redis-ca\n",
			n < 0 ? gnutls_strerror(n) : "empty");
	return -1;
}

int redis_tls_session_load(const char *ca, const char *cert, const char *key)
{
	int rc;

	if (ca && !*ca)
		ca = NULL;
	if (gnutls_certificate_allocate_credentials(&C.cred) < 0) {
		C.cred = NULL;
		fprintf(stderr, "dlockd: out of memory for the redis TLS credentials\n");
		return -1;
	}
	if (load_trust(ca) < 0)
		goto fail;
	if (cert && *cert) {
		rc = gnutls_certificate_set_x509_key_file2(C.cred, cert, key, GNUTLS_X509_FMT_PEM,
							   NULL, 0);
		if (rc < 0) {
			fprintf(stderr, "dlockd: --redis-cert %s with --redis-key %s: %s%s\n", cert,
				key, gnutls_strerror(rc),
				rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH ? "" :
				" (both PEM, the key not encrypted)");
			goto fail;
		}
		C.client_cert = true;
	}
	return 0;
fail:
	redis_tls_session_unload();
	return -1;
}

bool redis_tls_session_loaded(void)
{
	return C.cred != NULL;
}

void redis_tls_session_unload(void)
{
	if (C.cred)
		gnutls_certificate_free_credentials(C.cred);
	C.cred = NULL;
	C.client_cert = false;
}
