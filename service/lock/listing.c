/* listing.c -- GET /locks in the lock domain: the locks held, of every
 * kind, a page at a time. Nothing indexes the locks, so a page walks
 * Redis' keys with SCAN (MATCH <key prefix><prefix>*; every type: a
 * semaphore's name is a string) and asks
 * the lock_list script about each batch's names (which of them are locks
 * now, with their holders and lease); on a cluster it walks the masters
 * one after another, in the order of their lowest slots. Each page is a
 * small machine driven by its Redis answers -- SCAN a batch, inspect it,
 * take it, shrink it or cut it, go on or finish (struct listing) -- and
 * ends after a bounded number of calls, so that neither Redis nor the
 * loop is kept busy; its cursor is SCAN's own, so the next page goes on
 * as SCAN would. Nothing of a page outlives its answer.
 *
 * A lock's names in Redis and the checking of Redis' answers are locks.c's
 * (locks_redis.h), shared with every other operation. */
#include "service/lock/listing.h"

#include "service/lock/backend.h"
#include "service/lock/locks_redis.h"
#include "service/lock/scripts.h"
#include "service/redis/cluster_slots.h"
#include "service/redis/redis_conn.h"
#include "service/base/util.h"

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys a page's first SCAN visits (it filters by MATCH and TYPE
 * afterwards); later ones are sized by the density of locks seen. */
#define LIST_SCAN_COUNT 1000
/* Hashes one lock_list call looks at, at most; and the read holds it
 * looks at (each a PTTL, live or not, and each reader one more), after
 * which it stops at the end of the lock at hand and the rest go to the
 * next call: a call never takes long, however full the locks of a batch
 * (about a millisecond, plus the last lock's own holds). */
#define LIST_INSPECT_MAX 64
#define LIST_HOLDS_MAX 512
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
	char *full = locks_redis_name(prefix), *out = xmalloc(2 * strlen(full) + 2), *o = out;

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
		for (size_t j = 0; j < v[i].nholders; j++) {
			free((void *)v[i].holders[j].owner);
			free((void *)v[i].holders[j].value);
		}
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
	const char *argv[] = { "SCAN", l->scan, "MATCH", l->pattern, "COUNT", count };

	if (l->calls >= LIST_CALLS_MAX && (l->n > 0 || l->moved)) {
		list_finish(l, false, l->after);
		return;
	}
	snprintf(count, sizeof(count), "%u", l->count);
	l->calls++;
	redis_conn_send_slot(l->b->redis, l->cluster ? (int)l->shard : -1, 6, argv, NULL, on_scan,
			     l);
}

/* Ask lock_list about the next names of the batch. */
static void list_inspect(struct listing *l)
{
	/* on a cluster one name a call: a script runs on one slot */
	size_t max = l->cluster ? 1 : LIST_INSPECT_MAX;
	size_t k = l->nnames - l->at < max ? l->nnames - l->at : max;
	char **rnames = xcalloc(k, sizeof(*rnames)), **tags = xcalloc(k, sizeof(*tags));
	char holds[16];
	const char *args[3] = { NULL, NULL, holds };

	for (size_t i = 0; i < k; i++) {
		rnames[i] = locks_redis_name(l->names[l->at + i]);
		tags[i] = locks_tag_name(rnames[i]);
	}
	args[0] = locks_pack_list((const char *const *)rnames, k);
	args[1] = locks_pack_list((const char *const *)tags, k);
	snprintf(holds, sizeof(holds), "%d", LIST_HOLDS_MAX);
	l->inspecting = k;
	l->calls++;
	scripts_run(l->b->redis, SCRIPT_LOCK_LIST, l->cluster, (const char *const *)rnames, 3,
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
static void page_take(struct listing *l, size_t k)
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

		page_take(l, room);
		list_finish(l, false, upto);
		free(upto);
		return;
	}
	page_take(l, bn);
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
	enum lock_result res = locks_check_answer(r, "SCAN", "the listing of", l->prefix, &st);
	const char *kprefix = locks_key_prefix();
	size_t plen = strlen(kprefix);
	const redisReply *keys;

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
			       r->element[0]->type != REDIS_REPLY_STRING ||
			       r->element[0]->len == 0 || r->element[0]->len >= sizeof(l->next) ||
			       strspn(r->element[0]->str, "0123456789") != r->element[0]->len ||
			       r->element[1]->type != REDIS_REPLY_ARRAY))
		res = locks_unexpected("SCAN", "the listing of", l->prefix, &st);
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
		    memcmp(k->str, kprefix, plen) || !listable(k->str + plen, k->len - plen) ||
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
	size_t first, step, nh, n;
	const redisReply *vals = NULL;
	struct lock_holder *h;
	bool rw, sem;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
		return -1;
	n = e->elements;
	if (e->element[n - 1]->type == REDIS_REPLY_ARRAY)
		vals = e->element[--n];	/* the holders' values, last */
	rw = locks_elem_int(e, 0) == 2;
	sem = locks_elem_int(e, 0) == 3;	/* {3, pttl, limit, owner, 1, ...} */
	first = rw || sem ? 3 : 2;
	step = rw ? 3 : 2;
	if ((locks_elem_int(e, 0) != 1 && !rw && !sem) ||
	    e->element[1]->type != REDIS_REPLY_INTEGER ||
	    n < first || (n - first) % step ||
	    (rw && locks_elem_int(e, 2) != LOCK_MODE_READ &&
	     locks_elem_int(e, 2) != LOCK_MODE_WRITE))
		return -1;
	nh = (n - first) / step;
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
		if (vals && i < vals->elements && vals->element[i]->type == REDIS_REPLY_STRING)
			h[i].value = xstrdup(vals->element[i]->str);
	}
	*le = (struct lock_entry){
		.name = xstrdup(name),
		.rw = rw,
		.semaphore = sem,
		.limit = sem ? locks_elem_int(e, 2) : 0,
		.mode = rw ? (enum lock_mode)locks_elem_int(e, 2) : LOCK_MODE_NONE,
		.ttl_ms = e->element[1]->integer < -1 ? -1 : e->element[1]->integer,
		.nholders = nh,
		.holders = h,
	};
	return 0;
}

/* lock_list's answer: one element per name looked at, 0 for those that
 * are no lock now; the first ones asked about, or all of them (it stops
 * at LIST_HOLDS_MAX read holds: the rest are asked about again). */
static void on_inspect(void *arg, redisReply *r)
{
	struct listing *l = arg;
	struct lock_state st = { 0 };
	const char *script = scripts_name(SCRIPT_LOCK_LIST);
	enum lock_result res = locks_check_answer(r, script, "the listing of", l->prefix, &st);

	if (res == LOCK_OK && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
			       r->elements > l->inspecting))
		res = locks_unexpected(script, "the listing of", l->prefix, &st);
	else if (res == LOCK_OK)
		l->inspecting = r->elements;
	for (size_t i = 0; res == LOCK_OK && i < l->inspecting; i++) {
		const redisReply *e = r->element[i];

		if (e->type == REDIS_REPLY_INTEGER && e->integer == 0)
			continue;
		if (entry_decode(&l->bv[l->bn], l->names[l->at + i], e) < 0)
			res = locks_unexpected(script, "the listing of", l->prefix, &st);
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
