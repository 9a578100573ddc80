/* locks.c -- the lock-kind table: for each kind, which script does each
 * operation and which Redis keys it is given, plus the decoding of script
 * replies into domain results. Key names follow Redisson byte for byte
 * (docs/ARCHITECTURE.md lists them) so both can share one Redis; dlockd's
 * own keys, dlockd_rwlock_writers:{N} and the holders' hash
 * dlockd_lock_owners:{N} (each holding's fencing token and token name), are
 * invisible to Redisson.
 * With a key prefix (--key-prefix) lock N is <prefix>N in Redis, and every
 * derived name is built from that, as Redisson's NameMapper does.
 *
 * Every derived name of a lock is built once per call (struct keys) and a
 * kind's row lists, per operation, which of them go into KEYS and in what
 * order, exactly as the script's header comment names them. */
#include "service/lock/locks.h"

#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/lock/backend.h"
#include "service/redis/cluster_slots.h"
#include "service/redis/pubsub.h"
#include "service/redis/redis_conn.h"
#include "service/redis/replica_sync.h"
#include "service/lock/waiters.h"
#include "service/lock/scripts.h"
#include "service/base/util.h"

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The derived names a script may need, by role. */
enum key_id {
	K_END,		/* ends a key list */
	K_LOCK,		/* N: the lock hash */
	K_TOKEN,	/* redisson_lock_token:{N} */
	K_CHANNEL,	/* the kind's channel (fair: the per-waiter channels' prefix) */
	K_QUEUE,	/* redisson_lock_queue:{N} */
	K_DEADLINES,	/* redisson_lock_timeout:{N} */
	K_TAG,		/* {N}: prefix of the rwlock_timeout keys */
	K_WRITERS,	/* dlockd_rwlock_writers:{N} */
	K_OWNERS,	/* dlockd_lock_owners:{N}: each holding's token and principal */
	K_COUNT
};

#define MAX_KEYS 6

struct op_row {
	enum script_id script;
	enum key_id keys[MAX_KEYS + 1];
};

struct kind_row {
	const char *label;		/* for messages and log lines */
	const char *channel_prefix;	/* waiters listen on <prefix>:{N} */
	bool per_owner_channel;		/* ... :<owner> (fair locks) */
	bool queues;			/* acquire may hold a queue place */
	unsigned wait_flags;		/* enum lock_wait_flags */
	const char *force_mode;		/* ARGV of force release, or NULL */
	struct op_row acquire, release, force_release, renew, status, dequeue;
	struct op_row refresh;		/* fair: many waiters' queue places at once */
};

