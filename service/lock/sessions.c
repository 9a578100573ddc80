/* sessions.c -- sessions in Redis: the session hash dlockd_session:{S}
 * (ttl_ms, creator, value, name, created; its PEXPIRE is the session's
 * lease) and the set of what it holds, dlockd_session:{S}:holdings, one
 * member "<kind>\t<name>\t<owner>\t<token>" a holding, kept with the
 * same expiry. Both are in the slot of {S}, so each session script
 * touches one slot; the holdings themselves live in their own slots. A
 * heartbeat renews them in one script per slot that holds any
 * (session_renew.h); an end releases them with the lock kinds' own
 * scripts (locks.h), one call each, pipelined on b's connection. The
 * open sessions are counted per token name (for its cap) in
 * dlockd_sessions:{dlockd_sessions}:<token name>, a sorted set of ids by
 * lease end, and the token names with one in
 * dlockd_sessions:{dlockd_sessions}: one slot, so every count call trims
 * every ended session and counts all (the dlockd_sessions gauge), and an
 * admin's listing reads them in one script.
 *
 * A holding is taken with the session's lease left as its ttl, so it can
 * never outlive the session's lease end: when heartbeats stop, each
 * holding's own lease ends with the session's, and the kinds' lease-end
 * timers serve its waiters then. Nothing here expires anything. */
#include "service/lock/sessions.h"
#include "service/lock/locks_redis.h"

#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/names.h"
#include "service/base/metrics.h"
#include "service/base/util.h"
#include "service/lock/backend.h"
#include "service/lock/scripts.h"
#include "service/lock/session_renew.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sess_kind_labels[LOCK_KIND_COUNT] = {
	[LOCK_KIND_LOCK] = "lock", [LOCK_KIND_FAIR] = "fair", [LOCK_KIND_READ] = "read",
	[LOCK_KIND_WRITE] = "write", [LOCK_KIND_SEMAPHORE] = "semaphore",
};

const char *sessions_kind_label(enum lock_kind kind)
{
	return kind < LOCK_KIND_COUNT ? sess_kind_labels[kind] : "?";
}

static int sess_kind_of(const char *label, enum lock_kind *kind)
{
	for (int k = 0; k < LOCK_KIND_COUNT; k++)
		if (!strcmp(label, sess_kind_labels[k])) {
			*kind = (enum lock_kind)k;
			return 0;
		}
	return -1;
}

bool sessions_id_shaped(const char *s, size_t len)
{
	return len == SESSIONS_ID_LEN && strspn(s, "0123456789abcdef") >= len;
}

int sessions_kind_parse(const char *label, enum lock_kind *kind)
{
	return sess_kind_of(label, kind);
}

enum sess_op { S_CREATE, S_READ, S_RECORD, S_DROP, S_HEARTBEAT, S_END };

/* One call on one session, from its script to its callback. */
struct sess_call {
	const struct backend *b;
	enum sess_op op;
	char *id;
	session_fn done;
	void *ctx;
	struct session_info info;
	char **members;		/* the holdings' members as read (owned) */
	char *value, *name, *creator;
	size_t pending;		/* heartbeat, end: per-holding calls out */
	enum lock_result result;
	int64_t sent_ms;	/* its last script's sending */
	int64_t ends_ms;	/* heartbeat: the session's lease end, in Redis' clock */
};

/* A per-holding call's context: its session call and which holding. */
struct sess_item {
	struct sess_call *c;
	size_t i;
};

static struct sess_call *sess_call_new(const struct backend *b, enum sess_op op, const char *id,
				  session_fn done, void *ctx)
{
	struct sess_call *c = xcalloc(1, sizeof(*c));

	c->b = b;
	c->op = op;
	c->id = xstrdup(id);
	c->done = done;
	c->ctx = ctx;
	return c;
}

static void sess_call_free(struct sess_call *c)
{
	for (size_t i = 0; i < c->info.n; i++)
		free(c->members[i]);
	free(c->members);
	free(c->info.holdings);
	free(c->value);
	free(c->name);
	free(c->creator);
	free(c->id);
	free(c);
}

