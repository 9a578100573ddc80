/* redis_tls.h -- TLS to Redis (rediss://, rediss-sentinel://, ?tls=true)
 * for a hiredis that has none (0.14), on its blocking connections: each
 * is a tunnel, a socketpair whose one end hiredis is given
 * (redisConnectFd) and whose other end a pump thread joins to a GnuTLS
 * session over TCP (the pipelined connections run TLS themselves:
 * redis_tls_io.h). Also loads the credentials every session uses
 * (redis_tls_session.h). Knows GnuTLS and sockets, not Redis. */
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
 * addresses). The TCP connect and the handshake happen here, within
 * timeout_ms. Returns the descriptor of its plain end (a unix stream
 * socket, close-on-exec, blocking) for redisConnectFd, or -1 with why
 * (why_len bytes: the connect, the handshake, the certificate). A
 * failure, here or later in the pump (which then closes the plain end,
 * so that its reader sees the connection closed), is logged once, at
 * error level, naming host:port and the problem; the same failure again
 * is logged at debug until a session there works. Any thread. */
int redis_tls_open(const char *host, int port, int timeout_ms, char *why, size_t why_len);

/* Stop the pump and close every tunnel left (their plain ends read as
 * closed). Main thread, at exit. */
void redis_tls_release(void);

#endif
