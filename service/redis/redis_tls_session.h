/* redis_tls_session.h -- one client TLS session to Redis as dlockd sets
 * it up and judges it, whoever moves its bytes: the tunnels of
 * redis_tls.c (the blocking connections) and the loops' own sessions of
 * redis_tls_io.c (the pipelined ones). Holds the credentials both use
 * (the trust list, the client certificate), the server's verification
 * (chain and name, inside the handshake), the words that say why a
 * session failed, and the log of failures (once per host:port and
 * reason). Knows GnuTLS, not Redis. */
#ifndef DLOCKD_REDIS_TLS_SESSION_H
#define DLOCKD_REDIS_TLS_SESSION_H

#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>

/* A failure's description, at most. */
#define REDIS_TLS_WHY_MAX 512

/* A session and what is known of it; the caller's memory, set up by
 * redis_tls_session_init. */
struct redis_tls_session {
	gnutls_session_t s;	/* NULL: none */
	char host[256];		/* the name verified (and sent as SNI) */
	int port;
	unsigned verify_status;	/* GnuTLS' verdict on a refused certificate */
	bool verify_refused;
	bool handshaken;	/* the handshake is over and the server verified */
	bool answered;		/* Redis has sent something through it */
};

/* Read the trust list (ca NULL or "": the system's) and the client
 * certificate (cert and key NULL or "": none). Returns 0, or -1 after
 * printing on stderr which file is wrong and how. Main thread, before any
 * session is made. */
int redis_tls_session_load(const char *ca, const char *cert, const char *key);
/* Whether they are loaded. */
bool redis_tls_session_loaded(void);
/* Forget them. Main thread, at exit, after every session is gone. */
void redis_tls_session_unload(void);

/* A non-blocking client session to host:port in ts, with the credentials,
 * default priorities, SNI (a DNS name) and the server verified inside the
 * handshake against the trust list and host (a DNS name, or an IP
 * address against the certificate's addresses); the handshake's timeout
 * is the caller's. 0, or -1 with why. Any thread. */
int redis_tls_session_init(struct redis_tls_session *ts, const char *host, int port, char *why,
			   size_t len);
/* Free ts's session (no close_notify: see redis_tls_session_bye). */
void redis_tls_session_deinit(struct redis_tls_session *ts);

/* One step of the handshake: 1 over and verified, 0 to wait for the
 * socket (*write: to be writable, else readable), -1 with why. */
int redis_tls_session_handshake(struct redis_tls_session *ts, bool *write, char *why,
				size_t len);

/* What a failed handshake or record call rc means, into why. */
void redis_tls_session_describe(const struct redis_tls_session *ts, int rc, char *why,
				size_t len);
/* gnutls_record_recv's rc ended the session (0 or a premature end: the
 * server closed it): why says why when that is a failure to log
 * (closed before answering anything), else "" (logged at debug here). */
void redis_tls_session_closed(const struct redis_tls_session *ts, char *why, size_t len);
/* Redis sent something through ts: its host:port's failures are
 * forgotten (and the recovery logged) the first time. */
void redis_tls_session_answered(struct redis_tls_session *ts);

/* Log why a session to host:port failed: at error level, unless that
 * reason was logged for host:port since a session there last worked
 * (then at debug). Any thread. */
void redis_tls_report_failure(const char *host, int port, const char *why);

#endif