static void sess_finish(struct sess_call *c, enum lock_result r)
{
	bool info = r == LOCK_OK || r == LOCK_TOO_MANY_HOLDS || r == LOCK_BACKEND_DOWN;

	if (c->done)
		c->done(c->ctx, r, info ? &c->info : NULL);
	sess_call_free(c);
}

static void sess_run(struct sess_call *c, enum script_id script, int nargs, const char *const *args,
		redis_reply_fn fn)
{
	const char *prefix = locks_key_prefix();
	char *k1 = xasprintf("%sdlockd_session:{%s}", prefix, c->id);
	char *k2 = xasprintf("%sdlockd_session:{%s}:holdings", prefix, c->id);
	const char *keys[2] = { k1, k2 };

	c->sent_ms = now_ms();
	scripts_run(c->b->redis, script, 2, keys, nargs, args, fn, c);
	free(k1);
	free(k2);
}

static const char *sess_str_of(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_STRING ? r->str : "";
}

static char *sess_member_of(const struct session_holding *h)
{
	return xasprintf("%s\t%s\t%s\t%lld", sessions_kind_label(h->kind), h->name, h->owner,
			 (long long)h->token);
}

static void sess_record_member(struct sess_call *c, const char *member, int64_t cap, bool add,
			       bool repeat);

/* Split the members of array r into c->info.holdings. A member this
 * dlockd cannot read (garbage, or a kind it does not know) holds nothing
 * it could renew or release: it is left out, logged, and a heartbeat
 * drops it from the session, so the others are kept as ever. */
static void sess_holdings_of(struct sess_call *c, const redisReply *r)
{
	size_t n = r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;

	c->members = xcalloc(n ? n : 1, sizeof(*c->members));
	c->info.holdings = xcalloc(n ? n : 1, sizeof(*c->info.holdings));
	for (size_t i = 0; i < n; i++) {
		struct session_holding *h = &c->info.holdings[c->info.n];
		char *m = xstrdup(sess_str_of(r->element[i]));
		char *name = strchr(m, '\t'), *owner = name ? strchr(name + 1, '\t') : NULL;
		char *token = owner ? strchr(owner + 1, '\t') : NULL;

		if (token)
			*name++ = *owner++ = *token++ = '\0';
		if (!token || sess_kind_of(m, &h->kind) < 0 || !*name || !*owner) {
			log_warn("session %s: a holding this dlockd cannot read ('%.64s'): %s", c->id,
				 sess_str_of(r->element[i]), c->op == S_HEARTBEAT ? "dropped"
										  : "left out");
			if (c->op == S_HEARTBEAT)
				sess_record_member(sess_call_new(c->b, S_DROP, c->id, NULL, NULL),
						   sess_str_of(r->element[i]), 0, false, false);
			free(m);
			continue;
		}
		c->members[c->info.n++] = m;
		h->name = name;
		h->owner = owner;
		h->token = strtoll(token, NULL, 10);
	}
}

/* Check r as an answer to c's script: LOCK_OK when it is an array. */
static enum lock_result sess_checked(struct sess_call *c, const redisReply *r, const char *cmd)
{
	struct lock_state st = { 0 };
	enum lock_result res = locks_check_answer(r, cmd, "session", c->id, &st);

	c->info.fault = st.fault;
	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
			       r->element[0]->type != REDIS_REPLY_INTEGER))
		res = locks_unexpected(cmd, "session", c->id, &st);
	return res;
}

/* ----- The per-token count of open sessions ----- */

/* The counts' keys, all in one slot: the set of token names that have
 * open sessions, and (its name and ':' before the token name) each one's
 * sorted set. The caller frees both. */
static void sess_count_keys(char **names, char **zprefix)
{
	*names = xasprintf("%sdlockd_sessions:{dlockd_sessions}", locks_key_prefix());
	*zprefix = xasprintf("%s:", *names);
}

/* Run session_count.lua for c->id on principal's set: op 'add' (fn
 * hears), 'touch' or 'del' (nobody hears: c is freed). */
