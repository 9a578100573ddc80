/* locks.c -- the lock-kind table: for each kind, which Redis keys and
 * channel it uses and which script does each operation, plus the decoding
 * of script replies into domain results. Key names follow Redisson byte for
 * byte (reference/redisson-locks.md §1) so both can share one Redis. */
#include "locks.h"

#include "log.h"
#include "scripts.h"
#include "util.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kind_row {
	const char *label;		/* for log lines */
	const char *channel_prefix;	/* waiters listen on <prefix>:{N} */
	enum script_id acquire, release, force_release, renew, status;
};

static const struct kind_row kinds[LOCK_KIND_COUNT] = {
	[LOCK_KIND_LOCK] = {
		.label = "lock",
		.channel_prefix = "redisson_lock__channel",
		.acquire = SCRIPT_LOCK_ACQUIRE,
		.release = SCRIPT_LOCK_RELEASE,
		.force_release = SCRIPT_LOCK_FORCE_RELEASE,
		.renew = SCRIPT_LOCK_RENEW,
		.status = SCRIPT_LOCK_STATUS,
	},
};

/* ----- Key building ----- */

char *locks_prefix_name(const char *prefix, const char *name)
{
	if (strchr(name, '{'))
		return xasprintf("%s:%s", prefix, name);
	return xasprintf("%s:{%s}", prefix, name);
}

char *locks_suffix_name(const char *name, const char *suffix)
{
	if (strchr(name, '{'))
		return xasprintf("%s:%s", name, suffix);
	return xasprintf("{%s}:%s", name, suffix);
}

char *locks_wait_channel(enum lock_kind kind, const char *name, const char *owner)
{
	(void)owner;	/* fair locks will listen per owner */
	return locks_prefix_name(kinds[kind].channel_prefix, name);
}

/* ----- Script replies ----- */

static long long elem_int(const redisReply *r, size_t i)
{
	if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER)
		return 0;
	return r->element[i]->integer;
}

/* Check a script's array reply; NULL (backend down) and error replies are
 * logged and become LOCK_BACKEND_DOWN. Returns LOCK_OK when r is usable. */
static enum lock_result check_reply(const redisReply *r, enum script_id id)
{
	if (!r)
		return LOCK_BACKEND_DOWN;
	if (r->type == REDIS_REPLY_ERROR) {
		log_error("script %s failed: %s", scripts_name(id), r->str);
		return LOCK_BACKEND_DOWN;
	}
	if (r->type != REDIS_REPLY_ARRAY && r->type != REDIS_REPLY_INTEGER) {
		log_error("script %s gave an unexpected reply type %d", scripts_name(id), r->type);
		return LOCK_BACKEND_DOWN;
	}
	return LOCK_OK;
}

/* Map the shared status codes 0 / -1 / -2 of release and renew. */
static enum lock_result common_code(long long code)
{
	switch (code) {
	case 0: return LOCK_NOT_HELD;
	case -1: return LOCK_WRONG_KIND;
	case -2: return LOCK_NOT_OWNER;
	default: return LOCK_OK;
	}
}

/* ----- Operations ----- */

enum lock_result locks_acquire(enum lock_kind kind, const char *name, const char *owner,
			       int64_t ttl_ms, struct lock_state *out)
{
	const struct kind_row *k = &kinds[kind];
	char *token_key = locks_prefix_name("redisson_lock_token", name);
	char lease[24];
	const char *keys[] = { name, token_key };
	const char *args[] = { lease, owner };
	enum lock_result res;
	redisReply *r;

	snprintf(lease, sizeof(lease), "%lld", (long long)ttl_ms);
	r = scripts_run(k->acquire, 2, keys, 2, args);
	free(token_key);
	memset(out, 0, sizeof(*out));
	res = check_reply(r, k->acquire);
	if (res != LOCK_OK)
		goto out;
	switch (elem_int(r, 0)) {
	case 1:
		out->token = elem_int(r, 1);
		out->holds = elem_int(r, 2);
		out->ttl_ms = elem_int(r, 3);
		out->locked = true;
		break;
	case 0:
		out->ttl_ms = elem_int(r, 1);
		out->locked = true;
		res = LOCK_HELD;
		break;
	default:
		res = LOCK_WRONG_KIND;
	}
out:
	if (r)
		freeReplyObject(r);
	return res;
}

enum lock_result locks_release(enum lock_kind kind, const char *name, const char *owner,
			       struct lock_state *out)
{
	const struct kind_row *k = &kinds[kind];
	char *channel = locks_wait_channel(kind, name, owner);
	const char *keys[] = { name, channel };
	const char *args[] = { owner };
	enum lock_result res;
	redisReply *r;

	r = scripts_run(k->release, 2, keys, 1, args);
	free(channel);
	memset(out, 0, sizeof(*out));
	res = check_reply(r, k->release);
	if (res == LOCK_OK) {
		res = common_code(elem_int(r, 0));
		out->holds = elem_int(r, 1);
		out->locked = out->holds > 0;
	}
	if (r)
		freeReplyObject(r);
	return res;
}

enum lock_result locks_force_release(enum lock_kind kind, const char *name,
				     struct lock_state *out)
{
	const struct kind_row *k = &kinds[kind];
	char *channel = locks_wait_channel(kind, name, NULL);
	const char *keys[] = { name, channel };
	enum lock_result res;
	redisReply *r;

	r = scripts_run(k->force_release, 2, keys, 0, NULL);
	free(channel);
	memset(out, 0, sizeof(*out));
	res = check_reply(r, k->force_release);
	if (res == LOCK_OK) {
		if (r->integer < 0)
			res = LOCK_WRONG_KIND;
		out->locked = r->integer == 1;	/* it was held and is now free */
	}
	if (r)
		freeReplyObject(r);
	return res;
}

enum lock_result locks_renew(enum lock_kind kind, const char *name, const char *owner,
			     int64_t ttl_ms, struct lock_state *out)
{
	const struct kind_row *k = &kinds[kind];
	char lease[24];
	const char *keys[] = { name };
	const char *args[] = { lease, owner };
	enum lock_result res;
	redisReply *r;

	snprintf(lease, sizeof(lease), "%lld", (long long)ttl_ms);
	r = scripts_run(k->renew, 1, keys, 2, args);
	memset(out, 0, sizeof(*out));
	res = check_reply(r, k->renew);
	if (res == LOCK_OK) {
		res = common_code(elem_int(r, 0));
		out->ttl_ms = elem_int(r, 1);
		out->locked = res == LOCK_OK;
	}
	if (r)
		freeReplyObject(r);
	return res;
}

enum lock_result locks_status(enum lock_kind kind, const char *name, const char *owner,
			      struct lock_state *out)
{
	const struct kind_row *k = &kinds[kind];
	const char *keys[] = { name };
	const char *args[] = { owner ? owner : "" };
	enum lock_result res;
	redisReply *r;

	r = scripts_run(k->status, 1, keys, 1, args);
	memset(out, 0, sizeof(*out));
	res = check_reply(r, k->status);
	if (res == LOCK_OK) {
		long long locked = elem_int(r, 0);

		if (locked < 0) {
			res = LOCK_WRONG_KIND;
		} else {
			out->locked = locked == 1;
			out->ttl_ms = out->locked ? elem_int(r, 1) : 0;
			out->holds = elem_int(r, 2);
		}
	}
	if (r)
		freeReplyObject(r);
	return res;
}
