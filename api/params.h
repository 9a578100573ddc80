/* params.h -- what a request asks for, checked: lock names and owner ids
 * against the contract, and the parameters from a JSON body or the query
 * string (never both), each checked for type and range; a refusal is
 * answered here (400) before anything touches Redis. */
#ifndef DLOCKD_PARAMS_H
#define DLOCKD_PARAMS_H

#include <stddef.h>

struct params;
struct request;

/* Validate a lock name or owner id; on failure write the reason for the
 * client into why and return -1. */
int params_check_name(const char *name, size_t len, char *why, size_t why_len);
int params_check_owner(const char *owner, size_t len, char *why, size_t why_len);

/* Parse the parameters of rq from its JSON body or its query string (not
 * both) into rq->lock.params, accepting only those in allowed. Returns 0,
 * or -1 after queuing the 400 reply. */
int params_or_reply(struct request *rq, unsigned allowed);

/* Free what params_or_reply() allocated in p (its prefix, cursor, value
 * and label). */
void params_free(struct params *p);

/* p's prefix and label (a session's name), "" when not given. */
const char *params_prefix(const struct params *p);
const char *params_label(const struct params *p);

#endif