static void sess_count_run(struct sess_call *c, const char *principal, const char *op,
			   int64_t ttl_ms, int64_t cap, redis_reply_fn fn)
{
	char *keys[2], *zprefix, ttl[24], capv[24];
	const char *args[] = { c->id, ttl, op, capv, NULL };

	sess_count_keys(&keys[1], &zprefix);
	keys[0] = xasprintf("%s%s", zprefix, principal);
	args[4] = zprefix;
	snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
	snprintf(capv, sizeof(capv), "%lld", (long long)cap);
	scripts_run(c->b->redis, SCRIPT_SESSION_COUNT, 2, (const char *const *)keys, 5, args, fn,
		    c);
	free(keys[0]);
	free(keys[1]);
	free(zprefix);
}

/* A count's answer {code, n, all}: every open session into the gauge. */
static void sess_count_gauge(const redisReply *r)
{
	if (r->elements >= 3)
		metrics_set_sessions_open(locks_elem_int(r, 2));
}

/* A 'touch' or 'del' answered: only a failure is logged (the count then
 * corrects itself at the session's lease end). */
static void sess_on_counted(void *ctx, redisReply *r)
{
	struct sess_call *c = ctx;

	if (sess_checked(c, r, "session_count") == LOCK_OK)
		sess_count_gauge(r);
	sess_call_free(c);
}

/* Keep principal's count of c's session (op 'touch' or 'del'), later. */
static void sess_count_keep(const struct sess_call *c, const char *principal, const char *op)
{
	struct sess_call *k = sess_call_new(c->b, S_DROP, c->id, NULL, NULL);

	sess_count_run(k, principal, op, c->info.ttl_ms, 0, sess_on_counted);
}

/* ----- Create ----- */

static void sess_on_created(void *ctx, redisReply *r)
{
	struct sess_call *c = ctx;
	struct lock_state st = { 0 };
	enum lock_result res = locks_check_answer(r, "session_create", "session", c->id, &st);

	c->info.fault = st.fault;
	if (res == LOCK_OK && (r->type != REDIS_REPLY_INTEGER || r->integer != 1))
		res = locks_unexpected("session_create", "session", c->id, &st);
	/* not made, surely (refused, too late, not sent): its count goes too,
	 * or the 503 that says nothing changed would leave the token a
	 * session fewer to open until the count's lease ran out. No answer:
	 * it may have been made, and is counted to its lease end. */
	if (res == LOCK_BACKEND_DOWN && st.fault)
		sess_count_keep(c, c->creator, "del");
	sess_finish(c, res);
}

/* The token name's count took the new session (or refused it): make it. */
static void sess_on_count_added(void *ctx, redisReply *r)
{
	struct sess_call *c = ctx;
	enum lock_result res = sess_checked(c, r, "session_count");
	char ttl[24];
	const char *args[] = { ttl, c->creator, c->value, c->name };

	if (res != LOCK_OK) {
		sess_finish(c, res);
		return;
	}
	sess_count_gauge(r);
	if (r->element[0]->integer == -1) {
		c->info.cap_n = locks_elem_int(r, 1);
		sess_finish(c, LOCK_TOO_MANY_HOLDS);
		return;
	}
	snprintf(ttl, sizeof(ttl), "%lld", (long long)c->info.ttl_ms);
	sess_run(c, SCRIPT_SESSION_CREATE, 4, args, sess_on_created);
}

void sessions_create(const struct backend *b, const char *id, const char *principal,
		     int64_t ttl_ms, const char *value, const char *name, int64_t cap,
		     session_fn done, void *ctx)
{
	struct sess_call *c = sess_call_new(b, S_CREATE, id, done, ctx);

	c->info.ttl_ms = c->info.lease_ms = ttl_ms;
	c->info.creator = c->creator = xstrdup(principal);
	c->info.value = c->value = xstrdup(value);
	c->info.name = c->name = xstrdup(name);
	sess_count_run(c, principal, "add", ttl_ms, cap, sess_on_count_added);
}

/* A read or end script's reply r: its session's holdings (at element
 * holdings) taken into c when r has n elements and the session exists.
 * False when c is finished already: an error, no such session
 * (LOCK_NOT_HELD), or a reply not shaped as promised. */
