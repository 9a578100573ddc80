/* list.h -- the intrusive doubly linked list every FIFO queue in dlockd
 * uses (the loop's deferred tasks and posted messages, a connection's
 * calls in flight, the cluster router's parked calls, the subscriber's
 * pending channels, a channel's sleeping waiters). An element embeds a
 * struct list_node and is found from it with list_entry(); the list is a
 * struct list_node too, a sentinel that links to itself when empty, so
 * every operation is O(1) and none allocates.
 *
 * A node that is in no list is "unlinked" (both links NULL after
 * list_node_init() or list_remove()); list_linked() tells the two apart,
 * so an owner can remove a node without remembering where it was put.
 * The list does not own its elements: freeing them is the caller's, after
 * list_remove(). No locking: a list belongs to one thread, or to whoever
 * holds the mutex its owner names. */
#ifndef DLOCKD_LIST_H
#define DLOCKD_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_node {
	struct list_node *prev, *next;
};

/* The element of type `type` whose member `member` is node. */
#define list_entry(node, type, member) \
	((type *)(void *)((char *)(node) - offsetof(type, member)))

static inline void *list_container(const struct list_node *n, size_t offset)
{
	return n ? (char *)n - offset : NULL;
}

/* list_entry(node, ...), or NULL when node is NULL: what list_first(),
 * list_next() or list_pop() found, as an element; node is evaluated once. */
#define list_entry_or_null(node, type, member) \
	((type *)list_container((node), offsetof(type, member)))

/* A list, empty. */
static inline void list_init(struct list_node *list)
{
	list->prev = list->next = list;
}

/* A node, in no list. */
static inline void list_node_init(struct list_node *n)
{
	n->prev = n->next = NULL;
}

static inline bool list_empty(const struct list_node *list)
{
	return list->next == list;
}

static inline bool list_linked(const struct list_node *n)
{
	return n->next != NULL;
}

/* The oldest node of list, or NULL when it is empty. */
static inline struct list_node *list_first(const struct list_node *list)
{
	return list_empty(list) ? NULL : list->next;
}

/* The node after n in list, or NULL when n is the last. */
static inline struct list_node *list_next(const struct list_node *list,
					  const struct list_node *n)
{
	return n->next == list ? NULL : n->next;
}

/* Put n (unlinked) at list's end. */
static inline void list_append(struct list_node *list, struct list_node *n)
{
	n->prev = list->prev;
	n->next = list;
	list->prev->next = n;
	list->prev = n;
}

/* Take n (linked) out of its list; n is unlinked afterwards. */
static inline void list_remove(struct list_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	list_node_init(n);
}

/* Take list's first node out and return it, or NULL when it is empty. */
static inline struct list_node *list_pop(struct list_node *list)
{
	struct list_node *n = list_first(list);

	if (n)
		list_remove(n);
	return n;
}

/* Move every node of from (in order) to the end of to; from is empty after. */
static inline void list_splice(struct list_node *to, struct list_node *from)
{
	if (list_empty(from))
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	list_init(from);
}

/* Walk list from oldest to newest with n; the body may remove (or free) n,
 * not the node after it. */
#define list_each_safe(list, n, tmp) \
	for ((n) = (list)->next, (tmp) = (n)->next; (n) != (list); (n) = (tmp), (tmp) = (n)->next)

#endif
