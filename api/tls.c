/* tls.c -- the credentials dlockd serves HTTPS with, and their rotation.
 *
 * The files of --tls-cert, --tls-key and --tls-client-ca are read whole
 * into one struct tls_creds (a GnuTLS certificate credentials object:
 * chain, key, and the client CA as its trust list), checked file by file
 * so that an error names the file at fault. The current one is swapped
 * under a mutex, and shared by reference: every TLS session takes a
 * reference before its handshake (tls_session_start, which replaces the
 * daemon's credentials on the session with it) and gives it back once
 * the session is gone. So a reload changes what new connections get,
 * while connections made before keep the credentials of their handshake
 * until they close; the last one out frees the old version.
 *
 * A reload (SIGHUP, or a file changed on disk: file_look.h, as for
 * --auth-file) with a bad file changes nothing and is logged once per
 * change; the files are looked at before they are read, so a certificate
 * and key rewritten one after the other (a pair that does not match for
 * a moment) are read again at the next look.
 *
 * Client certificates (mTLS): the session requires one, and a verify
 * callback run inside the handshake checks it against the trust list of
 * the session's own credentials, so a new client CA applies to new
 * connections like a new certificate does. A client without a
 * certificate, or with one the CA did not sign, fails its handshake.
 *
 * A session's writes can go through a tls_out, which sends two records
 * with one write (server.c does so for an answer's header and body). */
#include "api/tls.h"

#include "service/base/file_look.h"
#include "service/base/log.h"
#include "service/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* A certificate or key file is small; past this it is something else. */
#define TLS_FILE_MAX (1 << 20)

enum { F_CERT, F_KEY, F_CA, F_COUNT };

static const char *const flag_of[F_COUNT] = { "--tls-cert", "--tls-key", "--tls-client-ca" };

struct tls_creds {
	gnutls_certificate_credentials_t cred;
	unsigned refs;			/* atomic: current's, and one per session */
	char *cert_pem, *key_pem;	/* the files as read */
	size_t key_len;
	char subject[256];		/* of the certificate, for the log */
	char expires[32];		/* its notAfter, UTC */
	bool verify_clients;
};

static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tls_creds *current;	/* NULL: TLS off */
/* The files (NULL: not given) and how they looked when last read; main
 * thread only. */
static char *paths[F_COUNT];
static struct file_look last_looks[F_COUNT];

/* ----- Reading ----- */

/* The whole file at path, NUL-terminated, in *out (the caller frees it)
 * and its length in *len; -1 with why ("<flag> <path>: <problem>"). */