static bool sess_found(struct sess_call *c, const redisReply *r, const char *cmd, size_t n,
		       size_t holdings)
{
	enum lock_result res = sess_checked(c, r, cmd);

	if (res != LOCK_OK) {
		sess_finish(c, res);
		return false;
	}
	if (r->element[0]->integer == 0) {
		sess_finish(c, LOCK_NOT_HELD);
		return false;
	}
	if (r->elements != n) {
		struct lock_state st = { 0 };

		sess_finish(c, locks_unexpected(cmd, "session", c->id, &st));
		return false;
	}
	sess_holdings_of(c, r->element[holdings]);
	return true;
}

/* ----- Read (and the heartbeat's first step) ----- */

static void sess_renew_next(struct sess_call *c);

static void sess_on_read(void *ctx, redisReply *r)
{
	struct sess_call *c = ctx;

	if (!sess_found(c, r, "session_read", 8, 6))
		return;
	c->info.lease_ms = r->element[0]->integer;
	c->info.ttl_ms = locks_elem_int(r, 1);
	c->info.value = c->value = xstrdup(sess_str_of(r->element[2]));
	c->info.name = c->name = xstrdup(sess_str_of(r->element[3]));
	c->info.created_ms = locks_elem_int(r, 4);
	c->info.creator = c->creator = xstrdup(sess_str_of(r->element[5]));
	c->info.ends_ms = redis_conn_is_cluster(c->b->redis) ? 0 : locks_elem_int(r, 7);
	if (c->op == S_HEARTBEAT) {
		c->ends_ms = locks_elem_int(r, 7);
		sess_count_keep(c, c->creator, "touch");
		sess_renew_next(c);
	}
	else
		sess_finish(c, LOCK_OK);
}

static void sess_read_run(struct sess_call *c, const char *principal)
{
	const char *args[] = { principal, c->op == S_HEARTBEAT ? "1" : "0" };

	sess_run(c, SCRIPT_SESSION_READ, 2, args, sess_on_read);
}

void sessions_read(const struct backend *b, const char *id, const char *principal,
		   session_fn done, void *ctx)
{
	sess_read_run(sess_call_new(b, S_READ, id, done, ctx), principal);
}

/* ----- Record and drop ----- */

static void sess_on_recorded(void *ctx, redisReply *r)
{
	struct sess_call *c = ctx;
	enum lock_result res = sess_checked(c, r, "session_add");
	long long code = res == LOCK_OK ? r->element[0]->integer : 0;

	if (res != LOCK_OK) {
		sess_finish(c, res);
		return;
	}
	if (code == 1) {
		c->info.lease_ms = locks_elem_int(r, 1);
		/* the add's (a drop tells none): on a Cluster the session's
		 * clock is not its holdings' (as the read's, above) */
		if (!redis_conn_is_cluster(c->b->redis))
			c->info.ends_ms = locks_elem_int(r, 2);
		sess_finish(c, LOCK_OK);
	} else if (code == -1) {
		c->info.cap_n = locks_elem_int(r, 1);
		sess_finish(c, LOCK_TOO_MANY_HOLDS);
	} else if (code == -2) {
		sess_finish(c, LOCK_NOT_OWNER);
	} else {
		sess_finish(c, LOCK_NOT_HELD);
	}
}

/* Run session_add.lua for member: add it (repeat: the grant added no
 * hold, so it must be the session's already) or drop it. */
static void sess_record_member(struct sess_call *c, const char *member, int64_t cap, bool add,
			       bool repeat)
{
	char capv[24];
	const char *args[] = { member, capv, add ? "1" : "0", repeat ? "0" : "1" };

	snprintf(capv, sizeof(capv), "%lld", (long long)cap);
	sess_run(c, SCRIPT_SESSION_ADD, 4, args, sess_on_recorded);
}

static void sess_record_run(struct sess_call *c, const struct session_holding *h, int64_t cap,
			    bool add)
{
	char *member = sess_member_of(h);

	sess_record_member(c, member, cap, add, h->repeat);
	free(member);
}