static const struct kind_row kinds[LOCK_KIND_COUNT] = {
	[LOCK_KIND_LOCK] = {
		.label = "lock",
		.channel_prefix = "redisson_lock__channel",
		.acquire = { SCRIPT_LOCK_ACQUIRE, { K_LOCK, K_TOKEN, K_OWNERS } },
		.release = { SCRIPT_LOCK_RELEASE, { K_LOCK, K_CHANNEL, K_OWNERS } },
		.force_release = { SCRIPT_LOCK_FORCE_RELEASE, { K_LOCK, K_CHANNEL, K_OWNERS } },
		.renew = { SCRIPT_LOCK_RENEW, { K_LOCK, K_OWNERS, K_CHANNEL } },
		.status = { SCRIPT_LOCK_STATUS, { K_LOCK, K_OWNERS } },
	},
	[LOCK_KIND_FAIR] = {
		.label = "fair lock",
		.channel_prefix = "redisson_lock__channel",
		.per_owner_channel = true,
		.queues = true,
		.acquire = { SCRIPT_FAIR_ACQUIRE,
			     { K_LOCK, K_TOKEN, K_QUEUE, K_DEADLINES, K_CHANNEL, K_OWNERS } },
		.release = { SCRIPT_FAIR_RELEASE,
			     { K_LOCK, K_QUEUE, K_DEADLINES, K_CHANNEL, K_OWNERS } },
		.force_release = { SCRIPT_FAIR_FORCE_RELEASE,
				   { K_LOCK, K_QUEUE, K_DEADLINES, K_CHANNEL, K_OWNERS } },
		.renew = { SCRIPT_LOCK_RENEW, { K_LOCK, K_OWNERS } },
		.status = { SCRIPT_LOCK_STATUS, { K_LOCK, K_OWNERS, K_QUEUE, K_DEADLINES } },
		.dequeue = { SCRIPT_FAIR_DEQUEUE, { K_QUEUE, K_DEADLINES, K_CHANNEL } },
		.refresh = { SCRIPT_FAIR_REFRESH, { K_LOCK, K_QUEUE, K_DEADLINES, K_CHANNEL } },
	},
	[LOCK_KIND_READ] = {
		.label = "read lock",
		.channel_prefix = "redisson_rwlock",
		.wait_flags = LOCK_WAIT_TIMER_ALL,
		.force_mode = "read",
		.acquire = { SCRIPT_RW_READ_ACQUIRE,
			     { K_LOCK, K_TOKEN, K_TAG, K_WRITERS, K_OWNERS } },
		.release = { SCRIPT_RW_READ_RELEASE, { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
		.force_release = { SCRIPT_RW_FORCE_RELEASE,
				   { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
		.renew = { SCRIPT_RW_READ_RENEW, { K_LOCK, K_TAG, K_OWNERS } },
		.status = { SCRIPT_RW_STATUS, { K_LOCK, K_TAG, K_OWNERS } },
	},
	[LOCK_KIND_WRITE] = {
		.label = "write lock",
		.channel_prefix = "redisson_rwlock",
		.queues = true,
		.wait_flags = LOCK_WAIT_TIMER_ALL | LOCK_WAIT_WRITER,
		.force_mode = "write",
		.acquire = { SCRIPT_RW_WRITE_ACQUIRE,
			     { K_LOCK, K_TOKEN, K_TAG, K_WRITERS, K_OWNERS } },
		.release = { SCRIPT_RW_WRITE_RELEASE, { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
		.force_release = { SCRIPT_RW_FORCE_RELEASE,
				   { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
		.renew = { SCRIPT_RW_WRITE_RENEW, { K_LOCK, K_TAG, K_OWNERS } },
		.status = { SCRIPT_RW_STATUS, { K_LOCK, K_TAG, K_OWNERS } },
		.dequeue = { SCRIPT_RW_WRITE_DEQUEUE, { K_WRITERS, K_CHANNEL } },
	},
};

/* Queue places live this long unless refreshed; refreshed every third. */
static int64_t queue_ttl_ms = 5000;

void locks_configure(int64_t ttl_ms)
{
	queue_ttl_ms = ttl_ms;
}

int64_t locks_queue_refresh_ms(void)
{
	return queue_ttl_ms / 3 > 0 ? queue_ttl_ms / 3 : 1;
}

/* Prepended to every lock name before any key is built from it. */
static const char *key_prefix = "";

void locks_set_key_prefix(const char *prefix)
{
	key_prefix = prefix ? prefix : "";
}

/* The name lock N has in Redis: <prefix>N. The caller frees it. */
static char *redis_name(const char *name)
{
	return xasprintf("%s%s", key_prefix, name);
}

const char *locks_kind_label(enum lock_kind kind)
{
	return kinds[kind].label;
}

unsigned locks_wait_flags(enum lock_kind kind)
{
	return kinds[kind].wait_flags;
}

/* ----- Key building ----- */

/* Redisson's hash-tag rule: {name}, or name itself when
 * it already contains '{'. Every derived key hashes to name's slot; the
 * rwlock scripts build Redisson's suffixName keys as <tag>:<field>:...
 * The caller frees the results of both. */
static char *tag_name(const char *name)
{
	return strchr(name, '{') ? xstrdup(name) : xasprintf("{%s}", name);
}

/* prefix:{name} (Redisson's prefixName) */
static char *locks_prefix_name(const char *prefix, const char *name)
{
	char *tag = tag_name(name), *s = xasprintf("%s:%s", prefix, tag);

	free(tag);
	return s;
}


char *locks_wait_channel(enum lock_kind kind, const char *name, const char *owner)
{
	char *rname = redis_name(name);
	char *base = locks_prefix_name(kinds[kind].channel_prefix, rname), *ch;

	free(rname);
	if (!kinds[kind].per_owner_channel)
		return base;
	ch = xasprintf("%s:%s", base, owner);
	free(base);
	return ch;
}

/* Every name a script of this lock may need, built on demand. */
struct keys {
	enum lock_kind kind;
	const char *name;		/* the name in Redis: <prefix>N */
	char *k[K_COUNT];
};

static const char *key_get(struct keys *ks, enum key_id id)
{
	if (ks->k[id])
		return ks->k[id];
	switch (id) {
	case K_LOCK:
		return ks->name;
	case K_TOKEN:
		ks->k[id] = locks_prefix_name("redisson_lock_token", ks->name);
		break;
	case K_CHANNEL:
		ks->k[id] = locks_prefix_name(kinds[ks->kind].channel_prefix, ks->name);
		break;
	case K_QUEUE:
		ks->k[id] = locks_prefix_name("redisson_lock_queue", ks->name);
		break;
	case K_DEADLINES:
		ks->k[id] = locks_prefix_name("redisson_lock_timeout", ks->name);
		break;
	case K_TAG:
		ks->k[id] = tag_name(ks->name);
		break;
	case K_WRITERS:
		ks->k[id] = locks_prefix_name("dlockd_rwlock_writers", ks->name);
		break;
	case K_OWNERS:
		ks->k[id] = locks_prefix_name("dlockd_lock_owners", ks->name);
		break;
	case K_END:
	case K_COUNT:
		abort();
	}
	return ks->k[id];
}

/* What --redis-sync-replicas does after an operation changed a lock. */
enum call_sync {
	SYNC_NONE,	/* nothing: it changes no holding (or sync is off) */
	SYNC_UNDO,	/* a grant: unconfirmed, its hold is released, LOCK_UNCONFIRMED */
	SYNC_KEEP,	/* a release, renewal, force release: unconfirmed, it
			 * stands (a 503 would be one that took effect); counted */
};

/* One operation on its way: what decodes its reply and who hears of it. */
struct call {
	enum lock_kind kind;
	enum script_id script;
	bool queue;			/* acquire: the caller takes a queue place */
	int64_t sent_ms;
	void (*decode)(struct call *c, const redisReply *r, enum lock_result *res,
		       struct lock_state *out);
	lock_done_fn done;		/* NULL: only failures are logged */
	void *ctx;
	const struct backend *b;	/* whose connection and waiters it runs on */
	char *owner;			/* renew: the owner whose lease it is;
					 * acquire with sync: whose hold to undo */
	char *principal;		/* acquire with sync: its principal */
	enum call_sync sync;		/* wait for replicas once Redis answered OK */
	enum lock_result res;		/* ... what Redis answered, kept meanwhile */
	struct lock_state st;
	const char *what;		/* "release", ... for the log */
	char name[];
};

static void on_reply(void *arg, redisReply *r);
static void publish_change(const struct call *c, const char *what);

/* Run op's script with its keys and args; fn(c, reply) gets the reply,
 * and frees c, which the caller fills in before. */
static void run_to(const struct backend *b, struct call *c, const struct op_row *op, int nargs,
		   const char *const *args, redis_reply_fn fn)
{
	char *rname = redis_name(c->name);
	struct keys ks = { .kind = c->kind, .name = rname };
	const char *keys[MAX_KEYS];
	int n = 0;

	while (n < MAX_KEYS && op->keys[n] != K_END) {
		keys[n] = key_get(&ks, op->keys[n]);
		n++;
	}
	c->script = op->script;
	c->b = b;
	c->sent_ms = now_ms();
	scripts_run(b->redis, op->script, n, keys, nargs, args, fn, c);
	for (int i = 0; i < K_COUNT; i++)
		free(ks.k[i]);
	free(rname);
}

/* Run op's script, its reply decoded by on_reply. */
static void run(const struct backend *b, struct call *c, const struct op_row *op, int nargs,
		const char *const *args)
{
	run_to(b, c, op, nargs, args, on_reply);
}

static struct call *call_new(enum lock_kind kind, const char *name, const char *what,
			     lock_done_fn done, void *ctx)
{
	size_t len = strlen(name) + 1;
	struct call *c = xcalloc(1, sizeof(*c) + len);

	c->kind = kind;
	c->what = what;
	c->done = done;
	c->ctx = ctx;
	memcpy(c->name, name, len);
	return c;
}

/* ----- Script replies ----- */

static long long elem_int(const redisReply *r, size_t i)
{
	if (r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
	    r->element[i]->type != REDIS_REPLY_INTEGER)
		return 0;
	return r->element[i]->integer;
}

/* Check an answer of Redis: the one place where Redis' answers become
 * failures. No reply: Redis cannot be reached. An error that says Redis
 * cannot serve now (busy, loading, a replica, out of memory, refused:
 * redis_error_unavailable) is a 503 with Redis' reason; any other error
 * is the command failing -- a bug or data it cannot read -- logged with
 * the command (cmd), what it was for (label 'name') and Redis' words, and
 * never called "unreachable". Returns LOCK_OK when r is no error; its
 * type is the caller's to check. */
static enum lock_result check_answer(const redisReply *r, const char *cmd, const char *label,
				     const char *name, struct lock_state *st)
{
	if (!r)
		return LOCK_BACKEND_DOWN;
	if (r->type == REDIS_REPLY_ERROR) {
		st->fault = redis_error_unavailable(r->str);
		if (st->fault) {
			log_warn("%s for %s '%s': redis answered: %s", cmd, label, name, r->str);
			return LOCK_BACKEND_DOWN;
		}
		log_error("%s failed for %s '%s': %s", cmd, label, name, r->str);
		st->fault = "the lock script failed in redis (dlockd's log has redis' error)";
		return LOCK_SCRIPT_ERROR;
	}
	return LOCK_OK;
}

/* A reply of an unexpected shape: the command's failure. */
static enum lock_result unexpected(const char *cmd, const char *label, const char *name,
				   struct lock_state *st)
{
	log_error("%s for %s '%s' gave an unexpected reply", cmd, label, name);
	st->fault = "the lock script gave redis an answer dlockd does not understand";
	return LOCK_SCRIPT_ERROR;
}

/* check_answer for a script's reply, which is an array or an integer. */
static enum lock_result check_reply(const redisReply *r, const struct call *c,
				    struct lock_state *st)
{
	const char *script = scripts_name(c->script), *label = kinds[c->kind].label;
	enum lock_result res = check_answer(r, script, label, c->name, st);

	if (res == LOCK_OK && r->type != REDIS_REPLY_ARRAY && r->type != REDIS_REPLY_INTEGER)
		return unexpected(script, label, c->name, st);
	return res;
}

/* Map the shared status codes 0 / -1 / -2 / -3 of release and renew
 * (-1 another kind of lock, -3 not a lock at all). */
static enum lock_result common_code(long long code, struct lock_state *out)
{
	switch (code) {
	case 0: return LOCK_NOT_HELD;
	case -1: return LOCK_WRONG_KIND;
	case -2: return LOCK_NOT_OWNER;
	case -3:
		out->why = LOCK_WHY_NOT_A_LOCK;
		return LOCK_WRONG_KIND;
	default: return LOCK_OK;
	}
}

/* A script's why code (lua/ headers); an unknown one says nothing more. */
static enum lock_why why_code(long long code)
{
	if ((code >= LOCK_WHY_QUEUE && code <= LOCK_WHY_WRITER) || code == LOCK_WHY_PRINCIPAL)
		return (enum lock_why)code;
	return LOCK_WHY_NONE;
}

static int64_t min_positive(int64_t a, int64_t b)
{
	if (a <= 0)
		return b;
	return a < b ? a : b;
}

/* When a caller that was refused should try again without a message.
 * pttl is the holder's lease as the script saw it: -2 free, -1 no expiry,
 * 0 expiring within the millisecond (look again at once, not never). */
/* Lease-end retries come this long after the lease end Redis reported. */
#define EXPIRY_MARGIN_MS 2

static int64_t retry_after(enum lock_kind kind, int64_t pttl, bool head)
{
	int64_t refresh = locks_queue_refresh_ms();

	/* Redis counts PTTL and our timers count now in whole milliseconds, so
	 * a retry at exactly the lease end can come a millisecond early and
	 * find the lease not quite over: one wasted run per loop that waits */
	if (pttl >= 0)
		pttl += EXPIRY_MARGIN_MS;

	switch (kind) {
	case LOCK_KIND_LOCK:
		return pttl > 0 ? pttl : 0;
	case LOCK_KIND_FAIR:
		/* only the head watches the holder's lease; the others are
		 * told on their channel when their turn comes, and their
		 * places are refreshed by locks_fair_refresh (refresh_place) */
		return head ? min_positive(pttl, refresh) : 0;
	default:
		/* a waiting writer may die without a word: look again */
		return min_positive(pttl, refresh);
	}
}

/* The lease a grant or renewal can count on: Redis started it no earlier
 * than the command was sent, so what is left now is at least its pttl
 * minus the time the call took (a Redis that stalled ate into it). 0 when
 * nothing is left: the answer came too late to be of use. */
static int64_t lease_left(long long pttl, int64_t sent_ms)
{
	int64_t left;

	if (pttl < 0)
		return pttl;
	left = pttl - (now_ms() - sent_ms);
	return left > 0 ? left : 0;
}

/* ----- Operations ----- */

/* Tell c's caller its outcome, and free c. */
static void deliver(struct call *c, enum lock_result res, const struct lock_state *st)
{
	if (c->done)
		c->done(c->ctx, res, st);
	else if (res != LOCK_OK && res != LOCK_NOT_HELD)
		log_warn("%s of %s '%s' failed (%d); the lease or queue place ends by itself",
			 c->what, kinds[c->kind].label, c->name, (int)res);
	free(c->owner);
	free(c->principal);
	free(c);
}

/* Replicas have c's change, or not (replica_sync.h). An unconfirmed grant
 * is no grant: a failover now would lose it, so its hold is released and
 * the caller hears LOCK_UNCONFIRMED (a repeat added no hold and releases
 * nothing). Anything else stands, and is counted. */
static void on_synced(void *arg, bool confirmed)
{
	struct call *c = arg;

	if (!confirmed && c->sync == SYNC_UNDO) {
		metrics_inc(METRIC_REPLICATION_UNCONFIRMED);
		if (c->st.added)
			locks_release(c->b, c->kind, c->name, c->owner, c->principal, NULL, NULL);
		c->res = LOCK_UNCONFIRMED;
		c->st.fault = "too few redis replicas acknowledged the grant in time "
			      "(--redis-sync-replicas); it was undone, retry shortly";
	} else if (!confirmed) {
		metrics_inc(METRIC_REPLICATION_UNCONFIRMED_KEPT);
		log_warn("%s of %s '%s' was not acknowledged by enough replicas; it stands, "
			 "but a failover now may undo it", c->what, kinds[c->kind].label, c->name);
	}
	deliver(c, c->res, &c->st);
}

static void on_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct lock_state st;
	enum lock_result res;

	memset(&st, 0, sizeof(st));
	res = check_reply(r, c, &st);
	if (res == LOCK_OK && c->decode)
		c->decode(c, r, &res, &st);
	if (res == LOCK_OK && c->sync != SYNC_NONE && c->b->sync) {
		c->res = res;
		c->st = st;
		replica_sync_after(c->b->sync, on_synced, c);
		return;
	}
	deliver(c, res, &st);
}

static void acquire_decode(struct call *c, const redisReply *r, enum lock_result *res,
			   struct lock_state *out)
{
	switch (elem_int(r, 0)) {
	case 1:
		out->token = elem_int(r, 1);
		out->holds = elem_int(r, 2);
		out->ttl_ms = lease_left(elem_int(r, 3), c->sent_ms);
		out->locked = true;
		out->added = elem_int(r, 4) == 1;
		if (out->added && out->holds == 1)
			publish_change(c, "acquired");	/* a new holding */
		if (out->ttl_ms == 0) {
			log_warn("redis granted %s '%s' too late to be of use (lease over)",
				 kinds[c->kind].label, c->name);
			out->fault = "redis answered too slowly: the lease was over before its "
				   "answer came; retry shortly";
			*res = LOCK_BACKEND_DOWN;
		}
		break;
	case 0:
		out->ttl_ms = elem_int(r, 1) > 0 ? elem_int(r, 1) : 0;
		out->locked = elem_int(r, 1) != -2;
		out->retry_ms = retry_after(c->kind, elem_int(r, 1), elem_int(r, 2) == 1);
		out->queued = c->queue;
		out->refresh_place = c->queue && c->kind == LOCK_KIND_FAIR && elem_int(r, 2) != 1;
		out->why = why_code(elem_int(r, 3));
		out->others = elem_int(r, 4);
		*res = LOCK_HELD;
		break;
	case -2:
		out->locked = true;
		out->why = why_code(elem_int(r, 1));
		*res = LOCK_NOT_OWNER;
		break;
	default:
		*res = LOCK_WRONG_KIND;
		if (elem_int(r, 0) == -3)
			out->why = LOCK_WHY_NOT_A_LOCK;
	}
}

void locks_acquire(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, const char *principal, int64_t ttl_ms, unsigned flags,
		   lock_done_fn done, void *ctx)
{
	const struct kind_row *k = &kinds[kind];
	struct call *c = call_new(kind, name, "acquire", done, ctx);
	char lease[24], life[24];
	const char *args[] = { lease, owner, life, (flags & LOCK_REENTRANT) ? "1" : "0",
			       principal };

	c->queue = (flags & LOCK_QUEUE) && k->queues;
	c->decode = acquire_decode;
	if (b->sync) {
		c->sync = SYNC_UNDO;
		c->owner = xstrdup(owner);
		c->principal = xstrdup(principal);
	}
	snprintf(lease, sizeof(lease), "%lld", (long long)ttl_ms);
	snprintf(life, sizeof(life), "%lld", c->queue ? (long long)queue_ttl_ms : 0LL);
	run(b, c, &k->acquire, 5, args);
}

void locks_dequeue(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, lock_done_fn done, void *ctx)
{
	const struct kind_row *k = &kinds[kind];
	const char *args[] = { owner };

	if (!k->queues)
		abort();	/* only a kind with a queue reports st->queued */
	run(b, call_new(kind, name, "leaving the queue", done, ctx), &k->dequeue, 1, args);
}

/* Many strings as one script argument, however many there are:
 * <length>:<string>, one after another (unpack_list in lua/lib/common.lua).
 * The caller frees it. */
static char *pack_list(const char *const *v, size_t n)
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

/* What a fair_refresh's caller hears: c->ctx of its call. */
struct refresh_wait {
	lock_refresh_fn done;
	void *ctx;
};

static void on_refresh_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct refresh_wait *rw = c->ctx;
	struct lock_state st = { 0 };
	enum lock_result res = check_reply(r, c, &st);
	const char **retry = NULL;
	size_t n = 0;

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || elem_int(r, 0) != 1)) {
		res = common_code(elem_int(r, 0), &st);
		if (res == LOCK_OK || res == LOCK_NOT_HELD) {
			log_error("script %s gave an unexpected reply", scripts_name(c->script));
			res = LOCK_SCRIPT_ERROR;
		}
	}
	if (res == LOCK_OK) {
		retry = xcalloc(r->elements, sizeof(*retry));
		for (size_t i = 1; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_STRING)
				retry[n++] = r->element[i]->str;
	}
	rw->done(rw->ctx, res, retry, n);
	free(retry);
	free(rw);
	free(c);
}

void locks_fair_refresh(const struct backend *b, const char *name, const char *const *owners,
			size_t n, lock_refresh_fn done, void *ctx)
{
	struct refresh_wait *rw = xmalloc(sizeof(*rw));
	struct call *c = call_new(LOCK_KIND_FAIR, name, "queue refresh", NULL, rw);
	char life[24], *list;
	const char *args[2] = { life, NULL };

	rw->done = done;
	rw->ctx = ctx;
	list = pack_list(owners, n);
	args[1] = list;
	snprintf(life, sizeof(life), "%lld", (long long)queue_ttl_ms);
	run_to(b, c, &kinds[LOCK_KIND_FAIR].refresh, 2, args, on_refresh_reply);
	free(list);
}

static void release_decode(struct call *c, const redisReply *r, enum lock_result *res,
			   struct lock_state *out)
{
	*res = common_code(elem_int(r, 0), out);
	if (*res == LOCK_NOT_OWNER) {
		out->why = why_code(elem_int(r, 1));
		out->others = elem_int(r, 2);
		return;
	}
	out->holds = elem_int(r, 1);
	/* read-write releases say whether the lock is free; for the exclusive
	 * kinds it is free when the owner's holds are gone */
	out->locked = r->elements > 2 ? elem_int(r, 2) == 0 : out->holds > 0;
	if (*res == LOCK_OK && out->holds == 0)
		publish_change(c, "released");	/* the owner's holding ended */
}

void locks_release(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, const char *principal, lock_done_fn done, void *ctx)
{
	struct call *c = call_new(kind, name, "release", done, ctx);
	const char *args[] = { owner, principal };

	c->decode = release_decode;
	c->sync = SYNC_KEEP;
	run(b, c, &kinds[kind].release, 2, args);
}

static void force_decode(struct call *c, const redisReply *r, enum lock_result *res,
			 struct lock_state *out)
{
	if (r->integer < 0) {
		*res = LOCK_WRONG_KIND;
		if (r->integer == -3)
			out->why = LOCK_WHY_NOT_A_LOCK;
	}
	out->locked = r->integer == 1;	/* it was held and is now free */
	if (out->locked)
		publish_change(c, "released");
}

void locks_force_release(const struct backend *b, enum lock_kind kind, const char *name,
			 lock_done_fn done, void *ctx)
{
	const struct kind_row *k = &kinds[kind];
	struct call *c = call_new(kind, name, "forced release", done, ctx);
	const char *args[] = { k->force_mode };

	c->decode = force_decode;
	c->sync = SYNC_KEEP;
	run(b, c, &k->force_release, k->force_mode ? 1 : 0, args);
}

static void renew_decode(struct call *c, const redisReply *r, enum lock_result *res,
			 struct lock_state *out)
{
	*res = common_code(elem_int(r, 0), out);
	if (*res == LOCK_NOT_OWNER) {
		out->why = why_code(elem_int(r, 1));
		out->others = elem_int(r, 2);
		return;
	}
	out->ttl_ms = lease_left(elem_int(r, 1), c->sent_ms);
	out->locked = *res == LOCK_OK;
	if (*res == LOCK_OK && out->ttl_ms == 0) {
		/* renewed too late to count */
		out->fault = "redis answered too slowly: the lease was over before its "
			   "answer came; retry shortly";
		*res = LOCK_BACKEND_DOWN;
	}
	if (*res == LOCK_OK && out->ttl_ms > 0) {
		/* a shorter lease ends sooner than this lock's waiters were
		 * told, and expiry publishes nothing: they retry by then */
		char *channel = locks_wait_channel(c->kind, c->name, c->owner);

		waiters_lease_ends(c->b->waiters, channel, now_ms() + out->ttl_ms);
		free(channel);
	}
}

void locks_renew(const struct backend *b, enum lock_kind kind, const char *name,
		 const char *owner, const char *principal, int64_t ttl_ms, lock_done_fn done,
		 void *ctx)
{
	struct call *c = call_new(kind, name, "renewal", done, ctx);
	char lease[24];
	const char *args[] = { lease, owner, principal };

	c->decode = renew_decode;
	c->sync = SYNC_KEEP;
	c->owner = xstrdup(owner);
	snprintf(lease, sizeof(lease), "%lld", (long long)ttl_ms);
	run(b, c, &kinds[kind].renew, 3, args);
}

/* ----- Inspect ----- */

/* The queue places an inspect lists, at most (the rest are counted). */
#define PLACES_SHOWN 100

/* What an inspect's caller hears: c->ctx of its call. */
struct view_wait {
	lock_view_fn done;
	void *ctx;
};

/* Element i of array reply r, or NULL. */
static const redisReply *elem(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return NULL;
	return r->element[i];
}

/* Element i as a fresh string, or NULL when it is none or "" (no
 * principal recorded). */
static char *elem_dup(const redisReply *r, size_t i)
{
	const redisReply *e = elem(r, i);

	if (!e || e->type != REDIS_REPLY_STRING || e->len == 0)
		return NULL;
	return xstrdup(e->str);
}

/* The index of a state (docs/ARCHITECTURE.md, "Watching"): the fencing
 * token of its holding -- a read-write lock's writer while it writes, else
 * its newest reader's -- 1 for a holding dlockd has no token of (a
 * Redisson client's), 0 when free. */
static int64_t view_index(const struct lock_view *v)
{
	int64_t index = 0;

	for (size_t i = 0; i < v->nholders; i++) {
		const struct lock_holding *h = &v->holders[i];
		int64_t t = h->token > 0 ? h->token : 1;

		if (v->mode == LOCK_MODE_WRITE && h->side != LOCK_MODE_WRITE)
			continue;
		if (t > index)
			index = t;
	}
	return index;
}

/* A status script's reply (lua/lock_status.lua, lua/rw_status.lua) as a
 * view; NULL when it is not shaped as they promise. */
static struct lock_view *view_decode(const struct call *c, const redisReply *r)
{
	bool rw = c->script == SCRIPT_RW_STATUS;
	size_t per = rw ? 6 : 4;
	const redisReply *h = elem(r, 2), *q = elem(r, 3);
	struct lock_view *v;

	if (!h || h->type != REDIS_REPLY_ARRAY || h->elements % per ||
	    (q && (q->type != REDIS_REPLY_ARRAY || q->elements % 2)))
		return NULL;
	v = xcalloc(1, sizeof(*v));
	v->locked = elem_int(r, 0) > 0;
	v->mode = rw ? (enum lock_mode)elem_int(r, 0) : LOCK_MODE_NONE;
	v->ttl_ms = v->locked ? elem_int(r, 1) : 0;
	v->holders = xcalloc(h->elements / per + 1, sizeof(*v->holders));
	for (size_t i = 0; i < h->elements; i += per) {
		struct lock_holding *x = &v->holders[v->nholders];

		x->owner = elem_dup(h, i);
		if (!x->owner)
			continue;
		x->holds = elem_int(h, i + 1);
		x->token = elem_int(h, i + 2);
		x->principal = elem_dup(h, i + 3);
		x->side = !rw ? LOCK_MODE_NONE
			      : elem_int(h, i + 4) == 2 ? LOCK_MODE_WRITE : LOCK_MODE_READ;
		x->ttl_ms = rw ? elem_int(h, i + 5) : v->ttl_ms;
		if (x->ttl_ms >= 0 && (v->changes_in_ms <= 0 || x->ttl_ms < v->changes_in_ms))
			v->changes_in_ms = x->ttl_ms > 0 ? x->ttl_ms : 1;
		v->nholders++;
	}
	if (v->changes_in_ms == 0)
		v->changes_in_ms = -1;	/* free, or no holding with a lease */
	v->places = xcalloc(q ? q->elements / 2 + 1 : 1, sizeof(*v->places));
	for (size_t i = 0; q && i < q->elements; i += 2) {
		struct lock_place *p = &v->places[v->nplaces];

		p->owner = elem_dup(q, i);
		p->ttl_ms = elem_int(q, i + 1);
		if (p->owner)
			v->nplaces++;
	}
	v->queued = elem_int(r, 4);
	v->index = view_index(v);
	return v;
}

static void on_view_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct view_wait *vw = c->ctx;
	struct lock_state st = { 0 };
	enum lock_result res = check_reply(r, c, &st);
	struct lock_view *v = NULL;

	if (res == LOCK_OK && r->type == REDIS_REPLY_ARRAY && elem_int(r, 0) < 0) {
		res = LOCK_WRONG_KIND;
		if (elem_int(r, 0) == -3)
			st.why = LOCK_WHY_NOT_A_LOCK;
	} else if (res == LOCK_OK && !(v = view_decode(c, r))) {
		log_error("script %s gave a reply it does not promise", scripts_name(c->script));
		st.fault = "the lock script gave redis an answer dlockd does not understand";
		res = LOCK_SCRIPT_ERROR;
	}
	if (v) {
		st.locked = v->locked;
		st.ttl_ms = v->ttl_ms;
		st.mode = v->mode;
	}
	vw->done(vw->ctx, res, &st, v);
	free(vw);
	free(c);
}

void locks_inspect(const struct backend *b, enum lock_kind kind, const char *name,
		   lock_view_fn done, void *ctx)
{
	struct view_wait *vw = xmalloc(sizeof(*vw));
	struct call *c = call_new(kind, name, "status", NULL, vw);
	char shown[24];
	const char *args[] = { shown };

	vw->done = done;
	vw->ctx = ctx;
	snprintf(shown, sizeof(shown), "%d", PLACES_SHOWN);
	run_to(b, c, &kinds[kind].status, kind == LOCK_KIND_FAIR ? 1 : 0, args, on_view_reply);
}

void locks_view_free(struct lock_view *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nholders; i++) {
		free(v->holders[i].owner);
		free(v->holders[i].principal);
	}
	for (size_t i = 0; i < v->nplaces; i++)
		free(v->places[i].owner);
	free(v->holders);
	free(v->places);
	free(v);
}

const struct lock_holding *locks_view_holding(const struct lock_view *v, const char *owner,
					      enum lock_mode side)
{
	for (size_t i = 0; v && i < v->nholders; i++)
		if (v->holders[i].side == side && !strcmp(v->holders[i].owner, owner))
			return &v->holders[i];
	return NULL;
}

/* ----- Watching ----- */

/* dlockd_lock_state:{N}: what a watcher of lock name hears from dlockd
 * when a holding starts or ends. The caller frees it. */
static char *state_channel(const char *name)
{
	char *rname = redis_name(name);
	char *ch = locks_prefix_name("dlockd_lock_state", rname);

	free(rname);
	return ch;
}

int locks_watch_channels(enum lock_kind kind, const char *name, char *channels[2])
{
	channels[0] = state_channel(name);
	if (kinds[kind].per_owner_channel)
		return 1;	/* a fair lock's releases speak to its queue head only */
	channels[1] = locks_wait_channel(kind, name, NULL);
	return 2;
}

/* When a failed PUBLISH was last logged (now_ms()): at most one line a
 * minute, not one per request (an ACL that refuses the channel refuses
 * them all). */
static _Atomic int64_t publish_failure_logged_ms;

static void on_published(void *arg, redisReply *r)
{
	char *channel = arg;
	int64_t now = now_ms(), last = atomic_load(&publish_failure_logged_ms);

	if ((!r || r->type == REDIS_REPLY_ERROR) && (last == 0 || now - last >= 60000) &&
	    atomic_compare_exchange_strong(&publish_failure_logged_ms, &last, now))
		log_warn("PUBLISH on %s failed (%s): watchers see changes only at a lease end "
			 "or their wait_ms (logged once a minute)", channel,
			 r ? r->str : "no answer");
	free(channel);
}

/* The request c made started (what "acquired") or ended ("released") a
 * holding: tell the lock's watchers, on every dlockd. Sent once Redis has
 * answered, so a watcher woken by it reads the change. */
static void publish_change(const struct call *c, const char *what)
{
	char *channel = state_channel(c->name);
	const char *argv[] = { scripts_publish_command(), channel, what };

	redis_conn_send(c->b->redis, 3, argv, NULL, false, on_published, channel);
}

/* ----- Listing ----- */

/* The keys a page's first SCAN visits (it filters by MATCH and TYPE
 * afterwards); later ones are sized by the density of locks seen. */
#define LIST_SCAN_COUNT 1000
/* Hashes one lock_list call looks at, at most. */
#define LIST_INSPECT_MAX 64
/* Redis calls (SCANs and lock_lists) after which a page that got
 * somewhere ends: each call is short, and a page never keeps Redis or
 * the loop busy for long. */
#define LIST_CALLS_MAX 24

/* One page being listed. A page ends between two of SCAN's batches, so
 * its cursor is SCAN's own, and the next page goes on exactly as SCAN
 * would (its promise holds across pages). A batch that holds more locks
 * than the page has room for is not cut: SCAN is asked again from the
 * same cursor for fewer keys (a prefix of the same batch), down to one
 * bucket of Redis' table. Only a single bucket holding more locks than
 * the room (a limit below a handful) is cut: taken in name order, the
 * cursor then says "<cursor>:<name>", and the next page asks SCAN for that
 * one bucket again and skips the names up to <name>. Nothing of a page
 * lives here once it is answered. */
struct listing {
	const struct backend *b;
	char *prefix;		/* as asked, for the log */
	char *pattern;		/* SCAN's MATCH: <key prefix><prefix>*, escaped */
	bool cluster;		/* the keys are spread over a cluster's masters */
	unsigned shard;		/* ... the lowest slot of the master being
				 * scanned (the masters are walked in the order
				 * of their lowest slots) */
	char scan[24];		/* the SCAN cursor of the batch at hand */
	char next[24];		/* the cursor SCAN gave after that batch */
	unsigned count;		/* SCAN's COUNT for the batch at hand */
	char *after;		/* the batch's names up to this one were
				 * listed already (a cut bucket); NULL: none */
	unsigned limit, calls;
	bool moved;		/* the page got past a batch */
	char **names;		/* the batch's hashes, as lock names, sorted */
	size_t nnames, at;	/* names[0..at) were looked at */
	size_t inspecting;	/* names[at..at + inspecting) are with lock_list */
	struct lock_entry *bv;	/* the batch's locks, in name order */
	size_t bn;
	struct lock_entry *v;	/* the page's locks, limit at most */
	size_t n;
	lock_list_fn done;
	void *ctx;
};

/* Could name be a lock's name (what GET /locks/{name} takes)? */
static bool listable(const char *name, size_t len)
{
	if (len == 0 || len > LOCKS_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!locks_id_char((unsigned char)name[i]))
			return false;
	return true;
}

/* SCAN's MATCH for names starting with prefix: <key prefix><prefix>*,
 * with the glob characters of both escaped. The caller frees it. */
static char *match_pattern(const char *prefix)
{
	char *full = redis_name(prefix), *out = xmalloc(2 * strlen(full) + 2), *o = out;

	for (const char *p = full; *p; p++) {
		if (strchr("*?[]\\", *p))
			*o++ = '\\';
		*o++ = *p;
	}
	*o++ = '*';
	*o = '\0';
	free(full);
	return out;
}

/* Read a page's cursor into l->scan, l->after and l->count; -1 if it is
 * not one. */
static int cursor_parse(struct listing *l, const char *cursor, bool cluster)
{
	size_t digits;
	const char *name;

	strcpy(l->scan, "0");
	l->count = LIST_SCAN_COUNT;
	l->cluster = cluster;
	l->shard = 0;
	if (!cursor || !*cursor)
		return 0;
	if (cluster) {
		/* "<shard>.<SCAN's cursor>[:<name>]" */
		digits = strspn(cursor, "0123456789");
		if (digits == 0 || digits > 5 || cursor[digits] != '.' ||
		    atoi(cursor) >= CLUSTER_SLOT_COUNT)
			return -1;
		l->shard = (unsigned)atoi(cursor);
		cursor += digits + 1;
	}
	digits = strspn(cursor, "0123456789");
	name = cursor + digits + 1;
	/* SCAN's cursors are unsigned 64-bit numbers: 20 digits at most */
	if (digits == 0 || digits > 20 ||
	    (digits == 20 && strncmp(cursor, "18446744073709551615", 20) > 0))
		return -1;
	if (cursor[digits] && (cursor[digits] != ':' || !listable(name, strlen(name))))
		return -1;
	memcpy(l->scan, cursor, digits);
	l->scan[digits] = '\0';
	if (cursor[digits]) {
		l->after = xstrdup(name);
		l->count = 1;	/* the cut bucket again */
	}
	return 0;
}

static void entries_free(struct lock_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < v[i].nholders; j++)
			free((void *)v[i].holders[j].owner);
		free((void *)v[i].holders);
		free((void *)v[i].name);
	}
}

