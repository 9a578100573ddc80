/* handlers.h -- one entry point per resource; each queues its own reply.
 * The server does not name them: main.c hands them to server_start() as
 * its struct server_handlers (api/server.h). */
#ifndef DLOCKD_HANDLERS_H
#define DLOCKD_HANDLERS_H

#include <microhttpd.h>

#include "api/request.h"

/* What lock operations are counted with (metrics_lock): an enum
 * lock_result, or HANDLE_ABANDONED, a grant whose answer was not
 * delivered (released again). main.c registers their labels. */
enum { HANDLE_ABANDONED = LOCK_RESULT_COUNT, HANDLE_RESULT_COUNT };

/* PUT, DELETE, GET, POST heartbeat on a lock (rq->route.op says which),
 * and GET /locks, whose parameters the server has read already
 * (request_dispatch in api/server.c: the token must cover the prefix it
 * asks for). */
enum MHD_Result handle_lock(struct request *rq);
/* The request is over: end its acquire (service/lock/acquire.h), which releases
 * a grant the client never received, and its watch (service/lock/watch.h).
 * Runs on the connection's event loop thread, for every request. */
void handle_lock_completed(struct request *rq, enum MHD_RequestTerminationCode toe);

/* POST /sessions, GET and DELETE /sessions/{id}, POST
 * /sessions/{id}/heartbeat, PUT /sessions/{id}/locks
 * (api/handle_sessions.c). */
enum MHD_Result handle_session(struct request *rq);
/* The request is over: end its multi-lock (PUT /sessions/{id}/locks),
 * which takes back a grant whose answer was not delivered, and free its
 * entries. Nothing for any other request. */
void session_locks_end(struct request *rq, bool delivered);

/* GET /healthz, /readyz, /metrics, /openapi.yaml; /ui and its files
 * (handle_ui). */
enum MHD_Result handle_health(struct request *rq);
/* GET /ui, /ui/<file>: the status page's files (api/handle_ui.c). */
enum MHD_Result handle_ui(struct request *rq);

#endif
