/* locks.c -- the lock-kind table: for each kind, which script does each
 * operation and which Redis keys it is given, plus the decoding of script
 * replies into domain results. Key names follow Redisson byte for byte
 * (docs/internals/architecture.md lists them) so both can share one Redis; dlockd's
 * own keys, dlockd_rwlock_writers:{N} and the holders' hash
 * dlockd_lock_owners:{N} (each holding's fencing token and token name, and
 * the number of its last change, which an undo checks), are invisible to
 * Redisson.
 * With a key prefix (--key-prefix) lock N is <prefix>N in Redis, and every
 * derived name is built from that, as Redisson's NameMapper does.
 *
 * Every derived name of a lock is built once per call (struct keys) and a
 * kind's row lists, per operation, which of them go into KEYS and in what
 * order, exactly as the script's header comment names them.
 *
 * Also here: inspecting a lock (locks_inspect), the channels its watchers
 * listen on and what is published there. The backend's own health is
 * health.c's. The listing of the locks held (GET /locks) is listing.c's;
 * it shares the names in Redis and the checking of Redis' answers through
 * locks_redis.h. */
#include "service/lock/locks.h"
#include "service/lock/locks_redis.h"

#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/metrics.h"
#include "service/lock/backend.h"
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
	K_PERMITS,	/* {N}:timeout: a semaphore's permits out */
	K_SEM_WAITERS,	/* dlockd_sem_waiters:{N}: a semaphore's waiting owners */
	K_STATE,	/* dlockd_lock_state:{N}: watchers' channel */
	K_COUNT
};

#define MAX_KEYS 7

struct op_row {
	enum script_id script;
	enum key_id keys[MAX_KEYS + 1];
	bool tells;	/* its script tells the lock's watchers of a holding it
			 * starts or ends (on K_STATE, or on the kind's channel,
			 * where they listen too): no PUBLISH after it */
};

struct kind_row {
	const char *label;		/* for messages and log lines */
	const char *channel_prefix;	/* waiters listen on <prefix>:{N} */
	bool per_owner_channel;		/* ... :<owner> (fair locks) */
	bool queues;			/* acquire may hold a queue place */
	unsigned wait_flags;		/* enum lock_wait_flags */
	const char *force_mode;		/* ARGV of force release, or NULL */
	const char *side;		/* read-write locks: ARGV of undo */
	struct op_row acquire, release, force_release, renew, status, dequeue, undo;
	struct op_row refresh;		/* fair: many waiters' queue places at once */
	struct op_row set_limit;	/* semaphores */
};