static void list_batch_free(struct listing *l)
{
	for (size_t i = 0; i < l->nnames; i++)
		free(l->names[i]);
	free(l->names);
	l->names = NULL;
	l->nnames = l->at = 0;
	entries_free(l->bv, l->bn);
	free(l->bv);
	l->bv = NULL;
	l->bn = 0;
}

static void list_free(struct listing *l)
{
	entries_free(l->v, l->n);
	free(l->v);
	list_batch_free(l);
	free(l->after);
	free(l->pattern);
	free(l->prefix);
	free(l);
}

static void list_fail(struct listing *l, enum lock_result res, const struct lock_state *st)
{
	l->done(l->ctx, res, st, NULL);
	list_free(l);
}

/* The page is over: at the end of the keys (end), else the next starts at
 * l->scan, past the name upto of its bucket (NULL: none). */
static void list_finish(struct listing *l, bool end, const char *upto)
{
	struct lock_state st = { 0 };
	char *cursor = NULL;
	struct lock_page page;

	if (!end && l->cluster)
		cursor = upto ? xasprintf("%u.%s:%s", l->shard, l->scan, upto)
			      : xasprintf("%u.%s", l->shard, l->scan);
	else if (!end)
		cursor = upto ? xasprintf("%s:%s", l->scan, upto) : xstrdup(l->scan);
	page = (struct lock_page){ .n = l->n, .locks = l->v, .cursor = cursor };
	l->done(l->ctx, LOCK_OK, &st, &page);
	free(cursor);
	list_free(l);
}

