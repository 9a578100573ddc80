/* server.h -- the HTTP server: libmicrohttpd with a worker thread pool. */
#ifndef DLOCKD_SERVER_H
#define DLOCKD_SERVER_H

#include "../service/config.h"

/* Start serving on cfg->listen_addr; cfg must outlive the server. Returns
 * the port bound (useful with port 0), or -1. */
int server_start(const struct config *cfg);
/* Stop accepting connections; requests in progress go on. */
void server_quiesce(void);
/* Close every connection and join the workers. Waiting requests must have
 * been answered first (waiters_shutdown). */
void server_stop(void);

#endif
