/* session_renew.c -- a session's heartbeat of its holdings in one script
 * per hash slot (lua/session_renew.lua): the holdings are sorted by the
 * slot of their lock's name (every key of a lock hashes there: Redisson's
 * {N} tags), each run of one slot cut into scripts of at most
 * SESSION_RENEW_CHUNK (on a Cluster SESSION_RENEW_DECLARED_MAX, below),
 * and the scripts sent SESSION_RENEW_WINDOW at a time. On standalone Redis or Sentinel
 * every holding is in "slot 0". What a
 * single renewal does besides its script (locks_renew) is done here for
 * each holding kept: this loop's waiters on it hear its new lease end,
 * and with --redis-sync-replicas a WAIT follows (unconfirmed, the
 * renewal stands and is counted). */
#include "service/lock/session_renew.h"

#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/base/util.h"
#include "service/lock/backend.h"
#include "service/lock/locks_redis.h"
#include "service/lock/scripts.h"
#include "service/lock/waiters.h"
#include "service/redis/cluster_slots.h"
#include "service/redis/redis_conn.h"
#include "service/redis/replica_sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* On a Cluster every holding's lock is declared in KEYS, so that a slot
 * being migrated makes Redis redirect the call (ASK, TRYAGAIN) instead of
 * running it without the holdings already moved, which would look gone.
 * scripts_run() takes this many keys at most, besides the script's 4
 * arguments and the 4 it adds (FCALL, the name, the key count and the
 * deadline), with room to spare: it aborts at REDIS_CONN_MAX_ARGS. */
#define SESSION_RENEW_DECLARED_MAX (REDIS_CONN_MAX_ARGS - 9)

/* A holding and the slot of its lock's name, for the sort. */
struct renew_slot {
	unsigned slot;
	size_t i;
};

/* Scripts of one heartbeat out at once, at most: the next goes when one
 * is answered, so other clients' commands on the connection (and in
 * Redis) wait behind two short scripts at most, not a whole heartbeat. */
#define SESSION_RENEW_WINDOW 2

/* One heartbeat's renewal of all its holdings. */
struct renew_all {
	const struct backend *b;
	struct session_renew_item *items;
	size_t n;
	int64_t ttl_ms;
	int64_t ends_ms;		/* the session's lease end, Redis' clock; 0 */
	struct renew_slot *order;	/* the holdings by slot */
	size_t from;			/* order[from..] not sent yet */
	size_t chunk;			/* holdings a script, at most */
	bool cluster;
	char *principal;
	size_t pending;			/* scripts out */
	enum lock_result result;	/* LOCK_OK, or the first failure */
	session_renew_fn done;
	void *ctx;
};

/* One script: n of the holdings, in one slot. */
struct renew_script {
	struct renew_all *all;
	size_t n;
	int64_t sent_ms;
	size_t at[];			/* their indexes into all->items */
};

static int renew_slot_cmp(const void *a, const void *b)
{
	const struct renew_slot *x = a, *y = b;

	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void renew_send_next(struct renew_all *all);

static void renew_script_done(struct renew_script *s, enum lock_result r)
{
	struct renew_all *all = s->all;

	if (r != LOCK_OK && all->result == LOCK_OK)
		all->result = r;
	free(s);
	all->pending--;
	if (all->from < all->n) {
		renew_send_next(all);
		return;
	}
	if (all->pending == 0) {
		all->done(all->ctx, all->result, all->items, all->n);
		free(all->order);
		free(all->principal);
		free(all);
	}
}

static void renew_on_synced(void *ctx, bool confirmed)
{
	struct renew_script *s = ctx;

	if (!confirmed) {
		metrics_inc(METRIC_REPLICATION_UNCONFIRMED_KEPT);
		log_warn("a session's renewal of %zu holdings was not acknowledged by enough "
			 "replicas; it stands, but a failover now may undo it", s->n);
	}
	renew_script_done(s, LOCK_OK);
}

/* Holding h was renewed, its lease left now left ms: this loop's waiters
 * on it time their retry by its new end (a shorter lease ends sooner than
 * they were told, and expiry publishes nothing). */
static void renew_kept(const struct backend *b, const struct session_renew_item *h,
		       int64_t left)
{
	char *channel = locks_wait_channel(h->kind, h->name, h->owner);

	waiters_lease_ends(b->waiters, channel, now_ms() + left);
	free(channel);
}

static void renew_on_reply(void *ctx, redisReply *r)
{
	struct renew_script *s = ctx;
	struct renew_all *all = s->all;
	struct lock_state st = { 0 };
	enum lock_result res = locks_check_answer(r, "session_renew", "session holdings", "",
						  &st);
	int64_t left;

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != s->n + 1))
		res = locks_unexpected("session_renew", "session holdings", "", &st);
	if (res != LOCK_OK) {
		renew_script_done(s, res);
		return;
	}
	/* the lease they got at least: the session's ttl_ms, or what was left
	 * of its (0: it was over, none renewed) */
	left = all->ttl_ms ? locks_lease_left(locks_elem_int(r, s->n), s->sent_ms) : 0;
	for (size_t k = 0; k < s->n; k++) {
		struct session_renew_item *h = &all->items[s->at[k]];

		if (locks_elem_int(r, k) != 1)
			h->gone = true;	/* not renewed: no longer the session's */
		else if (left > 0)
			renew_kept(all->b, h, left);
	}
	if (!all->ttl_ms) {	/* checked only */
		renew_script_done(s, LOCK_OK);
		return;
	}
	if (all->b->sync) {
		replica_sync_after(all->b->sync, renew_on_synced, s);
		return;
	}
	renew_script_done(s, LOCK_OK);
}