static void on_scan(void *arg, redisReply *r);
static void on_inspect(void *arg, redisReply *r);

/* SCAN the batch at l->scan, or end the page if it took its calls (and
 * got somewhere: a page always makes progress, so paging always ends). */
static void list_scan(struct listing *l)
{
	char count[16];
	const char *argv[] = { "SCAN", l->scan, "MATCH", l->pattern, "COUNT", count,
			       "TYPE", "hash" };

	if (l->calls >= LIST_CALLS_MAX && (l->n > 0 || l->moved)) {
		list_finish(l, false, l->after);
		return;
	}
	snprintf(count, sizeof(count), "%u", l->count);
	l->calls++;
	redis_conn_send_slot(l->b->redis, l->cluster ? (int)l->shard : -1, 8, argv, NULL, on_scan,
			     l);
}

/* Ask lock_list about the next names of the batch. */
static void list_inspect(struct listing *l)
{
	/* on a cluster one name a call: a script runs on one slot */
	size_t max = l->cluster ? 1 : LIST_INSPECT_MAX;
	size_t k = l->nnames - l->at < max ? l->nnames - l->at : max;
	char **rnames = xcalloc(k, sizeof(*rnames)), **tags = xcalloc(k, sizeof(*tags));
	const char *args[2];

	for (size_t i = 0; i < k; i++) {
		rnames[i] = redis_name(l->names[l->at + i]);
		tags[i] = tag_name(rnames[i]);
	}
	args[0] = pack_list((const char *const *)rnames, k);
	args[1] = pack_list((const char *const *)tags, k);
	l->inspecting = k;
	l->calls++;
	scripts_run(l->b->redis, SCRIPT_LOCK_LIST, l->cluster, (const char *const *)rnames, 2,
		    args, on_inspect, l);
	for (size_t i = 0; i < k; i++) {
		free(rnames[i]);
		free(tags[i]);
	}
	free(rnames);
	free(tags);
	free((void *)args[0]);
	free((void *)args[1]);
}