static int file_slurp(int which, char **out, size_t *len, char *why, size_t why_len)
{
	const char *path = paths[which];
	/* O_NONBLOCK: a FIFO (or a device) at the path must not hold up the
	 * main thread, which also answers SIGTERM; only a regular file is read */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	FILE *f;

	*out = NULL;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		snprintf(why, why_len, "%s %s: not a regular file", flag_of[which], path);
		close(fd);
		return -1;
	}
	f = fd >= 0 ? fdopen(fd, "rb") : NULL;
	if (!f) {
		snprintf(why, why_len, "%s %s: %s", flag_of[which], path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	buf = xmalloc(TLS_FILE_MAX + 1);
	n = fread(buf, 1, TLS_FILE_MAX + 1, f);
	if (ferror(f) || n > TLS_FILE_MAX || n == 0) {
		snprintf(why, why_len, "%s %s: %s", flag_of[which], path,
			 ferror(f) ? strerror(errno) : n ? "larger than 1 MiB" : "the file is empty");
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* The subject and expiry of the first certificate of the chain pem, into
 * c; -1 with why when pem holds no certificate. */
static int cert_check(struct tls_creds *c, const gnutls_datum_t *pem, char *why, size_t why_len)
{
	gnutls_x509_crt_t *crts = NULL;
	unsigned n = 0;
	gnutls_datum_t dn = { NULL, 0 };
	time_t until, from;
	struct tm tm;
	int rc;

	rc = gnutls_x509_crt_list_import2(&crts, &n, pem, GNUTLS_X509_FMT_PEM, 0);
	if (rc < 0 || n == 0) {
		snprintf(why, why_len, "%s %s: no PEM certificate in it (%s)", flag_of[F_CERT],
			 paths[F_CERT], rc < 0 ? gnutls_strerror(rc) : "none found");
		return -1;
	}
	if (gnutls_x509_crt_get_dn3(crts[0], &dn, 0) == 0)
		snprintf(c->subject, sizeof(c->subject), "%s", (const char *)dn.data);
	gnutls_free(dn.data);
	until = gnutls_x509_crt_get_expiration_time(crts[0]);
	from = gnutls_x509_crt_get_activation_time(crts[0]);
	if (until != (time_t)-1 && gmtime_r(&until, &tm))
		strftime(c->expires, sizeof(c->expires), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* every client that checks would refuse it: keep what is in force */
	if (until != (time_t)-1 && until < time(NULL))
		snprintf(why, why_len, "%s %s: the certificate expired at %s", flag_of[F_CERT],
			 paths[F_CERT], c->expires);
	else if (from != (time_t)-1 && from > time(NULL) + 300)
		snprintf(why, why_len, "%s %s: the certificate is not valid yet", flag_of[F_CERT],
			 paths[F_CERT]);
	for (unsigned i = 0; i < n; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
	return (until != (time_t)-1 && until < time(NULL)) ||
	       (from != (time_t)-1 && from > time(NULL) + 300) ? -1 : 0;
}

/* Is pem a private key GnuTLS can use? -1 with why if not. */
static int key_check(const gnutls_datum_t *pem, char *why, size_t why_len)
{
	gnutls_x509_privkey_t key;
	int rc;

	if (gnutls_x509_privkey_init(&key) < 0) {
		snprintf(why, why_len, "%s %s: out of memory", flag_of[F_KEY], paths[F_KEY]);
		return -1;
	}
	rc = gnutls_x509_privkey_import2(key, pem, GNUTLS_X509_FMT_PEM, NULL, 0);
	gnutls_x509_privkey_deinit(key);
	if (rc < 0) {
		snprintf(why, why_len, "%s %s: not a PEM private key dlockd can use (%s; an "
			 "encrypted key is not supported)", flag_of[F_KEY], paths[F_KEY],
			 gnutls_strerror(rc));
		return -1;
	}
	return 0;
}

static void creds_free(struct tls_creds *c)
{
	if (!c)
		return;
	if (c->cred)
		gnutls_certificate_free_credentials(c->cred);
	free(c->cert_pem);
	if (c->key_pem) {
		/* scrub the key before giving the memory back */
		memset(c->key_pem, 0, c->key_len);
		free(c->key_pem);
	}
	free(c);
}

/* Read every file into new credentials; NULL with why (naming the file
 * at fault) when one is unreadable or wrong. */
static struct tls_creds *creds_read(char *why, size_t why_len)
{
	struct tls_creds *c = xcalloc(1, sizeof(*c));
	char *ca_pem = NULL;
	size_t cert_len = 0, ca_len = 0;
	gnutls_datum_t cert, key, ca;
	int rc;

	if (file_slurp(F_CERT, &c->cert_pem, &cert_len, why, why_len) < 0 ||
	    file_slurp(F_KEY, &c->key_pem, &c->key_len, why, why_len) < 0 ||
	    (paths[F_CA] && file_slurp(F_CA, &ca_pem, &ca_len, why, why_len) < 0))
		goto fail;
	cert = (gnutls_datum_t){ (unsigned char *)c->cert_pem, (unsigned)cert_len };
	key = (gnutls_datum_t){ (unsigned char *)c->key_pem, (unsigned)c->key_len };
	if (cert_check(c, &cert, why, why_len) < 0 || key_check(&key, why, why_len) < 0)
		goto fail;
	if (gnutls_certificate_allocate_credentials(&c->cred) < 0) {
		c->cred = NULL;
		snprintf(why, why_len, "out of memory for the TLS credentials");
		goto fail;
	}
	rc = gnutls_certificate_set_x509_key_mem2(c->cred, &cert, &key, GNUTLS_X509_FMT_PEM,
						  NULL, 0);
	if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH) {
		snprintf(why, why_len, "%s %s is not the key of the certificate in %s %s",
			 flag_of[F_KEY], paths[F_KEY], flag_of[F_CERT], paths[F_CERT]);
		goto fail;
	}
	if (rc < 0) {
		snprintf(why, why_len, "%s %s with %s %s: %s", flag_of[F_CERT], paths[F_CERT],
			 flag_of[F_KEY], paths[F_KEY], gnutls_strerror(rc));
		goto fail;
	}
	if (ca_pem) {
		ca = (gnutls_datum_t){ (unsigned char *)ca_pem, (unsigned)ca_len };
		rc = gnutls_certificate_set_x509_trust_mem(c->cred, &ca, GNUTLS_X509_FMT_PEM);
		if (rc <= 0) {
			snprintf(why, why_len, "%s %s: no PEM certificate in it (%s)",
				 flag_of[F_CA], paths[F_CA],
				 rc < 0 ? gnutls_strerror(rc) : "none found");
			goto fail;
		}
		c->verify_clients = true;
	}
	free(ca_pem);
	c->refs = 1;
	return c;
fail:
	free(ca_pem);
	creds_free(c);
	return NULL;
}

/* ----- Loading and reloading ----- */

static void look_all(struct file_look looks[F_COUNT])
{
	for (int i = 0; i < F_COUNT; i++)
		looks[i] = paths[i] ? file_look_at(paths[i]) : (struct file_look){ 0 };
}

static void swap_in(struct tls_creds *c)
{
	struct tls_creds *old;

	pthread_mutex_lock(&current_lock);
	old = current;
	current = c;
	pthread_mutex_unlock(&current_lock);
	tls_creds_put(old);	/* freed when its last session is gone */
}

int tls_load(const char *cert, const char *key, const char *client_ca)
{
	struct tls_creds *c;
	char why[1024];

	if (!cert || !*cert)
		return 0;
	paths[F_CERT] = xstrdup(cert);
	paths[F_KEY] = xstrdup(key);
	paths[F_CA] = client_ca && *client_ca ? xstrdup(client_ca) : NULL;
	look_all(last_looks);	/* before reading: a change meanwhile is seen */
	c = creds_read(why, sizeof(why));
	if (!c) {
		fprintf(stderr, "dlockd: %s\n", why);
		tls_release();
		return -1;
	}
	swap_in(c);
	log_info("tls: serving https with the certificate of %s (expires %s)%s", c->subject,
		 c->expires, c->verify_clients ? "; clients need a certificate signed by "
		 "--tls-client-ca" : "");
	return 0;
}

/* Read the files again (trigger says why, for the log), looked at as looks. */
static int reload(const struct file_look looks[F_COUNT], const char *trigger)
{
	struct tls_creds *c;
	char why[1024];

	memcpy(last_looks, looks, sizeof(last_looks));
	c = creds_read(why, sizeof(why));
	if (!c) {
		log_error("tls certificates not reloaded (%s), keeping the ones in force: %s",
			  trigger, why);
		return -1;
	}
	swap_in(c);
	log_info("tls certificates reloaded (%s): new connections get the certificate of %s "
		 "(expires %s)", trigger, c->subject, c->expires);
	return 0;
}

int tls_reload(void)
{
	struct file_look looks[F_COUNT];

	if (!paths[F_CERT])
		return 0;
	look_all(looks);
	return reload(looks, "SIGHUP");
}

int tls_reload_if_changed(void)
{
	struct file_look looks[F_COUNT];

	if (!paths[F_CERT])
		return 0;
	look_all(looks);
	for (int i = 0; i < F_COUNT; i++)
		if (paths[i] && !file_look_same(&looks[i], &last_looks[i]))
			return reload(looks, "a file changed on disk");
	return 0;
}

bool tls_enabled(void)
{
	return paths[F_CERT] != NULL;
}

/* ----- Sharing ----- */

struct tls_creds *tls_creds_get(void)
{
	struct tls_creds *c;

	pthread_mutex_lock(&current_lock);
	c = current;
	if (c)
		__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&current_lock);
	return c;
}

void tls_creds_put(struct tls_creds *c)
{
	if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
		creds_free(c);
}

const char *tls_creds_cert_pem(const struct tls_creds *c)
{
	return c->cert_pem;
}

const char *tls_creds_key_pem(const struct tls_creds *c)
{
	return c->key_pem;
}

/* GnuTLS' verify callback, inside the handshake once the client's
 * certificate is in: 0 lets the handshake go on, anything else fails it.
 * The trust list is that of the session's credentials (the CA in force
 * when the connection came). */
static int verify_client(gnutls_session_t s)
{
	gnutls_datum_t text = { NULL, 0 }, dn = { NULL, 0 };
	const gnutls_datum_t *peers;
	unsigned status = 0, npeers = 0;
	gnutls_x509_crt_t crt;
	int rc;

	/* a certificate whose extended key usage names purposes must name
	 * TLS client authentication: a server's certificate is no client's */
	gnutls_typed_vdata_st purpose = { .type = GNUTLS_DT_KEY_PURPOSE_OID,
					  .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT };

	rc = gnutls_certificate_verify_peers(s, &purpose, 1, &status);
	if (rc == 0 && status == 0)
		return 0;
	if (rc == 0)
		gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0);
	peers = gnutls_certificate_get_peers(s, &npeers);
	if (peers && npeers && gnutls_x509_crt_init(&crt) == 0) {
		if (gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) == 0)
			gnutls_x509_crt_get_dn3(crt, &dn, 0);
		gnutls_x509_crt_deinit(crt);
	}
	log_info("tls: client certificate of %s refused: %s",
		 dn.data ? (const char *)dn.data : "(unreadable)",
		 text.data ? (const char *)text.data : gnutls_strerror(rc));
	gnutls_free(text.data);
	gnutls_free(dn.data);
	return -1;
}

struct tls_creds *tls_session_start(void *session)
{
	gnutls_session_t s = session;
	struct tls_creds *c = tls_creds_get();

	if (!c)
		return NULL;
	if (gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, c->cred) < 0) {
		tls_creds_put(c);
		return NULL;
	}
	if (c->verify_clients) {
		gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
		gnutls_session_set_verify_function(s, verify_client);
	}
	return c;
}

