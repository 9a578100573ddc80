/* redis_tls_io.h -- TLS on a pipelined connection's own socket, run by
 * the connection's loop thread (redis_node.c): the handshake as steps
 * driven by the socket's events, then the context's output buffer
 * encrypted onto the socket and what arrives decrypted into its reply
 * reader. Stands in for hiredis' redisBufferWrite and redisBufferRead,
 * which 0.14 has only in plaintext. Never blocks. */
#ifndef DLOCKD_REDIS_TLS_IO_H
#define DLOCKD_REDIS_TLS_IO_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

struct redis_tls_io;

/* A TLS session for c, a non-blocking context whose TCP socket connects
 * to host:port (the name verified), to be connected and verified within
 * timeout_ms from now. NULL with c->err and c->errstr set (logged). */
struct redis_tls_io *redis_tls_io_new(redisContext *c, const char *host, int port,
				      int timeout_ms);
/* Send close_notify if it goes at once, and free t; before c is freed. */
void redis_tls_io_free(struct redis_tls_io *t);

/* c's socket is connected: a step of the handshake. 1: over, the server
 * verified; 0: not yet; -1: failed (logged; c->errstr says why). */
int redis_tls_io_handshake(struct redis_tls_io *t, redisContext *c);
/* The handshake is over and the server verified. */
bool redis_tls_io_ready(const struct redis_tls_io *t);
/* The session waits for the socket to be writable (a handshake step, or
 * a record partly sent). */
bool redis_tls_io_wants_write(const struct redis_tls_io *t);
/* When the session must be ready by (now_ms() clock); INT64_MAX once it is. */
int64_t redis_tls_io_deadline(const struct redis_tls_io *t);
/* The deadline passed before it was ready: log why (with connected, the
 * handshake was late, else the TCP connect) and set c->errstr. */
void redis_tls_io_late(struct redis_tls_io *t, redisContext *c, bool connected);

/* As redisBufferWrite: send what c->obuf holds, as far as the socket
 * takes it, keeping the rest; *done (may be NULL): all of it went.
 * REDIS_OK, or REDIS_ERR with c->err set (logged). */
int redis_tls_io_write(struct redis_tls_io *t, redisContext *c, int *done);
/* As redisBufferRead: what arrived, decrypted into c's reply reader
 * (with whatever GnuTLS holds decrypted already, which will not wake the
 * socket). REDIS_OK, or REDIS_ERR with c->err set: the server closed the
 * session, or it failed (logged). */
int redis_tls_io_read(struct redis_tls_io *t, redisContext *c);

#endif