/* Move the batch's first k locks into the page (the rest are dropped). */
static void list_take(struct listing *l, size_t k)
{
	memcpy(l->v + l->n, l->bv, k * sizeof(*l->bv));
	l->n += k;
	memmove(l->bv, l->bv + k, (l->bn - k) * sizeof(*l->bv));
	l->bn -= k;
}

/* A cluster's listing is through with one master: go on with the next
 * (true), or there is none. */
static bool next_shard(struct listing *l)
{
	int next = redis_conn_next_shard(l->b->redis, l->shard);

	if (next < 0)
		return false;
	l->shard = (unsigned)next;	/* from its start: SCAN's cursor is "0" */
	return true;
}

/* The batch is looked at. If its locks fit, they join the page and the
 * page goes on with the next batch (SCAN sized by the locks seen) or
 * ends; if not, SCAN is asked again for fewer keys, or, down to one
 * bucket, it is cut. */
static void list_batch_done(struct listing *l)
{
	size_t room = l->limit - l->n, bn = l->bn;
	uint64_t want;

	if (bn > room && l->count > 1) {
		/* a prefix of the same batch, with about half the room's worth */
		want = (uint64_t)l->count * room / (2 * bn);
		l->count = want > 0 ? (unsigned)want : 1;
		list_batch_free(l);
		list_scan(l);
		return;
	}
	if (bn > room) {
		/* one bucket with more locks than room: cut it in name order */
		char *upto = xstrdup(l->bv[room - 1].name);

		list_take(l, room);
		list_finish(l, false, upto);
		free(upto);
		return;
	}
	list_take(l, bn);
	list_batch_free(l);
	free(l->after);
	l->after = NULL;
	l->moved = true;
	memcpy(l->scan, l->next, sizeof(l->scan));
	room -= bn;
	if (!strcmp(l->scan, "0") && !(l->cluster && next_shard(l)))
		list_finish(l, true, NULL);
	else if (room == 0)
		list_finish(l, false, NULL);
	else {
		want = bn ? (uint64_t)l->count * room / bn : (uint64_t)l->count * 4;
		l->count = want < 1 ? 1 : want > LIST_SCAN_COUNT ? LIST_SCAN_COUNT : (unsigned)want;
		list_scan(l);
	}
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* SCAN's answer: {next cursor, {key, ...}}. The batch is the keys that
 * can be lock names under the key prefix, past l->after, sorted. */
static void on_scan(void *arg, redisReply *r)
{
	struct listing *l = arg;
	struct lock_state st = { 0 };
	enum lock_result res = check_answer(r, "SCAN", "the listing of", l->prefix, &st);
	size_t plen = strlen(key_prefix);
	const redisReply *keys;

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
			       r->element[0]->type != REDIS_REPLY_STRING ||
			       r->element[0]->len == 0 || r->element[0]->len >= sizeof(l->next) ||
			       strspn(r->element[0]->str, "0123456789") != r->element[0]->len ||
			       r->element[1]->type != REDIS_REPLY_ARRAY))
		res = unexpected("SCAN", "the listing of", l->prefix, &st);
	if (res != LOCK_OK) {
		if (res == LOCK_SCRIPT_ERROR)
			st.fault = "redis' SCAN failed (dlockd's log has redis' error)";
		list_fail(l, res, &st);
		return;
	}
	memcpy(l->next, r->element[0]->str, r->element[0]->len + 1);
	keys = r->element[1];
	l->names = xcalloc(keys->elements + 1, sizeof(*l->names));
	for (size_t i = 0; i < keys->elements; i++) {
		const redisReply *k = keys->element[i];

		if (k->type != REDIS_REPLY_STRING || k->len < plen ||
		    memcmp(k->str, key_prefix, plen) || !listable(k->str + plen, k->len - plen) ||
		    (l->after && strcmp(k->str + plen, l->after) <= 0))
			continue;
		l->names[l->nnames++] = xstrdup(k->str + plen);
	}
	qsort(l->names, l->nnames, sizeof(*l->names), compare_names);
	l->bv = xcalloc(l->nnames + 1, sizeof(*l->bv));
	l->at = 0;
	if (l->nnames)
		list_inspect(l);
	else
		list_batch_done(l);
}

