/* lock_view.c -- a status script's reply as a struct lock_view
 * (lock_view.h): the holdings with their holds, fencing tokens, token
 * names and leases, a fair lock's first queue places, and the state's
 * index a watch compares; references for the watches that share one
 * read, and copies. */
#include "service/lock/lock_view.h"

#include "service/base/util.h"
#include "service/lock/locks_redis.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

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

/* The index of a state (docs/internals/architecture.md, "Watching"): the fencing
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

/* The holder values vals (one per holding of the reply's holders h, per
 * elements each; false for none) into v's holdings, which skipped the
 * holdings without an owner. */
static void holder_values(struct lock_view *v, const redisReply *h, size_t per,
			  const redisReply *vals)
{
	size_t k = 0;

	if (!vals || vals->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < h->elements / per && i < vals->elements; i++) {
		const redisReply *o = elem(h, i * per), *val = vals->element[i];

		if (!o || o->type != REDIS_REPLY_STRING || o->len == 0)
			continue;
		if (k < v->nholders && val->type == REDIS_REPLY_STRING)
			v->holders[k].value = xstrdup(val->str);
		k++;
	}
}

/* A status script's reply (lua/lock_status.lua, lua/rw_status.lua) as a
 * view; NULL when it is not shaped as they promise. */
struct lock_view *lock_view_decode(const redisReply *r, bool rw)
{
	size_t per = rw ? 6 : 4;
	const redisReply *h = elem(r, 2), *q = elem(r, 3);
	struct lock_view *v;

	if (!h || h->type != REDIS_REPLY_ARRAY || h->elements % per ||
	    (q && (q->type != REDIS_REPLY_ARRAY || q->elements % 2)))
		return NULL;
	v = xcalloc(1, sizeof(*v));
	v->locked = locks_elem_int(r, 0) > 0;
	v->mode = rw ? (enum lock_mode)locks_elem_int(r, 0) : LOCK_MODE_NONE;
	v->ttl_ms = v->locked ? locks_elem_int(r, 1) : 0;
	v->holders = xcalloc(h->elements / per + 1, sizeof(*v->holders));
	for (size_t i = 0; i < h->elements; i += per) {
		struct lock_holding *x = &v->holders[v->nholders];

		x->owner = elem_dup(h, i);
		if (!x->owner)
			continue;
		x->holds = locks_elem_int(h, i + 1);
		x->token = locks_elem_int(h, i + 2);
		x->principal = elem_dup(h, i + 3);
		x->side = !rw ? LOCK_MODE_NONE
			      : locks_elem_int(h, i + 4) == 2 ? LOCK_MODE_WRITE : LOCK_MODE_READ;
		x->ttl_ms = rw ? locks_elem_int(h, i + 5) : v->ttl_ms;
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
		p->ttl_ms = locks_elem_int(q, i + 1);
		if (p->owner)
			v->nplaces++;
	}
	v->queued = locks_elem_int(r, 4);
	holder_values(v, h, per, elem(r, 5));
	v->index = view_index(v);
	return v;
}

/* A semaphore's index: the newest token granted (its counter's, else the
 * newest listed permit's: a Redisson client's count 1) plus the permits
 * out, so that a take changes it whichever permit it is, and a release
 * (which leaves the newest token) too. */
struct lock_view *lock_view_decode_semaphore(const redisReply *r)
{
	const size_t per = 6;
	const redisReply *h = elem(r, 2);
	struct lock_view *v;

	if (!h || h->type != REDIS_REPLY_ARRAY || h->elements % per)
		return NULL;
	v = xcalloc(1, sizeof(*v));
	v->semaphore = true;
	v->locked = locks_elem_int(r, 0) > 0;
	v->ttl_ms = locks_elem_int(r, 1);
	v->limit = locks_elem_int(r, 3);
	v->available = locks_elem_int(r, 4);
	v->waiting = locks_elem_int(r, 5);
	v->out = locks_elem_int(r, 6);
	v->holders = xcalloc(h->elements / per + 1, sizeof(*v->holders));
	v->places = xcalloc(1, sizeof(*v->places));
	for (size_t i = 0; i < h->elements; i += per) {
		struct lock_holding *x = &v->holders[v->nholders];
		const redisReply *val = elem(h, i + 4);

		x->owner = elem_dup(h, i);
		if (!x->owner)
			continue;
		x->holds = 1;
		x->token = locks_elem_int(h, i + 1);
		x->principal = elem_dup(h, i + 2);
		x->ttl_ms = locks_elem_int(h, i + 3);
		if (val && val->type == REDIS_REPLY_STRING)
			x->value = xstrdup(val->str);
		x->foreign = locks_elem_int(h, i + 5) == 1;
		if (x->ttl_ms >= 0 && (v->changes_in_ms <= 0 || x->ttl_ms < v->changes_in_ms))
			v->changes_in_ms = x->ttl_ms > 0 ? x->ttl_ms : 1;
		v->nholders++;
	}
	if (v->changes_in_ms == 0)
		v->changes_in_ms = -1;
	v->asked_held = locks_elem_int(r, 8) == 1;
	if (v->out > 0) {
		int64_t last = locks_elem_int(r, 7);

		v->index = (last > view_index(v) ? last : view_index(v)) + v->out;
	}
	return v;
}

struct lock_view *lock_view_ref(struct lock_view *v)
{
	if (v)
		v->shares++;
	return v;
}

void lock_view_free(struct lock_view *v)
{
	if (!v)
		return;
	if (v->shares) {
		v->shares--;
		return;
	}
	if (v->memo)
		v->memo_free(v->memo);
	for (size_t i = 0; i < v->nholders; i++) {
		free(v->holders[i].owner);
		free(v->holders[i].principal);
		free(v->holders[i].value);
	}
	for (size_t i = 0; i < v->nplaces; i++)
		free(v->places[i].owner);
	free(v->holders);
	free(v->places);
	free(v);
}

struct lock_view *lock_view_dup(const struct lock_view *v)
{
	struct lock_view *c;

	if (!v)
		return NULL;
	c = xmalloc(sizeof(*c));
	*c = *v;
	c->shares = 0;
	c->memo = NULL;
	c->memo_free = NULL;
	c->holders = xcalloc(v->nholders + 1, sizeof(*c->holders));
	for (size_t i = 0; i < v->nholders; i++) {
		c->holders[i] = v->holders[i];
		c->holders[i].owner = xstrdup(v->holders[i].owner);
		c->holders[i].principal = v->holders[i].principal ?
					  xstrdup(v->holders[i].principal) : NULL;
		c->holders[i].value = v->holders[i].value ? xstrdup(v->holders[i].value) : NULL;
	}
	c->places = xcalloc(v->nplaces + 1, sizeof(*c->places));
	for (size_t i = 0; i < v->nplaces; i++) {
		c->places[i] = v->places[i];
		c->places[i].owner = xstrdup(v->places[i].owner);
	}
	return c;
}

const struct lock_holding *lock_view_holding(const struct lock_view *v, const char *owner,
					      enum lock_mode side)
{
	for (size_t i = 0; v && i < v->nholders; i++)
		if (v->holders[i].side == side && !strcmp(v->holders[i].owner, owner))
			return &v->holders[i];
	return NULL;
}
