/* request_id.h -- the id a request is logged and answered with
 * (X-Request-Id): the client's own, its W3C trace's, or a new one. */
#ifndef DLOCKD_REQUEST_ID_H
#define DLOCKD_REQUEST_ID_H

#include <stddef.h>

#define REQUEST_ID_MAX 128

/* The id of a request with headers x_request_id and traceparent (each
 * NULL when absent), in out (REQUEST_ID_MAX + 1 bytes): X-Request-Id when
 * it is 1..128 visible ASCII characters, else the trace id of a valid
 * traceparent (32 hex digits), else 32 random hex digits. */
void request_id_pick(const char *x_request_id, const char *traceparent, char *out);

#endif