/* A copy of an owner field for people: printable ASCII, each other byte
 * '?' (an owner that is not dlockd's or Redisson's may hold anything). */
static char *owner_copy(const redisReply *f)
{
	char *s = xmalloc(f->len + 1);

	for (size_t i = 0; i < f->len; i++)
		s[i] = f->str[i] >= 0x20 && f->str[i] < 0x7f ? f->str[i] : '?';
	s[f->len] = '\0';
	return s;
}

/* One lock of lock_list's answer into le; -1 if e is not one. */
static int entry_decode(struct lock_entry *le, const char *name, const redisReply *e)
{
	size_t first, step, nh;
	struct lock_holder *h;
	bool rw;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
		return -1;
	rw = elem_int(e, 0) == 2;
	first = rw ? 3 : 2;
	step = rw ? 3 : 2;
	if ((elem_int(e, 0) != 1 && !rw) || e->element[1]->type != REDIS_REPLY_INTEGER ||
	    e->elements < first || (e->elements - first) % step ||
	    (rw && elem_int(e, 2) != LOCK_MODE_READ && elem_int(e, 2) != LOCK_MODE_WRITE))
		return -1;
	nh = (e->elements - first) / step;
	for (size_t i = 0; i < nh; i++) {
		redisReply *const *f = e->element + first + i * step;
		long long side = rw ? f[2]->integer : LOCK_MODE_NONE;

		if (f[0]->type != REDIS_REPLY_STRING || f[1]->type != REDIS_REPLY_INTEGER ||
		    (rw && (f[2]->type != REDIS_REPLY_INTEGER ||
			    (side != LOCK_MODE_READ && side != LOCK_MODE_WRITE))))
			return -1;
	}
	h = xcalloc(nh ? nh : 1, sizeof(*h));
	for (size_t i = 0; i < nh; i++) {
		redisReply *const *f = e->element + first + i * step;

		h[i] = (struct lock_holder){ .owner = owner_copy(f[0]), .holds = f[1]->integer,
					     .side = rw ? (enum lock_mode)f[2]->integer
						       : LOCK_MODE_NONE };
	}
	*le = (struct lock_entry){
		.name = xstrdup(name),
		.rw = rw,
		.mode = rw ? (enum lock_mode)elem_int(e, 2) : LOCK_MODE_NONE,
		.ttl_ms = e->element[1]->integer < -1 ? -1 : e->element[1]->integer,
		.nholders = nh,
		.holders = h,
	};
	return 0;
}

