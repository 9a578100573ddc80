/* locks_redis.c -- the lock domain's own words with Redis, shared by the
 * kind table (locks.c) and the listing (listing.c): the key prefix and a
 * lock's names in Redis (Redisson's hash tags), a list packed into one
 * script argument, and the one place an answer of Redis becomes a failure
 * (locks_check_answer). Pure functions of their arguments but for the key
 * prefix, which is set once before any loop runs. */
#include "service/lock/locks_redis.h"

#include "service/base/log.h"
#include "service/base/util.h"
#include "service/redis/redis_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prepended to every lock name before any key is built from it. */
static const char *key_prefix = "";

void locks_redis_set_prefix(const char *prefix)
{
	key_prefix = prefix ? prefix : "";
}

const char *locks_key_prefix(void)
{
	return key_prefix;
}

/* The name lock N has in Redis: <prefix>N. The caller frees it. */
char *locks_redis_name(const char *name)
{
	return xstrjoin(key_prefix, name, NULL);
}

/* Redisson's hash-tag rule: {name}, or name itself when
 * it already contains '{'. Every derived key hashes to name's slot; the
 * rwlock scripts build Redisson's suffixName keys as <tag>:<field>:...
 * The caller frees the results of both. */
char *locks_tag_name(const char *name)
{
	return strchr(name, '{') ? xstrdup(name) : xstrjoin("{", name, "}", NULL);
}

long long locks_elem_int(const redisReply *r, size_t i)
{
	if (r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
	    r->element[i]->type != REDIS_REPLY_INTEGER)
		return 0;
	return r->element[i]->integer;
}

/* Check an answer of Redis: the one place where Redis' answers become
 * failures. No reply (NULL): the call was sent and its answer never came,
 * so it may have run; LOCK_BACKEND_DOWN with no fault. An error that says
 * Redis cannot serve now (busy, loading, a replica, out of memory,
 * refused: redis_error_unavailable), or one dlockd made up for a call it
 * never sent (not connected), is a 503 with that reason, and the call
 * changed nothing; only Redis' own are logged here (the connection logs
 * its trouble once, not each call it fails). Any other error
 * is the command failing -- a bug or data it cannot read -- logged with
 * the command (cmd), what it was for (label 'name') and Redis' words, and
 * never called "unreachable". Returns LOCK_OK when r is no error; its
 * type is the caller's to check. */
enum lock_result locks_check_answer(const redisReply *r, const char *cmd, const char *label,
				    const char *name, struct lock_state *st)
{
	if (!r)
		return LOCK_BACKEND_DOWN;
	if (r->type == REDIS_REPLY_ERROR) {
		st->fault = redis_error_unavailable(r->str);
		if (st->fault) {
			if (redis_reply_made_up(r))
				log_debug("%s for %s '%s' not sent: %s", cmd, label, name, r->str);
			else
				log_warn("%s for %s '%s': redis answered: %s", cmd, label, name,
					 r->str);
			return LOCK_BACKEND_DOWN;
		}
		log_error("%s failed for %s '%s': %s", cmd, label, name, r->str);
		st->fault = "the lock script failed in redis (dlockd's log has redis' error)";
		return LOCK_SCRIPT_ERROR;
	}
	return LOCK_OK;
}

/* A reply of an unexpected shape: the command's failure. */
enum lock_result locks_unexpected(const char *cmd, const char *label, const char *name,
				  struct lock_state *st)
{
	log_error("%s for %s '%s' gave an unexpected reply", cmd, label, name);
	st->fault = "the lock script gave redis an answer dlockd does not understand";
	return LOCK_SCRIPT_ERROR;
}

/* Many strings as one script argument, however many there are:
 * <length>:<string>, one after another (unpack_list in lua/lib/common.lua).
 * The caller frees it. */
char *locks_pack_list(const char *const *v, size_t n)
{
	size_t size = 1;
	char *list, *at;

	for (size_t i = 0; i < n; i++)
		size += strlen(v[i]) + 24;
	list = at = xmalloc(size);
	*at = '\0';
	for (size_t i = 0; i < n; i++)
		at += sprintf(at, "%zu:%s", strlen(v[i]), v[i]);
	return list;
}
