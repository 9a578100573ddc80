/* names.c -- the string-keyed intrusive hash table (names.h): FNV-1a,
 * a power-of-two bucket count, doubled once there are as many entries as
 * buckets. */
#include "service/base/names.h"

#include "service/base/util.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_BUCKETS 64

static size_t hash(const char *s)
{
	size_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static struct name_entry **slot(const struct name_table *t, const char *name)
{
	return &t->buckets[hash(name) & (t->nbuckets - 1)];
}

void names_init(struct name_table *t)
{
	t->nbuckets = FIRST_BUCKETS;
	t->buckets = xcalloc(t->nbuckets, sizeof(*t->buckets));
	t->n = 0;
}

void names_release(struct name_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->nbuckets = t->n = 0;
}

struct name_entry *names_find(const struct name_table *t, const char *name)
{
	struct name_entry *e = *slot(t, name);

	while (e && strcmp(e->name, name))
		e = e->hnext;
	return e;
}

static void grow(struct name_table *t)
{
	struct name_table bigger = { xcalloc(t->nbuckets * 2, sizeof(*t->buckets)),
				     t->nbuckets * 2, t->n };

	for (size_t i = 0; i < t->nbuckets; i++) {
		struct name_entry *e = t->buckets[i], *next;

		for (; e; e = next) {
			struct name_entry **s = slot(&bigger, e->name);

			next = e->hnext;
			e->hnext = *s;
			*s = e;
		}
	}
	free(t->buckets);
	*t = bigger;
}

void names_add(struct name_table *t, struct name_entry *e)
{
	struct name_entry **s;

	if (t->n >= t->nbuckets)
		grow(t);
	s = slot(t, e->name);
	e->hnext = *s;
	*s = e;
	t->n++;
}

void names_remove(struct name_table *t, struct name_entry *e)
{
	struct name_entry **pp = slot(t, e->name);

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = e->hnext;
		t->n--;
	}
}