/* Send the script of the holdings all->items[at[..].i] (n), which share a
 * slot: every holding's keys in the one packed argument, and as KEYS the
 * first one's lock, or with declare every one's (lua/session_renew.lua
 * says why). */
static void renew_send(struct renew_all *all, const struct renew_slot *at, size_t n,
		       bool declare, const char *principal)
{
	enum { PER = 3 + LOCKS_RENEW_KEYS_MAX };	/* strings a holding, at most */
	struct renew_script *s = xmalloc(sizeof(*s) + n * sizeof(s->at[0]));
	char **keys = xcalloc(n * LOCKS_RENEW_KEYS_MAX, sizeof(*keys));
	const char **list = xcalloc(n * PER, sizeof(*list)), **locks = xcalloc(n, sizeof(*locks));
	char (*tokens)[24] = xcalloc(n, sizeof(*tokens));
	char lease[24], ends[24], *packed;
	size_t nkeys = 0, nlist = 0;

	s->all = all;
	s->n = n;
	for (size_t k = 0; k < n; k++) {
		const struct session_renew_item *h = &all->items[at[k].i];
		size_t got = locks_renew_keys(h->kind, h->name, keys + nkeys);

		s->at[k] = at[k].i;
		locks[k] = keys[nkeys];		/* its lock, its first key */
		snprintf(tokens[k], sizeof(tokens[k]), "%lld", (long long)h->token);
		list[nlist++] = h->label;
		list[nlist++] = h->owner;
		list[nlist++] = tokens[k];
		for (size_t j = 0; j < got; j++)
			list[nlist++] = keys[nkeys + j];
		nkeys += got;
	}
	packed = locks_pack_list(list, nlist);
	snprintf(lease, sizeof(lease), "%lld", (long long)all->ttl_ms);
	snprintf(ends, sizeof(ends), "%lld", (long long)all->ends_ms);
	{
		const char *args[] = { lease, principal, packed, ends };

		s->sent_ms = now_ms();
		scripts_run(all->b->redis, SCRIPT_SESSION_RENEW, declare ? (int)n : 1, locks, 4,
			    args, renew_on_reply, s);
	}
	for (size_t k = 0; k < nkeys; k++)
		free(keys[k]);
	free(keys);
	free(list);
	free(locks);
	free(tokens);
	free(packed);
}

/* Send the next script: the holdings from all->from on that share its
 * slot, at most all->chunk of them. */
static void renew_send_next(struct renew_all *all)
{
	const struct renew_slot *order = all->order;
	size_t from = all->from, i = from + 1;

	while (i < all->n && order[i].slot == order[from].slot && i - from < all->chunk)
		i++;
	all->from = i;
	all->pending++;
	renew_send(all, order + from, i - from, all->cluster, all->principal);
}

void session_renew_holdings(const struct backend *b, struct session_renew_item *items,
			    size_t n, const char *principal, int64_t ttl_ms, int64_t ends_ms,
			    session_renew_fn done, void *ctx)
{
	struct renew_all *all = xcalloc(1, sizeof(*all));
	bool cluster = redis_conn_is_cluster(b->redis);

	/* On a Cluster the session's end is in its own node's clock, which
	 * need not agree with the holdings' nodes': a holding bounded by it
	 * could end before the lease its client was told. There a holding
	 * may outlast its session by a stall between the two steps. */
	*all = (struct renew_all){ .b = b, .items = items, .n = n, .ttl_ms = ttl_ms,
				   .ends_ms = cluster ? 0 : ends_ms, .done = done,
				   .ctx = ctx, .cluster = cluster,
				   .chunk = cluster ? SESSION_RENEW_DECLARED_MAX : SESSION_RENEW_CHUNK,
				   .principal = xstrdup(principal),
				   .order = xcalloc(n, sizeof(*all->order)) };
	for (size_t i = 0; i < n; i++) {
		char *rname = cluster ? locks_redis_name(items[i].name) : NULL;

		all->order[i] = (struct renew_slot){
			rname ? cluster_key_slot(rname, strlen(rname)) : 0, i };
		free(rname);
	}
	qsort(all->order, n, sizeof(*all->order), renew_slot_cmp);
	/* scripts_run() answers later, never from inside: what is sent here
	 * cannot finish all early */
	for (int k = 0; k < SESSION_RENEW_WINDOW && all->from < n; k++)
		renew_send_next(all);
}