/* lock_list's answer: one element per name asked about, 0 for those that
 * are no lock now. */
static void on_inspect(void *arg, redisReply *r)
{
	struct listing *l = arg;
	struct lock_state st = { 0 };
	const char *script = scripts_name(SCRIPT_LOCK_LIST);
	enum lock_result res = check_answer(r, script, "the listing of", l->prefix, &st);

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != l->inspecting))
		res = unexpected(script, "the listing of", l->prefix, &st);
	for (size_t i = 0; res == LOCK_OK && i < l->inspecting; i++) {
		const redisReply *e = r->element[i];

		if (e->type == REDIS_REPLY_INTEGER && e->integer == 0)
			continue;
		if (entry_decode(&l->bv[l->bn], l->names[l->at + i], e) < 0)
			res = unexpected(script, "the listing of", l->prefix, &st);
		else
			l->bn++;
	}
	if (res != LOCK_OK) {
		list_fail(l, res, &st);
		return;
	}
	l->at += l->inspecting;
	if (l->at < l->nnames)
		list_inspect(l);
	else
		list_batch_done(l);
}

int locks_list(const struct backend *b, const char *prefix, unsigned limit, const char *cursor,
	       lock_list_fn done, void *ctx)
{
	struct listing *l = xcalloc(1, sizeof(*l));

	if (cursor_parse(l, cursor, redis_conn_is_cluster(b->redis)) < 0) {
		free(l);
		return -1;
	}
	l->b = b;
	l->prefix = xstrdup(prefix);
	l->pattern = match_pattern(prefix);
	l->limit = limit < 1 ? 1 : limit > LOCKS_LIST_MAX ? LOCKS_LIST_MAX : limit;
	l->v = xcalloc(l->limit, sizeof(*l->v));
	l->done = done;
	l->ctx = ctx;
	list_scan(l);
	return 0;
}