void sessions_forget(const struct backend *b, const char *id, const struct session_holding *h,
		     session_fn done, void *ctx)
{
	sess_record_run(sess_call_new(b, S_DROP, id, done, ctx), h, 0, false);
}

void sessions_record(const struct backend *b, const char *id, const struct session_holding *h,
		     int64_t cap, session_fn done, void *ctx)
{
	sess_record_run(sess_call_new(b, S_RECORD, id, done, ctx), h, cap, true);
}

/* ----- Heartbeat: renew every holding ----- */

static void sess_item_done(struct sess_call *c)
{
	if (--c->pending == 0)
		sess_finish(c, c->result);
}

/* send(c, h, it) for each of c's holdings not gone, all at once; each
 * answer's callback ends with sess_item_done(c), the last one finishing
 * c. With none to send, c is finished at once. */
static void sess_each_holding(struct sess_call *c,
			      void (*send)(struct sess_call *c, const struct session_holding *h,
					   struct sess_item *it))
{
	size_t n = c->info.n, sent = 0, total = 0;

	for (size_t i = 0; i < n; i++)
		total += !c->info.holdings[i].gone;
	c->pending = total;
	c->result = LOCK_OK;
	if (!total) {
		sess_finish(c, LOCK_OK);
		return;
	}
	for (size_t i = 0; i < n && sent < total; i++) {
		struct sess_item *it;

		if (c->info.holdings[i].gone)
			continue;
		it = xmalloc(sizeof(*it));
		*it = (struct sess_item){ c, i };
		sent++;
		send(c, &c->info.holdings[i], it);
	}
}

/* A heartbeat's end: its answer's lease_ms is the session's lease left,
 * counted from the sending, as a lock heartbeat's ttl_ms is (a stalled
 * Redis never makes a client believe in more than it has). None left:
 * the session's lease is over as far as dlockd can count (Redis, which
 * counts from when it ran the call, may keep it a moment yet), and its
 * holdings were renewed to its end at most. */
static void sess_beat_finish(struct sess_call *c, enum lock_result r)
{
	if (r == LOCK_OK) {
		c->info.lease_ms = locks_lease_left(c->info.lease_ms, c->sent_ms);
		if (c->info.lease_ms == 0)
			r = LOCK_NOT_HELD;
	}
	sess_finish(c, r);
}

/* Every holding renewed, or not: drop the gone ones from the session. */
static void sess_on_renewed(void *ctx, enum lock_result r, struct session_renew_item *items,
			    size_t n)
{
	struct sess_call *c = ctx;

	for (size_t i = 0; i < n; i++) {
		struct session_holding *h = &c->info.holdings[i];

		h->gone = items[i].gone;
		if (h->gone)
			sess_record_run(sess_call_new(c->b, S_DROP, c->id, NULL, NULL), h, 0, false);
	}
	free(items);
	sess_beat_finish(c, r);
}

/* c's holdings as session_renew.h takes them (free() them). */
static struct session_renew_item *sess_renew_items(const struct sess_call *c)
{
	struct session_renew_item *items = xcalloc(c->info.n, sizeof(*items));

	for (size_t i = 0; i < c->info.n; i++) {
		const struct session_holding *h = &c->info.holdings[i];

		items[i] = (struct session_renew_item){ h->kind, sessions_kind_label(h->kind),
							h->name, h->owner, h->token, false };
	}
	return items;
}

/* Renew every holding of c, one script per hash slot (session_renew.h). */
static void sess_renew_next(struct sess_call *c)
{
	if (!c->info.n) {
		sess_beat_finish(c, LOCK_OK);
		return;
	}
	session_renew_holdings(c->b, sess_renew_items(c), c->info.n, c->creator, c->info.ttl_ms,
			       c->ends_ms, sess_on_renewed, c);
}