void tls_release(void)
{
	swap_in(NULL);
	for (int i = 0; i < F_COUNT; i++) {
		free(paths[i]);
		paths[i] = NULL;
	}
}

/* A session's writes: its socket, and a record held to leave with the
 * next one. GnuTLS hands tls_out_push what it has to write as a vector
 * (its vec_push: with a push function that takes one buffer at a time,
 * GnuTLS' writes to a client with a small receive window were left to
 * TCP's 200 ms probes); a record held is reported written, and the next
 * call writes both with one writev. What does not fit is reported to
 * GnuTLS as not written (EAGAIN) for the next record, so libmicrohttpd
 * waits until the socket can take more and GnuTLS writes that record
 * again: the held bytes go first, in order, with no buffer of dlockd's
 * own waiting on the socket. writev(2) and write(2), as SIGPIPE is
 * ignored (main.c): they count in /proc/PID/io's syscw, which
 * tests/integration/test_tls.c reads. */
#define TLS_OUT_IOV 16

struct tls_out {
	int fd;
	bool pair_next;		/* hold the next record */
	unsigned char *held;	/* a record held (malloc'd), or NULL */
	size_t held_len, held_at;	/* its length, and how much has left */
};

static ssize_t tls_out_push(gnutls_transport_ptr_t p, const giovec_t *vec, int cnt)
{
	struct tls_out *o = p;
	struct iovec iov[1 + TLS_OUT_IOV];
	size_t rest, len = 0;
	ssize_t n;
	int k = 0;

	if (cnt > TLS_OUT_IOV)
		cnt = TLS_OUT_IOV;	/* GnuTLS takes a short write */
	for (int i = 0; i < cnt; i++)
		len += vec[i].iov_len;
	if (o->pair_next && !o->held) {
		o->pair_next = false;
		if ((o->held = malloc(len))) {
			for (int i = 0; i < cnt; i++) {
				memcpy(o->held + o->held_len, vec[i].iov_base, vec[i].iov_len);
				o->held_len += vec[i].iov_len;
			}
			o->held_at = 0;
			return (ssize_t)len;
		}
	}
	rest = o->held ? o->held_len - o->held_at : 0;
	if (rest)
		iov[k++] = (struct iovec){ o->held + o->held_at, rest };
	for (int i = 0; i < cnt; i++)
		iov[k++] = (struct iovec){ vec[i].iov_base, vec[i].iov_len };
	n = writev(o->fd, iov, k);
	if (n < 0 || !o->held)
		return n;
	if ((size_t)n <= rest) {
		/* this record again, once there is room */
		o->held_at += (size_t)n;
		if (o->held_at == o->held_len) {
			free(o->held);
			o->held = NULL;
			o->held_len = 0;
		}
		errno = EAGAIN;
		return -1;
	}
	free(o->held);
	o->held = NULL;
	o->held_len = 0;
	return n - (ssize_t)rest;
}

struct tls_out *tls_out_attach(void *s, int fd)
{
	struct tls_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->fd = fd;
	/* reads stay GnuTLS' own, on fd */
	gnutls_transport_set_ptr2(s, (gnutls_transport_ptr_t)(intptr_t)fd, o);
	gnutls_transport_set_vec_push_function(s, tls_out_push);
	return o;
}

void tls_out_pair_next(struct tls_out *o)
{
	o->pair_next = true;
}

int tls_out_flush(struct tls_out *o)
{
	ssize_t n;

	o->pair_next = false;
	if (!o->held)
		return 0;
	n = write(o->fd, o->held + o->held_at, o->held_len - o->held_at);
	if (n >= 0)
		o->held_at += (size_t)n;
	if (o->held_at == o->held_len) {
		free(o->held);
		o->held = NULL;
		o->held_len = 0;
		return 0;
	}
	return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? -1 : 1;
}

void tls_out_free(struct tls_out *o)
{
	if (o)
		free(o->held);
	free(o);
}
