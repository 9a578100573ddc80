/* server.h -- the HTTP server: event loops, each with a libmicrohttpd
 * daemon and a pipelined Redis connection. */
#ifndef DLOCKD_SERVER_H
#define DLOCKD_SERVER_H

#include "../service/config.h"

struct request;

/* Start serving on cfg->listen_addr; cfg must outlive the server. Returns
 * the port bound (useful with port 0), or -1. */
int server_start(const struct config *cfg);
/* Stop accepting connections; requests in progress go on. */
void server_quiesce(void);
/* Resume rq's suspended connection, from any thread: MHD calls the
 * handler again on rq's loop. */
void server_resume(struct request *rq);
/* Close every connection and join the loops. Waiting requests must have
 * been answered first (waiters_shutdown). */
void server_stop(void);

#endif
