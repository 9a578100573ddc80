/* tls.h -- the certificate dlockd serves HTTPS with (--tls-cert,
 * --tls-key) and the CA that must have signed its clients' certificates
 * (--tls-client-ca), re-read on SIGHUP and when the files change on disk.
 * Knows GnuTLS, not HTTP: the server hands each new connection's TLS
 * session to tls_session_start() before its handshake. */
#ifndef DLOCKD_TLS_H
#define DLOCKD_TLS_H

#include <stdbool.h>

/* One version of the credentials (certificate chain, key, client CA),
 * shared by reference: by the module while it is the current one, and by
 * each TLS session given it, until that session is gone. */
struct tls_creds;

/* Read the files (cert NULL or "": TLS stays off; client_ca NULL or "":
 * clients need no certificate). Returns 0, or -1 after printing which
 * file is wrong and how on stderr. Main thread, before the server starts. */
int tls_load(const char *cert, const char *key, const char *client_ca);
/* Read the files again (SIGHUP). On error the credentials in force stay
 * and -1 is returned after logging why. Main thread. */
int tls_reload(void);
/* The same, only if one of the files looks changed (file_look.h) since
 * it was last read or found unreadable, so a bad file is tried (and
 * logged) once per change. 0 when nothing changed or the reload worked. */
int tls_reload_if_changed(void);
/* Is TLS on? */
bool tls_enabled(void);

/* The current credentials with a reference for the caller, to give back
 * with tls_creds_put(); NULL when TLS is off. Any thread. */
struct tls_creds *tls_creds_get(void);
void tls_creds_put(struct tls_creds *c);
/* The certificate chain and key of c as read (PEM, NUL-terminated), for
 * a daemon that wants them at its start; valid while c is held. */
const char *tls_creds_cert_pem(const struct tls_creds *c);
const char *tls_creds_key_pem(const struct tls_creds *c);

/* Give the new server session s (a gnutls_session_t, as MHD hands it
 * out: api/ includes no GnuTLS header, whose tags clash with its own) the current credentials, and with
 * --tls-client-ca make its handshake require a client certificate
 * signed by that CA (the handshake fails otherwise). Call before the
 * handshake starts; returns the reference s uses, to tls_creds_put()
 * once s is deinitialised, or NULL when s could not be set up (refuse
 * the connection). */
struct tls_creds *tls_session_start(void *s /* gnutls_session_t */);

/* The writes of a server session to its socket fd (tls_out_attach), so
 * that two records can leave in one write: an answer's header and its
 * body, which libmicrohttpd sends as two records, one right after the
 * other. */
struct tls_out;
/* Write session s's records to fd through a new tls_out (the caller's,
 * tls_out_free it once the session is gone); NULL if out of memory. */
struct tls_out *tls_out_attach(void *s /* gnutls_session_t */, int fd);
/* Hold the next record written, to go out with the one after it. */
void tls_out_pair_next(struct tls_out *o);
/* Send a record still held (no second one came): 0 sent or none, 1 the
 * socket is full, -1 the connection failed. */
int tls_out_flush(struct tls_out *o);
void tls_out_free(struct tls_out *o);

/* Drop the current credentials (every session must be gone). */
void tls_release(void);

#endif