/* ----- One heartbeat of a session at a time ----- *
 *
 * A heartbeat costs Redis a renewal of every holding (a full session's,
 * ~25 ms of Redis' time, in short scripts: session_renew.h), so the
 * heartbeats of one session are run one at a time on a loop: those that
 * come while one is out wait and are all answered by the next, which
 * starts after each of them was sent (so the lease each counts from its
 * own sending is never longer than the one it gets), and no sooner than
 * a tenth of the session's ttl_ms (at most a second) after the last. A
 * client that keeps several heartbeats of one session out at once gets
 * slower answers, and its session costs Redis one heartbeat a gap per
 * loop; one that sends the next after the last is answered (every third
 * of its ttl_ms, as it should) never waits. */

#define SESS_BEAT_GAP_MAX_MS 1000

struct sess_beat_caller {
	session_fn done;
	void *ctx;
	struct sess_beat_caller *next;
};

/* The heartbeats of one session under one token name, on this loop. */
struct sess_beat {
	struct name_entry entry;	/* keyed by key */
	char *key;			/* "<id>\t<principal>" */
	const struct backend *b;
	char *id, *principal;
	struct sess_beat_caller *now;	/* answered by the heartbeat out */
	struct sess_beat_caller *next;	/* came meanwhile: the next one's */
	struct loop_timer gap;		/* armed: the last one ended too recently */
};

/* Each loop runs in a thread of its own: its heartbeats' table is the
 * thread's, made at its first heartbeat and freed once none is out. */
static __thread struct name_table sess_beats;
static __thread bool sess_beats_made;

static void sess_beat_done(void *ctx, enum lock_result r, const struct session_info *s);

static void sess_beat_start(struct sess_beat *beat)
{
	sess_read_run(sess_call_new(beat->b, S_HEARTBEAT, beat->id, sess_beat_done, beat),
		      beat->principal);
}

/* The gap after a heartbeat is over: the next one, or nothing left. */
static void sess_beat_next(struct loop *l, struct loop_timer *t)
{
	struct sess_beat *beat = container_of(t, struct sess_beat, gap);

	(void)l;
	beat->now = beat->next;
	beat->next = NULL;
	if (beat->now) {
		sess_beat_start(beat);
		return;
	}
	names_remove(&sess_beats, &beat->entry);
	if (sess_beats.n == 0) {
		names_release(&sess_beats);
		sess_beats_made = false;
	}
	free(beat->key);
	free(beat->id);
	free(beat->principal);
	free(beat);
}

static void sess_beat_done(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct sess_beat *beat = ctx;
	struct sess_beat_caller *c = beat->now;
	int64_t gap = r == LOCK_OK && s ? s->ttl_ms / 10 : 0;

	while (c) {
		struct sess_beat_caller *next = c->next;

		c->done(c->ctx, r, s);
		free(c);
		c = next;
	}
	beat->now = NULL;
	if (gap > SESS_BEAT_GAP_MAX_MS)
		gap = SESS_BEAT_GAP_MAX_MS;
	if (gap > 0 && beat->next)	/* sent while one was out: a flood */
		loop_timer_set(beat->b->loop, &beat->gap, now_ms() + gap);
	else
		sess_beat_next(beat->b->loop, &beat->gap);
}

void sessions_heartbeat(const struct backend *b, const char *id, const char *principal,
			session_fn done, void *ctx)
{
	struct sess_beat_caller *caller = xmalloc(sizeof(*caller));
	char *key = xstrjoin(id, "\t", principal, NULL);
	struct name_entry *e;
	struct sess_beat *beat;

	*caller = (struct sess_beat_caller){ done, ctx, NULL };
	if (!sess_beats_made) {
		names_init(&sess_beats);
		sess_beats_made = true;
	}
	if ((e = names_find(&sess_beats, key))) {	/* one out, or its gap */
		struct sess_beat_caller **at;

		beat = container_of(e, struct sess_beat, entry);
		for (at = &beat->next; *at; at = &(*at)->next)
			;
		*at = caller;
		free(key);
		return;
	}
	beat = xcalloc(1, sizeof(*beat));
	beat->key = key;
	beat->entry.name = key;
	beat->b = b;
	beat->id = xstrdup(id);
	beat->principal = xstrdup(principal);
	beat->now = caller;
	loop_timer_init(&beat->gap, sess_beat_next);
	names_add(&sess_beats, &beat->entry);
	sess_beat_start(beat);
}