static const struct kind_row kinds[LOCK_KIND_COUNT] = {
	[LOCK_KIND_LOCK] = {
		.label = "lock",
		.channel_prefix = "redisson_lock__channel",
		.acquire = { SCRIPT_LOCK_ACQUIRE, { K_LOCK, K_TOKEN, K_OWNERS, K_STATE }, true },
		/* its "0" on K_CHANNEL tells the watchers */
		.release = { SCRIPT_LOCK_RELEASE, { K_LOCK, K_CHANNEL, K_OWNERS }, true },
		.force_release = { SCRIPT_LOCK_FORCE_RELEASE, { K_LOCK, K_CHANNEL, K_OWNERS } },
		.renew = { SCRIPT_LOCK_RENEW, { K_LOCK, K_OWNERS, K_CHANNEL } },
		.status = { SCRIPT_LOCK_STATUS, { K_LOCK, K_OWNERS } },
		.undo = { SCRIPT_LOCK_UNDO, { K_LOCK, K_CHANNEL, K_OWNERS } },
	},
	[LOCK_KIND_FAIR] = {
		.label = "fair lock",
		.channel_prefix = "redisson_lock__channel",
		.per_owner_channel = true,
		.queues = true,
		.acquire = { SCRIPT_FAIR_ACQUIRE,
			     { K_LOCK, K_TOKEN, K_QUEUE, K_DEADLINES, K_CHANNEL, K_OWNERS, K_STATE },
			     true },
		.release = { SCRIPT_FAIR_RELEASE,
			     { K_LOCK, K_QUEUE, K_DEADLINES, K_CHANNEL, K_OWNERS, K_STATE }, true },
		.force_release = { SCRIPT_FAIR_FORCE_RELEASE,
				   { K_LOCK, K_QUEUE, K_DEADLINES, K_CHANNEL, K_OWNERS } },
		/* a shorter lease is told to the queue head (K_CHANNEL: the
		 * prefix of the waiters' own channels) */
		.renew = { SCRIPT_LOCK_RENEW, { K_LOCK, K_OWNERS, K_CHANNEL, K_QUEUE } },
		.status = { SCRIPT_LOCK_STATUS, { K_LOCK, K_OWNERS, K_QUEUE, K_DEADLINES } },
		.dequeue = { SCRIPT_FAIR_DEQUEUE, { K_QUEUE, K_DEADLINES, K_CHANNEL } },
		.refresh = { SCRIPT_FAIR_REFRESH, { K_LOCK, K_QUEUE, K_DEADLINES, K_CHANNEL } },
		.undo = { SCRIPT_LOCK_UNDO,
			  { K_LOCK, K_CHANNEL, K_OWNERS, K_QUEUE, K_DEADLINES } },
	},
	[LOCK_KIND_READ] = {
		.label = "read lock",
		.channel_prefix = "redisson_rwlock",
		.wait_flags = LOCK_WAIT_TIMER_ALL,
		.force_mode = "read",
		.side = "read",
		.acquire = { SCRIPT_RW_READ_ACQUIRE,
			     { K_LOCK, K_TOKEN, K_TAG, K_WRITERS, K_OWNERS, K_STATE }, true },
		.release = { SCRIPT_RW_READ_RELEASE,
			     { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS, K_STATE }, true },
		.force_release = { SCRIPT_RW_FORCE_RELEASE,
				   { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
		.renew = { SCRIPT_RW_READ_RENEW, { K_LOCK, K_TAG, K_OWNERS } },
		.status = { SCRIPT_RW_STATUS, { K_LOCK, K_TAG, K_OWNERS } },
		.undo = { SCRIPT_RW_UNDO, { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
	},
	[LOCK_KIND_WRITE] = {
		.label = "write lock",
		.channel_prefix = "redisson_rwlock",
		.queues = true,
		.wait_flags = LOCK_WAIT_TIMER_ALL | LOCK_WAIT_WRITER,
		.force_mode = "write",
		.side = "write",
		.acquire = { SCRIPT_RW_WRITE_ACQUIRE,
			     { K_LOCK, K_TOKEN, K_TAG, K_WRITERS, K_OWNERS, K_STATE }, true },
		/* its "1" on K_CHANNEL tells the watchers */
		.release = { SCRIPT_RW_WRITE_RELEASE, { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS }, true },
		.force_release = { SCRIPT_RW_FORCE_RELEASE,
				   { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
		.renew = { SCRIPT_RW_WRITE_RENEW, { K_LOCK, K_TAG, K_OWNERS } },
		.status = { SCRIPT_RW_STATUS, { K_LOCK, K_TAG, K_OWNERS } },
		.dequeue = { SCRIPT_RW_WRITE_DEQUEUE, { K_WRITERS, K_CHANNEL } },
		.undo = { SCRIPT_RW_UNDO, { K_LOCK, K_CHANNEL, K_TAG, K_OWNERS } },
	},
	[LOCK_KIND_SEMAPHORE] = {
		.label = "semaphore",
		.channel_prefix = "redisson_sc",
		.queues = true,		/* a place only counts the waiting */
		.wait_flags = LOCK_WAIT_COUNTED,
		.acquire = { SCRIPT_SEM_ACQUIRE,
			     { K_LOCK, K_PERMITS, K_CHANNEL, K_TOKEN, K_OWNERS, K_SEM_WAITERS,
			       K_STATE }, true },
		/* its "<n>" on K_CHANNEL tells the watchers */
		.release = { SCRIPT_SEM_RELEASE, { K_LOCK, K_PERMITS, K_CHANNEL, K_OWNERS }, true },
		.force_release = { SCRIPT_SEM_FORCE_RELEASE,
				   { K_LOCK, K_PERMITS, K_CHANNEL, K_OWNERS } },
		.renew = { SCRIPT_SEM_RENEW, { K_LOCK, K_PERMITS, K_CHANNEL, K_OWNERS } },
		.status = { SCRIPT_SEM_STATUS,
			    { K_LOCK, K_PERMITS, K_OWNERS, K_SEM_WAITERS, K_TOKEN } },
		.dequeue = { SCRIPT_SEM_DEQUEUE, { K_SEM_WAITERS } },
		.undo = { SCRIPT_SEM_UNDO, { K_LOCK, K_PERMITS, K_CHANNEL, K_OWNERS } },
		.set_limit = { SCRIPT_SEM_SET_LIMIT, { K_LOCK, K_PERMITS, K_CHANNEL, K_OWNERS } },
	},
};

/* Queue places live this long unless refreshed; refreshed every third. */
static int64_t queue_ttl_ms = 5000;

/* The most live read holds of one owner, and of all readers, on one
 * read-write lock (config.c has the defaults people see). */
static int64_t read_holds_per_owner = 64, read_holds_per_lock = 256;

/* The most live places a fair lock's queue may have (config.c has the
 * default people see). */
static int64_t fair_queue_cap = 1000;

void locks_configure(int64_t ttl_ms)
{
	queue_ttl_ms = ttl_ms;
}

void locks_set_read_hold_caps(int64_t per_owner, int64_t per_lock)
{
	read_holds_per_owner = per_owner;
	read_holds_per_lock = per_lock;
}

void locks_set_fair_queue_cap(int64_t cap)
{
	fair_queue_cap = cap;
}

int64_t locks_queue_refresh_ms(void)
{
	return queue_ttl_ms / 3 > 0 ? queue_ttl_ms / 3 : 1;
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

void locks_set_key_prefix(const char *prefix)
{
	locks_redis_set_prefix(prefix);
}


/* prefix:{name} (Redisson's prefixName) */
static char *locks_prefix_name(const char *prefix, const char *name)
{
	return strchr(name, '{') ? xstrjoin(prefix, ":", name, NULL)
				 : xstrjoin(prefix, ":{", name, "}", NULL);
}


char *locks_wait_channel(enum lock_kind kind, const char *name, const char *owner)
{
	char *rname = locks_redis_name(name);
	char *base = locks_prefix_name(kinds[kind].channel_prefix, rname), *ch;

	free(rname);
	if (!kinds[kind].per_owner_channel || !owner)
		return base;
	ch = xstrjoin(base, ":", owner, NULL);
	free(base);
	return ch;
}

/* Every name a script of this lock may need, built on demand in buf (a
 * call's keys are a few names of a few hundred bytes; what does not fit
 * goes to the heap): no allocation per key. */
struct keys {
	enum lock_kind kind;
	const char *name;		/* the name in Redis: <prefix>N */
	const char *k[K_COUNT];
	char *heap[K_COUNT];		/* those that did not fit in buf */
	size_t used;			/* bytes of buf taken */
	char buf[2048];
};

/* a, b, c and d (a NULL ends them early) one after the other: key id. */
static const char *keys_join(struct keys *ks, enum key_id id, const char *a, const char *b,
			     const char *c, const char *d)
{
	const char *parts[] = { a, b, c, d };
	size_t lens[4], len = 0, n = 0;
	char *at;

	for (; n < ARRAY_SIZE(parts) && parts[n]; n++)
		len += lens[n] = strlen(parts[n]);
	if (len < sizeof(ks->buf) - ks->used) {
		at = ks->buf + ks->used;
		ks->used += len + 1;
	} else {
		at = ks->heap[id] = xmalloc(len + 1);
	}
	ks->k[id] = at;
	for (size_t i = 0; i < n; i++) {
		memcpy(at, parts[i], lens[i]);
		at += lens[i];
	}
	*at = '\0';
	return ks->k[id];
}

/* locks_prefix_name(prefix, name) as key id. */
static const char *keys_prefixed(struct keys *ks, enum key_id id, const char *prefix)
{
	bool tagged = strchr(ks->name, '{');

	return keys_join(ks, id, prefix, tagged ? ":" : ":{", ks->name, tagged ? NULL : "}");
}

/* Not an initializer: that would zero buf too. */
static void keys_init(struct keys *ks, enum lock_kind kind, const char *name)
{
	ks->kind = kind;
	ks->name = name;
	ks->used = 0;
	memset(ks->k, 0, sizeof(ks->k));
	memset(ks->heap, 0, sizeof(ks->heap));
}

static void keys_free(struct keys *ks)
{
	for (int i = 0; i < K_COUNT; i++)
		free(ks->heap[i]);
}

static const char *key_get(struct keys *ks, enum key_id id)
{
	bool tagged;

	if (ks->k[id])
		return ks->k[id];
	switch (id) {
	case K_LOCK:
		return ks->name;
	case K_TOKEN:
		return keys_prefixed(ks, id, "redisson_lock_token");
	case K_CHANNEL:
		return keys_prefixed(ks, id, kinds[ks->kind].channel_prefix);
	case K_QUEUE:
		return keys_prefixed(ks, id, "redisson_lock_queue");
	case K_DEADLINES:
		return keys_prefixed(ks, id, "redisson_lock_timeout");
	case K_TAG:	/* locks_tag_name */
		tagged = strchr(ks->name, '{');
		return keys_join(ks, id, tagged ? ks->name : "{", tagged ? NULL : ks->name, "}",
				 NULL);
	case K_WRITERS:
		return keys_prefixed(ks, id, "dlockd_rwlock_writers");
	case K_OWNERS:
		return keys_prefixed(ks, id, "dlockd_lock_owners");
	case K_PERMITS:
		/* Redisson's suffixName(N, "timeout") */
		tagged = strchr(ks->name, '{');
		return tagged ? keys_join(ks, id, ks->name, ":timeout", NULL, NULL)
			      : keys_join(ks, id, "{", ks->name, "}:timeout", NULL);
	case K_SEM_WAITERS:
		return keys_prefixed(ks, id, "dlockd_sem_waiters");
	case K_STATE:
		return keys_prefixed(ks, id, "dlockd_lock_state");
	case K_END:
	case K_COUNT:
		break;
	}
	abort();
}

/* What --redis-sync-replicas does after an operation changed a lock. */
enum call_sync {
	SYNC_NONE,	/* nothing: it changes no holding (or sync is off) */
	SYNC_UNDO,	/* an acquire: unconfirmed, it is taken back (locks_undo's
			 * script) and answered LOCK_UNCONFIRMED */
	SYNC_KEEP,	/* a release, renewal, force release: unconfirmed, it
			 * stands (a 503 would be one that took effect); counted */
};

/* An unconfirmed acquire's undo that Redis did not answer, or could not
 * run, is sent again this often while its caller waits, for at most
 * UNDO_PATIENCE_MS (a dropped connection is made again at once, a Redis
 * restarting or failing over takes longer); then the caller hears that
 * the change may stand. The undo is idempotent: a run that took the
 * change back leaves a mark the next one finds (lua/lock_undo.lua,
 * lua/rw_undo.lua). */
#define UNDO_RETRY_MS 100
#define UNDO_PATIENCE_MS 2000

/* One operation on its way: what decodes its reply and who hears of it. */
struct call {
	enum lock_kind kind;
	enum script_id script;
	bool queue;			/* acquire: the caller takes a queue place */
	bool told;			/* its script told the watchers (op_row's
					 * tells): no PUBLISH */
	int64_t sent_ms;
	void (*decode)(struct call *c, const redisReply *r, enum lock_result *res,
		       struct lock_state *out);
	lock_done_fn done;		/* NULL: only failures are logged */
	void *ctx;
	const struct backend *b;	/* whose connection and waiters it runs on */
	char *owner;			/* renew: the owner whose lease it is;
					 * acquire, undo: whose change (undone when
					 * unconfirmed or answered too late) */
	enum call_sync sync;		/* wait for replicas once Redis answered OK */
	enum lock_result res;		/* ... what Redis answered, kept meanwhile;
					 * an undo: what its caller hears */
	struct lock_state st;
	int64_t undo_until_ms;		/* an undo, a patient release: no new try
					 * after this (0: one) */
	char *principal;		/* a patient release: its token name */
	struct loop_timer undo_timer;	/* ... the next try */
	const char *what;		/* "release", ... for the log */
	char name[];
};

static void on_call_reply(void *arg, redisReply *r);
static void publish_change(const struct call *c, const char *what);

/* Run op's script with its keys and args; fn(c, reply) gets the reply,
 * and frees c, which the caller fills in before. */
static void run_to(const struct backend *b, struct call *c, const struct op_row *op, int nargs,
		   const char *const *args, redis_reply_fn fn)
{
	char *rname = locks_redis_name(c->name);
	struct keys ks;
	const char *keys[MAX_KEYS];
	int n = 0;

	keys_init(&ks, c->kind, rname);
	while (n < MAX_KEYS && op->keys[n] != K_END) {
		keys[n] = key_get(&ks, op->keys[n]);
		n++;
	}
	c->told = op->tells;
	c->script = op->script;
	c->b = b;
	c->sent_ms = now_ms();
	scripts_run(b->redis, op->script, n, keys, nargs, args, fn, c);
	keys_free(&ks);
	free(rname);
}

/* Run op's script, its reply decoded by on_call_reply. */
static void run(const struct backend *b, struct call *c, const struct op_row *op, int nargs,
		const char *const *args)
{
	run_to(b, c, op, nargs, args, on_call_reply);
}

static void on_undo_timer(struct loop *l, struct loop_timer *t);

static struct call *call_new(enum lock_kind kind, const char *name, const char *what,
			     lock_done_fn done, void *ctx)
{
	size_t len = strlen(name) + 1;
	struct call *c = xcalloc(1, sizeof(*c) + len);

	loop_timer_init(&c->undo_timer, on_undo_timer);
	c->kind = kind;
	c->what = what;
	c->done = done;
	c->ctx = ctx;
	memcpy(c->name, name, len);
	return c;
}

/* ----- Script replies ----- */


/* locks_check_answer for a script's reply, which is an array or an integer. */
static enum lock_result check_reply(const redisReply *r, const struct call *c,
				    struct lock_state *st)
{
	const char *script = scripts_name(c->script), *label = kinds[c->kind].label;
	enum lock_result res = locks_check_answer(r, script, label, c->name, st);

	if (res == LOCK_OK && r->type != REDIS_REPLY_ARRAY && r->type != REDIS_REPLY_INTEGER)
		return locks_unexpected(script, label, c->name, st);
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
	if ((code >= LOCK_WHY_QUEUE && code <= LOCK_WHY_WRITER) || code == LOCK_WHY_PRINCIPAL ||
	    code == LOCK_WHY_NO_PERMIT)
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

static void undo_send(struct call *c);

/* Replicas have c's change, or not (replica_sync.h). An unconfirmed
 * acquire is no grant: a failover now would lose it, so it is taken back
 * -- that change, and only while nothing has changed the holding since:
 * a retry, heartbeat, re-entry or release answered meanwhile stands --
 * and the caller hears LOCK_UNCONFIRMED, with st.undone saying whether it
 * was (on_undo_reply). Anything else stands, and is counted. */
static void on_synced(void *arg, bool confirmed)
{
	struct call *c = arg;

	if (!confirmed && c->sync == SYNC_UNDO) {
		metrics_inc(METRIC_REPLICATION_UNCONFIRMED);
		c->res = LOCK_UNCONFIRMED;
		c->undo_until_ms = now_ms() + UNDO_PATIENCE_MS;
		undo_send(c);
		return;
	} else if (!confirmed) {
		metrics_inc(METRIC_REPLICATION_UNCONFIRMED_KEPT);
		log_warn("%s of %s '%s' was not acknowledged by enough replicas; it stands, "
			 "but a failover now may undo it", c->what, kinds[c->kind].label, c->name);
	}
	deliver(c, c->res, &c->st);
}

static void on_call_reply(void *arg, redisReply *r)
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
	switch (locks_elem_int(r, 0)) {
	case 1:
		out->token = locks_elem_int(r, 1);
		out->holds = locks_elem_int(r, 2);
		out->ttl_ms = lease_left(locks_elem_int(r, 3), c->sent_ms);
		out->locked = true;
		out->added = locks_elem_int(r, 4) == 1;
		out->change = locks_elem_int(r, 5);
		if (out->added && out->holds == 1)
			publish_change(c, "acquired");	/* a new holding */
		if (out->ttl_ms == 0) {
			/* Redis counts the lease from the run, later than the
			 * sending: the hold stands there a while yet, for an
			 * owner about to hear 503. Undo it now rather than keep
			 * the others out until that lease ends (a repeat added
			 * no hold and stays as it was). */
			if (out->added)
				locks_undo(c->b, c->kind, c->name, c->owner, out->change, NULL,
					   NULL);
			log_warn("redis granted %s '%s' too late to be of use (lease over)%s",
				 kinds[c->kind].label, c->name, out->added ? "; taking it back" : "");
			out->fault = "redis answered too slowly: the lease was over before its "
				   "answer came; retry shortly";
			*res = LOCK_BACKEND_DOWN;
		}
		break;
	case 0:
		out->ttl_ms = locks_elem_int(r, 1) > 0 ? locks_elem_int(r, 1) : 0;
		out->locked = locks_elem_int(r, 1) != -2;
		out->retry_ms = retry_after(c->kind, locks_elem_int(r, 1),
					    locks_elem_int(r, 2) == 1);
		out->queued = c->queue;
		out->refresh_place = c->queue && c->kind == LOCK_KIND_FAIR &&
				     locks_elem_int(r, 2) != 1;
		out->why = why_code(locks_elem_int(r, 3));
		out->others = locks_elem_int(r, 4);
		*res = LOCK_HELD;
		break;
	case -2:
		out->locked = true;
		out->why = why_code(locks_elem_int(r, 1));
		*res = LOCK_NOT_OWNER;
		break;
	case -6:
		/* {-6, limit}: a semaphore's limit in force is another */
		out->others = locks_elem_int(r, 1);
		*res = LOCK_LIMIT_MISMATCH;
		break;
	case -4:
		/* {-4, scope, n}: n read holds, the cap of the owner (1) or the lock */
		out->locked = true;
		out->why = locks_elem_int(r, 1) == 1 ? LOCK_WHY_OWNER_HOLDS : LOCK_WHY_LOCK_HOLDS;
		out->others = locks_elem_int(r, 2);
		*res = LOCK_TOO_MANY_HOLDS;
		break;
	case -5:
		/* {-5, n}: n live places queued, the cap or more */
		out->locked = true;
		out->others = locks_elem_int(r, 1);
		*res = LOCK_QUEUE_FULL;
		break;
	default:
		*res = LOCK_WRONG_KIND;
		if (locks_elem_int(r, 0) == -3)
			out->why = LOCK_WHY_NOT_A_LOCK;
	}
}

/* A semaphore's acquire: its own arguments (lua/sem_acquire.lua). */
static void semaphore_acquire(const struct backend *b, struct call *c, int64_t ttl_ms,
			      const char *owner, const char *principal,
			      const struct lock_extras *x)
{
	char lease[24], life[24], limit[24], ends[24];
	const char *args[] = { lease, owner, life, limit, principal,
			       x && x->value ? "1" : "0", x && x->value ? x->value : "", ends };

	decimal(lease, ttl_ms);
	decimal(ends, x ? (long long)x->ends_ms : 0LL);
	/* a semaphore's places are not refreshed while their waiters sleep
	 * (nothing is ordered by them): each lasts its waiter's whole wait,
	 * and goes when the waiter leaves */
	decimal(life, !c->queue ? 0LL
			     : (long long)(x && x->place_ms > 0 ? x->place_ms : queue_ttl_ms));
	decimal(limit, x ? (long long)x->limit : 0LL);
	run(b, c, &kinds[LOCK_KIND_SEMAPHORE].acquire, 8, args);
}

void locks_acquire(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, const char *principal, int64_t ttl_ms, unsigned flags,
		   const struct lock_extras *x, lock_done_fn done, void *ctx)
{
	const struct kind_row *k = &kinds[kind];
	struct call *c = call_new(kind, name, "acquire", done, ctx);
	char lease[24], life[24], per_owner[24], per_lock[24], queue_cap[24], ends[24];
	const char *args[] = { lease, owner, life, (flags & LOCK_REENTRANT) ? "1" : "0",
			       principal, per_owner, per_lock, x && x->value ? "1" : "0",
			       x && x->value ? x->value : "", ends };

	c->queue = (flags & LOCK_QUEUE) && k->queues;
	c->decode = acquire_decode;
	c->owner = xstrdup(owner);
	if (b->sync)
		c->sync = SYNC_UNDO;
	if (kind == LOCK_KIND_SEMAPHORE) {
		semaphore_acquire(b, c, ttl_ms, owner, principal, x);
		return;
	}
	decimal(lease, ttl_ms);
	decimal(ends, x ? (long long)x->ends_ms : 0LL);
	decimal(life, c->queue ? (long long)queue_ttl_ms : 0LL);
	decimal(per_owner, read_holds_per_owner);
	decimal(per_lock, read_holds_per_lock);
	decimal(queue_cap, fair_queue_cap);
	/* only a read acquire adds read holds: it alone reads their caps
	 * (ARGV[6], [7]); a fair one and a write queue read the queue's cap
	 * in ARGV[6] instead */
	if (kind == LOCK_KIND_FAIR || kind == LOCK_KIND_WRITE)
		args[5] = queue_cap;
	run(b, c, &k->acquire, 10, args);
}

void locks_dequeue_many(const struct backend *b, enum lock_kind kind, const char *name,
			const char *const *owners, size_t n, lock_done_fn done, void *ctx)
{
	const struct kind_row *k = &kinds[kind];
	char *list = locks_pack_list(owners, n);
	const char *args[] = { list };

	if (!k->queues)
		abort();	/* only a kind with a queue reports st->queued */
	run(b, call_new(kind, name, "leaving the queue", done, ctx), &k->dequeue, 1, args);
	free(list);
}

void locks_dequeue(const struct backend *b, enum lock_kind kind, const char *name,
		   const char *owner, lock_done_fn done, void *ctx)
{
	locks_dequeue_many(b, kind, name, &owner, 1, done, ctx);
}


/* Owners one fair_refresh script is given, at most: each costs it a few
 * µs (ZMSCORE, ZADD XX), so a script never takes long, however many wait
 * on one lock (256 a script took 1-3 ms with 10,000 queued on a loaded
 * machine: every other client of that Redis waited as long). */
#define REFRESH_MAX 64

/* A locks_fair_refresh on its way: c->ctx of each of its calls, one per
 * REFRESH_MAX owners, sent one after another. */
struct refresh_wait {
	lock_refresh_fn done;
	void *ctx;
	const struct backend *b;
	char *name;
	char **owners;		/* copies, in the order given */
	size_t n, at;		/* owners[at..] are still to be sent */
	char **retry;		/* what the answers so far named, in order */
	size_t nretry;
};

static void refresh_send(struct refresh_wait *rw);

static void refresh_free(struct refresh_wait *rw)
{
	for (size_t i = 0; i < rw->n; i++)
		free(rw->owners[i]);
	for (size_t i = 0; i < rw->nretry; i++)
		free(rw->retry[i]);
	free(rw->owners);
	free(rw->retry);
	free(rw->name);
	free(rw);
}

static void on_refresh_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct refresh_wait *rw = c->ctx;
	struct lock_state st = { 0 };
	enum lock_result res = check_reply(r, c, &st);

	free(c);
	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || locks_elem_int(r, 0) != 1)) {
		res = common_code(locks_elem_int(r, 0), &st);
		if (res == LOCK_OK || res == LOCK_NOT_HELD) {
			log_error("script %s gave an unexpected reply",
				  scripts_name(SCRIPT_FAIR_REFRESH));
			res = LOCK_SCRIPT_ERROR;
		}
	}
	if (res == LOCK_OK) {
		/* it names some of the owners it was given: never more than all */
		for (size_t i = 1; i < r->elements && rw->nretry < rw->n; i++)
			if (r->element[i]->type == REDIS_REPLY_STRING)
				rw->retry[rw->nretry++] = xstrdup(r->element[i]->str);
		if (rw->at < rw->n) {
			refresh_send(rw);
			return;
		}
	}
	rw->done(rw->ctx, res, (const char *const *)rw->retry, res == LOCK_OK ? rw->nretry : 0);
	refresh_free(rw);
}

/* Send the next REFRESH_MAX owners of rw. */
static void refresh_send(struct refresh_wait *rw)
{
	struct call *c = call_new(LOCK_KIND_FAIR, rw->name, "queue refresh", NULL, rw);
	size_t k = rw->n - rw->at < REFRESH_MAX ? rw->n - rw->at : REFRESH_MAX;
	char life[24], *list;
	const char *args[2] = { life, NULL };

	list = locks_pack_list((const char *const *)rw->owners + rw->at, k);
	rw->at += k;
	args[1] = list;
	decimal(life, queue_ttl_ms);
	run_to(rw->b, c, &kinds[LOCK_KIND_FAIR].refresh, 2, args, on_refresh_reply);
	free(list);
}

void locks_fair_refresh(const struct backend *b, const char *name, const char *const *owners,
			size_t n, lock_refresh_fn done, void *ctx)
{
	struct refresh_wait *rw = xcalloc(1, sizeof(*rw));

	rw->done = done;
	rw->ctx = ctx;
	rw->b = b;
	rw->name = xstrdup(name);
	rw->owners = xcalloc(n + 1, sizeof(*rw->owners));
	for (size_t i = 0; i < n; i++)
		rw->owners[i] = xstrdup(owners[i]);
	rw->n = n;
	rw->retry = xcalloc(n + 1, sizeof(*rw->retry));
	refresh_send(rw);
}

static void release_decode(struct call *c, const redisReply *r, enum lock_result *res,
			   struct lock_state *out)
{
	*res = common_code(locks_elem_int(r, 0), out);
	if (*res == LOCK_NOT_OWNER) {
		out->why = why_code(locks_elem_int(r, 1));
		out->others = locks_elem_int(r, 2);
		return;
	}
	out->holds = locks_elem_int(r, 1);
	/* read-write releases say whether the lock is free; for the exclusive
	 * kinds it is free when the owner's holds are gone */
	out->locked = r->elements > 2 ? locks_elem_int(r, 2) == 0 : out->holds > 0;
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

/* ----- A release that must reach Redis ----- */

static void on_patient_reply(void *arg, redisReply *r);

static void patient_send(struct call *c)
{
	const char *args[] = { c->owner, c->principal };

	run_to(c->b, c, &kinds[c->kind].release, 2, args, on_patient_reply);
}

/* Its answer: one that says Redis could not be told (or none) is tried
 * again while there is patience left. */
static void on_patient_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct lock_state st = { 0 };
	enum lock_result res = check_reply(r, c, &st);

	if (res == LOCK_OK)
		c->decode(c, r, &res, &st);
	if (res == LOCK_BACKEND_DOWN && now_ms() + UNDO_RETRY_MS <= c->undo_until_ms &&
	    !waiters_shutting_down()) {
		loop_timer_set(c->b->loop, &c->undo_timer, now_ms() + UNDO_RETRY_MS);
		return;
	}
	deliver(c, res, &st);
}

void locks_release_patient(const struct backend *b, enum lock_kind kind, const char *name,
			   const char *owner, const char *principal, int64_t patience_ms,
			   lock_done_fn done, void *ctx)
{
	struct call *c = call_new(kind, name, "release", done, ctx);

	c->b = b;
	c->decode = release_decode;
	c->owner = xstrdup(owner);
	c->principal = xstrdup(principal);
	c->undo_until_ms = now_ms() + patience_ms;
	patient_send(c);
}

/* ----- Taking an acquire back ----- */

static void on_undo_reply(void *arg, redisReply *r);

/* Send c's undo: the kind's script takes back change c->st.change of
 * c->owner's holding if it is still the holding's last
 * (lua/lock_undo.lua, lua/rw_undo.lua). */
static void undo_send(struct call *c)
{
	const struct kind_row *k = &kinds[c->kind];
	const char *args[3];
	char change[24];
	int n = 0;

	args[n++] = c->owner;
	if (k->side)
		args[n++] = k->side;
	decimal(change, c->st.change);
	args[n++] = change;
	run_to(c->b, c, &k->undo, n, args, on_undo_reply);
}

static void on_undo_timer(struct loop *l, struct loop_timer *t)
{
	struct call *c = container_of(t, struct call, undo_timer);

	(void)l;
	if (c->principal)	/* a patient release */
		patient_send(c);
	else
		undo_send(c);
}

/* Why an unconfirmed acquire's 503 says what it says (reply_failure
 * words the rest). */
static const char unconfirmed_undone[] =
	"too few redis replicas acknowledged the grant in time (--redis-sync-replicas); "
	"it was undone, retry shortly";
static const char unconfirmed_changed[] =
	"too few redis replicas acknowledged the grant in time (--redis-sync-replicas), "
	"and it was not undone: a later call changed the holding, and what that call "
	"was answered stands";
static const char unconfirmed_unknown[] =
	"too few redis replicas acknowledged the grant in time (--redis-sync-replicas), "
	"and redis could not be reached to undo it: it may stand until its lease ends; "
	"repeat the request to learn (a repeat of a standing grant is answered with its "
	"token), or release it";

/* The undo's answer: taken back ({1, ended}), nothing of it left ({0}),
 * or not taken back ({2}: the holding changed since). No answer, or one
 * that says Redis could not serve it: tried again while the caller waits
 * (c->undo_until_ms), since it may not have run. c's caller hears it:
 * an unconfirmed acquire's LOCK_UNCONFIRMED with st.undone, or
 * locks_undo()'s outcome. */
static void on_undo_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct lock_state st = { 0 };
	enum lock_result res = check_reply(r, c, &st);
	long long code = -1;

	if (res == LOCK_OK) {
		code = locks_elem_int(r, 0);
		if (r->type != REDIS_REPLY_ARRAY || code < 0 || code > 2)
			res = locks_unexpected(scripts_name(c->script), kinds[c->kind].label,
					       c->name, &st);
	}
	if (res == LOCK_BACKEND_DOWN && now_ms() + UNDO_RETRY_MS <= c->undo_until_ms) {
		loop_timer_set(c->b->loop, &c->undo_timer, now_ms() + UNDO_RETRY_MS);
		return;
	}
	st.undone = res == LOCK_OK && code != 2;
	st.gone = code == 0 || (code == 1 && locks_elem_int(r, 1) == 1);
	if (code == 1 && locks_elem_int(r, 1) == 1)
		publish_change(c, "released");	/* the owner's holding ended */
	if (c->res != LOCK_UNCONFIRMED) {
		if (code == 2)
			log_info("%s of the grant of %s '%s' to '%s' not done: a later call "
				 "changed the holding, and stands", c->what, kinds[c->kind].label,
				 c->name, c->owner);
		deliver(c, res, &st);
		return;
	}
	c->st.undone = st.undone;
	c->st.gone = st.gone;
	c->st.fault = st.undone ? unconfirmed_undone
		    : res == LOCK_OK ? unconfirmed_changed : unconfirmed_unknown;
	if (!st.undone)
		log_warn("%s of %s '%s' by '%s' was not acknowledged by enough replicas and %s",
			 c->what, kinds[c->kind].label, c->name, c->owner,
			 res == LOCK_OK ? "was not undone: a later call changed the holding"
					: "could not be undone: it may stand until its lease ends");
	deliver(c, c->res, &c->st);
}

void locks_undo(const struct backend *b, enum lock_kind kind, const char *name,
		const char *owner, int64_t change, lock_done_fn done, void *ctx)
{
	struct call *c = call_new(kind, name, "undo", done, ctx);

	c->b = b;
	c->owner = xstrdup(owner);
	c->st.change = change;
	c->undo_until_ms = now_ms() + UNDO_PATIENCE_MS;
	undo_send(c);
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
	*res = common_code(locks_elem_int(r, 0), out);
	if (*res == LOCK_NOT_OWNER) {
		out->why = why_code(locks_elem_int(r, 1));
		out->others = locks_elem_int(r, 2);
		return;
	}
	out->ttl_ms = lease_left(locks_elem_int(r, 1), c->sent_ms);
	out->locked = *res == LOCK_OK;
	if (*res != LOCK_OK)
		return;
	/* a shorter lease ends sooner than this lock's waiters were told,
	 * and expiry publishes nothing: they retry by then (at once if it
	 * is over already) */
	char *channel = locks_wait_channel(c->kind, c->name, c->owner);

	waiters_lease_ends(c->b->waiters, channel, now_ms() + out->ttl_ms);
	free(channel);
	if (out->ttl_ms == 0) {
		/* Renewed, but the lease it set was over, counted from the
		 * sending, before the answer came (a ttl_ms shorter than the
		 * round trip, or a slow Redis): the renewal took effect, so a
		 * 503 (nothing changed) would be untrue, and no lease is left
		 * to count on: not_held. Redis counts that lease from its run,
		 * so the hold may stand there until it ends, as a dead
		 * holder's would. */
		out->fault = "the lease this heartbeat set was over before its answer came "
			     "(Redis, counting it from when it ran the call, may keep the hold "
			     "until it ends there; a release frees it)";
		out->locked = false;
		*res = LOCK_NOT_HELD;
	}
}

void locks_renew(const struct backend *b, enum lock_kind kind, const char *name,
		 const char *owner, const char *principal, int64_t ttl_ms, int64_t ends_ms,
		 lock_done_fn done, void *ctx)
{
	struct call *c = call_new(kind, name, "renewal", done, ctx);
	char lease[24], ends[24];
	const char *args[] = { lease, owner, principal, ends };

	c->decode = renew_decode;
	c->sync = SYNC_KEEP;
	c->owner = xstrdup(owner);
	decimal(lease, ttl_ms);
	decimal(ends, ends_ms);
	run(b, c, &kinds[kind].renew, 4, args);
}

size_t locks_renew_keys(enum lock_kind kind, const char *name, char **keys)
{
	const struct op_row *op = &kinds[kind].renew;
	char *rname = locks_redis_name(name);
	struct keys ks;
	size_t n = 0;

	keys_init(&ks, kind, rname);
	for (; n < LOCKS_RENEW_KEYS_MAX && op->keys[n] != K_END; n++)
		keys[n] = xstrdup(key_get(&ks, op->keys[n]));
	keys_free(&ks);
	free(rname);
	return n;
}

int64_t locks_lease_left(long long pttl, int64_t sent_ms)
{
	return lease_left(pttl, sent_ms);
}

static void set_limit_decode(struct call *c, const redisReply *r, enum lock_result *res,
			     struct lock_state *out)
{
	(void)c;
	*res = common_code(locks_elem_int(r, 0), out);
	if (*res != LOCK_OK) {
		if (*res == LOCK_NOT_HELD || *res == LOCK_NOT_OWNER)
			*res = LOCK_SCRIPT_ERROR;	/* it promises neither */
		return;
	}
	out->holds = locks_elem_int(r, 2);
	out->others = locks_elem_int(r, 3);
}

void locks_set_limit(const struct backend *b, const char *name, int64_t limit,
		     lock_done_fn done, void *ctx)
{
	struct call *c = call_new(LOCK_KIND_SEMAPHORE, name, "limit change", done, ctx);
	char n[24];
	const char *args[] = { n };

	c->decode = set_limit_decode;
	c->sync = SYNC_KEEP;
	decimal(n, limit);
	run(b, c, &kinds[LOCK_KIND_SEMAPHORE].set_limit, 1, args);
}

/* ----- Inspect ----- */

/* The queue places an inspect lists, at most (the rest are counted),
 * found among the queue's first PLACES_LOOKED_AT entries: a run of dead
 * places behind a live head costs a status no more than that. */
#define PLACES_SHOWN 100
#define PLACES_LOOKED_AT 1000

/* What an inspect's caller hears: c->ctx of its call. */
struct view_wait {
	lock_view_fn done;
	void *ctx;
};

static void on_view_reply(void *arg, redisReply *r)
{
	struct call *c = arg;
	struct view_wait *vw = c->ctx;
	struct lock_state st = { 0 };
	enum lock_result res = check_reply(r, c, &st);
	struct lock_view *v = NULL;

	if (res == LOCK_OK && r->type == REDIS_REPLY_ARRAY && locks_elem_int(r, 0) < 0) {
		res = LOCK_WRONG_KIND;
		if (locks_elem_int(r, 0) == -3)
			st.why = LOCK_WHY_NOT_A_LOCK;
	} else if (res == LOCK_OK && c->script == SCRIPT_SEM_STATUS &&
		   !(v = lock_view_decode_semaphore(r))) {
		log_error("script %s gave a reply it does not promise", scripts_name(c->script));
		st.fault = "the lock script gave redis an answer dlockd does not understand";
		res = LOCK_SCRIPT_ERROR;
	} else if (res == LOCK_OK && c->script != SCRIPT_SEM_STATUS &&
		   !(v = lock_view_decode(r, c->script == SCRIPT_RW_STATUS))) {
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
		   const char *owner, lock_view_fn done, void *ctx)
{
	struct view_wait *vw = xmalloc(sizeof(*vw));
	struct call *c = call_new(kind, name, "status", NULL, vw);
	char shown[24], looked[24];
	const char *args[] = { shown, looked };

	vw->done = done;
	vw->ctx = ctx;
	snprintf(shown, sizeof(shown), "%d", PLACES_SHOWN);
	snprintf(looked, sizeof(looked), "%d", PLACES_LOOKED_AT);
	if (kind == LOCK_KIND_SEMAPHORE)
		args[1] = owner ? owner : "";
	run_to(b, c, &kinds[kind].status, kind == LOCK_KIND_FAIR || kind == LOCK_KIND_SEMAPHORE ? 2 : 0,
	       args, on_view_reply);
}

/* ----- Watching ----- */

/* dlockd_lock_state:{N}: what a watcher of lock name hears from dlockd
 * when a holding starts or ends. The caller frees it. */
static char *state_channel(const char *name)
{
	char *rname = locks_redis_name(name);
	char *ch = locks_prefix_name("dlockd_lock_state", rname);

	free(rname);
	return ch;
}

int locks_watch_channels(enum lock_kind kind, const char *name, char *channels[2])
{
	channels[0] = state_channel(name);
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
	char *channel;

	if (c->told)
		return;	/* one round trip less: the script told them */
	channel = state_channel(c->name);
	const char *argv[] = { scripts_publish_command(), channel, what };

	redis_conn_send(c->b->redis, 3, argv, NULL, false, on_published, channel);
}
