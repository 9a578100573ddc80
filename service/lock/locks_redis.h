/* locks_redis.h -- what locks_redis.c lends the lock domain's modules
 * that speak to Redis themselves, the kind table (locks.c) and the
 * listing (listing.c): a lock's names in Redis, a list packed into one
 * script argument, and the checking of Redis' answers, which stays in
 * one place. Only service/lock/ includes
 * it; everything here runs on the caller's loop. */
#ifndef DLOCKD_LOCKS_REDIS_H
#define DLOCKD_LOCKS_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "service/lock/lock_result.h"

/* --key-prefix ("" when none): every lock N is <prefix>N in Redis. */
const char *locks_key_prefix(void);
/* Set it (NULL: none); once, before any loop runs; prefix must outlive
 * the module (locks_set_key_prefix passes it on). */
void locks_redis_set_prefix(const char *prefix);
/* The name lock N has in Redis: <prefix>N. The caller frees it. */
char *locks_redis_name(const char *name);
/* Redisson's hash tag of a name in Redis: {name}, or name itself when it
 * already holds '{'. The caller frees it. */
char *locks_tag_name(const char *name);
/* Many strings as one script argument: <length>:<string>, one after
 * another (unpack_list in lua/lib/common.lua). The caller frees it. */
char *locks_pack_list(const char *const *v, size_t n);

/* Element i of array reply r as an integer; 0 when there is none. */
long long locks_elem_int(const redisReply *r, size_t i);
/* Check an answer of Redis to cmd, sent for label 'name' (for the log):
 * no reply is LOCK_BACKEND_DOWN; an error that says Redis cannot serve
 * now is LOCK_BACKEND_DOWN with Redis' reason in st->fault; any other
 * error is LOCK_SCRIPT_ERROR, logged. LOCK_OK when r is no error; its
 * type is the caller's to check. */
enum lock_result locks_check_answer(const redisReply *r, const char *cmd, const char *label,
				    const char *name, struct lock_state *st);
/* An answer of an unexpected shape: logged, LOCK_SCRIPT_ERROR. */
enum lock_result locks_unexpected(const char *cmd, const char *label, const char *name,
				  struct lock_state *st);

#endif
