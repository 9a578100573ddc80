/* redis_tls.h -- TLS to Redis (rediss://, rediss-sentinel://, ?tls=true)
 * for a hiredis that has none (0.14): each connection is a tunnel, a
 * socketpair whose one end hiredis is given (redisConnectFd) and whose
 * other end a pump thread joins to a GnuTLS session over TCP. Knows
 * GnuTLS and sockets, not Redis. */
#ifndef DLOCKD_REDIS_TLS_H
#define DLOCKD_REDIS_TLS_H

#include <stdbool.h>
#include <stddef.h>

/* Read the trust list (ca NULL or "": the system's) and the client
 * certificate (cert and key NULL or "": none) and start the pump thread.
 * Returns 0, or -1 after printing on stderr which file is wrong and how.
 * Main thread, before any connection is made. */
int redis_tls_load(const char *ca, const char *cert, const char *key);

/* A tunnel to host:port over TLS, verified against the trust list and
 * the name host (a DNS name: SNI too; an IP address: the certificate's IP
 * addresses). Returns the descriptor of its plain end (a unix stream
 * socket, close-on-exec, blocking) for redisConnectFd, or -1 with why
 * (why_len bytes) when it cannot be made at all.
 *
 * With wait, the TCP connect and the handshake happen here, within
 * timeout_ms, and -1 (why says what failed: the connect, the handshake,
 * the certificate) means no connection; without, they happen in the pump
 * thread (within timeout_ms too) and a failure closes the plain end, so
 * that its reader sees the connection closed. Either way a failure is
 * logged once, at error level, naming host:port and the problem; the
 * same failure again is logged at debug until a handshake works. Any
 * thread. */
int redis_tls_open(const char *host, int port, int timeout_ms, bool wait, char *why,
		   size_t why_len);

/* Stop the pump and close every tunnel left (their plain ends read as
 * closed). Main thread, at exit. */
void redis_tls_release(void);

#endif
