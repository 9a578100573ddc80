/* names.h -- a hash table of things keyed by a string (channels, locks),
 * intrusive: the entry lives in the caller's struct, which owns the name,
 * so adding and removing never allocates but to grow the table. Not
 * thread-safe: each table belongs to one loop or thread. */
#ifndef DLOCKD_NAMES_H
#define DLOCKD_NAMES_H

#include <stddef.h>

struct name_entry {
	const char *name;		/* set by the caller; must outlive the entry */
	struct name_entry *hnext;	/* bucket chain */
};

struct name_table {
	struct name_entry **buckets;
	size_t nbuckets, n;
};

void names_init(struct name_table *t);
/* Free the buckets; the entries are the caller's. */
void names_release(struct name_table *t);
/* The entry called name, or NULL. */
struct name_entry *names_find(const struct name_table *t, const char *name);
/* Add e (no entry of its name may be in t). */
void names_add(struct name_table *t, struct name_entry *e);
/* Take e (which is in t) out. */
void names_remove(struct name_table *t, struct name_entry *e);

/* Every entry of t, in no order; the body must not add or remove any. */
#define names_each(t, e)                                                      \
	for (size_t names_i_ = 0; names_i_ < (t)->nbuckets; names_i_++)      \
		for (struct name_entry *e = (t)->buckets[names_i_]; e; e = e->hnext)

/* The same, where the body may remove (and free) e, but add nothing. */
#define names_each_safe(t, e, next)                                           \
	for (size_t names_i_ = 0; names_i_ < (t)->nbuckets; names_i_++)      \
		for (struct name_entry *e = (t)->buckets[names_i_], *next;     \
		     e && (next = e->hnext, 1); e = next)

#endif
