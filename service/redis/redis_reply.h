/* redis_reply.h -- what every pipelined connection to Redis (a node's,
 * the cluster router's, and the front the lock domain uses, redis_conn.h)
 * shares about commands and their replies: how many arguments a command
 * may have, how its outcome reaches the caller, and what Redis' error
 * replies mean. */
#ifndef DLOCKD_REDIS_REPLY_H
#define DLOCKD_REDIS_REPLY_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#define REDIS_CONN_MAX_ARGS 24

/* A command's outcome: its reply (freed by the connection after the
 * call), or NULL when it was sent and no answer came: the connection was
 * lost, or Redis gave none within 10 s of the send. Redis may have run
 * it. A command that was never sent (no connection, one not answering,
 * no master known, its set-up refused) gets an error reply dlockd made
 * up instead (redis_reply_made_up): it did nothing. */
typedef void (*redis_reply_fn)(void *ctx, redisReply *r);

/* What an error reply of Redis means, for a person, when it says Redis
 * cannot serve the command now or not for dlockd as set up (BUSY, LOADING,
 * MASTERDOWN, READONLY, OOM, NOPERM, NOAUTH, TRYAGAIN, CLUSTERDOWN, MOVED,
 * MISCONF, NOREPLICAS, DLOCKD_LATE from the scripts' deadline check, and
 * the ones dlockd makes up, below): a sentence (static) for a 503; the command changed nothing. NULL for any
 * other error: a script failed (a bug, or data it cannot read). The one
 * place where Redis' error codes are told apart. */
const char *redis_error_unavailable(const char *err);
/* The error reply a command that was never sent gets (DLOCKD_UNSENT):
 * static, not to be changed or freed. */
redisReply *redis_reply_unsent(void);
/* r is an error reply dlockd made up, not Redis (DLOCKD_UNSENT,
 * DLOCKD_SETUP, DLOCKD_NOMASTER, DLOCKD_FAILOVER): the command never
 * reached Redis, which has nothing to say about it. */
bool redis_reply_made_up(const redisReply *r);

/* Why a command failed, as dlockd_redis_errors_total counts it: an index
 * of redis_fault_labels(), or -1 for a reply that is no failure (MOVED and
 * ASK are redirections, not failures). No reply is REDIS_FAULT_NO_REPLY,
 * an error not in the list above REDIS_FAULT_ERROR (a script failed). */
enum { REDIS_FAULT_NO_REPLY, REDIS_FAULT_ERROR };
int redis_fault_reason(const redisReply *r);
/* The labels of those indices ("no_reply", "error", "busy", "loading",
 * ..., "late", "setup", "nomaster", "failover"); *n of them, static. */
const char *const *redis_fault_labels(unsigned *n);

#endif