/* ----- The backend itself ----- */

/* PING's answer: LOCK_OK for PONG; an error reply (LOADING, BUSY,
 * NOPERM...) is LOCK_BACKEND_DOWN with its meaning in st->fault. */
static void on_pong(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct lock_state st = { 0 };
	enum lock_result res = LOCK_OK;

	if (!r || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG")) {
		res = LOCK_BACKEND_DOWN;
		if (r && r->type == REDIS_REPLY_ERROR) {
			st.fault = redis_error_unavailable(r->str);
			if (!st.fault)
				st.fault = "redis answered PING with an error (see dlockd's log)";
			log_warn("readyz: redis answered PING: %s", r->str);
		}
	}
	c->done(c->ctx, res, &st);
	free(c);
}

/* A cluster's CLUSTER INFO: ready only while the cluster serves every
 * slot (cluster_state:ok); a node that answers PING in a cluster that is
 * down grants nothing. */
static void on_cluster_info(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct lock_state st = { 0 };
	enum lock_result res = LOCK_OK;

	if (!r || r->type != REDIS_REPLY_STRING || !strstr(r->str, "cluster_state:ok")) {
		res = LOCK_BACKEND_DOWN;
		if (r && r->type == REDIS_REPLY_ERROR)
			st.fault = redis_error_unavailable(r->str);
		else if (r)
			st.fault = "the redis cluster is down (cluster_state is not ok)";
	}
	c->done(c->ctx, res, &st);
	free(c);
}

void locks_ping(const struct backend *b, lock_done_fn done, void *ctx)
{
	struct call *c = call_new(LOCK_KIND_LOCK, "", "ping", done, ctx);

	if (redis_conn_is_cluster(b->redis))
		redis_conn_send(b->redis, 2, (const char *[]){ "CLUSTER", "INFO" }, NULL, false,
				on_cluster_info, c);
	else
		redis_conn_send(b->redis, 1, (const char *[]){ "PING" }, NULL, false, on_pong, c);
}

bool locks_idle(const struct backend *b)
{
	return redis_conn_idle(b->redis);
}

bool locks_subscriber_up(const struct backend *b)
{
	return pubsub_connected(b->pubsub);
}