/* ----- End ----- */

static void sess_on_released(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct sess_item *it = ctx;
	struct sess_call *c = it->c;

	(void)st;
	if (r == LOCK_BACKEND_DOWN || r == LOCK_SCRIPT_ERROR) {
		const struct session_holding *h = &c->info.holdings[it->i];

		log_warn("session %s ended, but its %s '%s' was not released (%s): it ends at "
			 "its lease end", c->id, sessions_kind_label(h->kind), h->name,
			 r == LOCK_BACKEND_DOWN ? "Redis did not answer" : "script error");
	}
	free(it);
	sess_item_done(c);
}

static void sess_send_release(struct sess_call *c, const struct session_holding *h,
			      struct sess_item *it)
{
	locks_release(c->b, h->kind, h->name, h->owner, c->creator, sess_on_released, it);
}

/* Which holdings are still the session's known: release those. One whose
 * fencing token changed (its owner took the lock again outside the
 * session) is not the session's to release; when the check failed, every
 * holding is released, as its owner id says. */
static void sess_on_checked(void *ctx, enum lock_result r, struct session_renew_item *items,
			    size_t n)
{
	struct sess_call *c = ctx;

	for (size_t i = 0; i < n; i++)
		c->info.holdings[i].gone = r == LOCK_OK && items[i].gone;
	free(items);
	sess_each_holding(c, sess_send_release);
}

static void sess_on_ended(void *ctx, redisReply *r)
{
	struct sess_call *c = ctx;

	if (!sess_found(c, r, "session_end", 3, 1))
		return;
	c->info.creator = c->creator = xstrdup(sess_str_of(r->element[2]));
	sess_count_keep(c, c->creator, "del");
	if (!c->info.n) {
		sess_finish(c, LOCK_OK);
		return;
	}
	session_renew_holdings(c->b, sess_renew_items(c), c->info.n, c->creator, 0, 0,
			       sess_on_checked, c);
}

void sessions_end(const struct backend *b, const char *id, const char *principal,
		  session_fn done, void *ctx)
{
	const char *args[] = { principal };

	sess_run(sess_call_new(b, S_END, id, done, ctx), SCRIPT_SESSION_END, 1, args, sess_on_ended);
}

/* ----- Every open session (an admin's listing) ----- */

struct sess_list {
	session_list_fn done;
	void *ctx;
};

static void sess_on_listed(void *ctx, redisReply *r)
{
	struct sess_list *l = ctx;
	struct lock_state st = { 0 };
	enum lock_result res = locks_check_answer(r, "session_list", "sessions", "(all)", &st);
	struct session_entry *v = NULL;
	size_t n = 0;

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
			       (r->elements - 1) % 3))
		res = locks_unexpected("session_list", "sessions", "(all)", &st);
	if (res == LOCK_OK) {
		n = (r->elements - 1) / 3;
		v = xcalloc(n ? n : 1, sizeof(*v));
		for (size_t i = 0; i < n; i++)
			v[i] = (struct session_entry){ sess_str_of(r->element[1 + 3 * i]),
						       sess_str_of(r->element[2 + 3 * i]),
						       locks_elem_int(r, 3 + 3 * i) };
		metrics_set_sessions_open(locks_elem_int(r, 0));
	}
	l->done(l->ctx, res, res == LOCK_OK ? locks_elem_int(r, 0) : 0, v, n);
	free(v);
	free(l);
}

void sessions_list(const struct backend *b, int64_t max, session_list_fn done, void *ctx)
{
	struct sess_list *l = xmalloc(sizeof(*l));
	char *names, *zprefix, maxv[24];
	const char *args[] = { NULL, maxv };

	*l = (struct sess_list){ done, ctx };
	sess_count_keys(&names, &zprefix);
	args[0] = zprefix;
	snprintf(maxv, sizeof(maxv), "%lld", (long long)max);
	scripts_run(b->redis, SCRIPT_SESSION_LIST, 1, (const char *const *)&names, 2, args,
		    sess_on_listed, l);
	free(names);
	free(zprefix);
}
