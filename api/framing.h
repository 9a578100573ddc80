/* framing.h -- can a request be read only one way? The request line and
 * header checks against request smuggling; each returns why rq must be
 * refused (400, connection closed), or NULL. */
#ifndef DLOCKD_FRAMING_H
#define DLOCKD_FRAMING_H

struct request;

/* The request line, before it is routed: a target holding a NUL, a
 * control byte or a space, or a method that is not a token. A path cut by
 * a NUL gets "%00..." appended to rq->url, so that neither the log nor the
 * name shows it as if it were the whole request. */
const char *framing_check_line(struct request *rq, const char *method, const char *version);
/* The header fields, on rq->conn: a folded line, a field name that is not
 * a token, a control byte in a value, body framing two parties could read
 * differently, a second Authorization or Host. */
const char *framing_check_headers(struct request *rq, const char *method, const char *version);

#endif
