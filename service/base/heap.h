/* heap.h -- a binary min-heap of timers, intrusive: the node lives inside
 * the caller's struct, so arming and disarming never allocates. */
#ifndef DLOCKD_HEAP_H
#define DLOCKD_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct heap_node {
	int64_t at_ms;		/* monotonic time the timer fires */
	size_t idx;		/* position in the heap; HEAP_NONE when not in it */
};

#define HEAP_NONE ((size_t)-1)

struct heap {
	struct heap_node **v;
	size_t n, cap;
};

void heap_init(struct heap *h);
void heap_release(struct heap *h);
static inline void heap_node_init(struct heap_node *n) { n->idx = HEAP_NONE; }
static inline int heap_armed(const struct heap_node *n) { return n->idx != HEAP_NONE; }
/* Arm n to fire at at_ms, or move it there if it is armed already. */
void heap_set(struct heap *h, struct heap_node *n, int64_t at_ms);
/* Disarm n; harmless when it is not armed. */
void heap_remove(struct heap *h, struct heap_node *n);
/* The earliest timer, or NULL when the heap is empty. */
static inline struct heap_node *heap_top(const struct heap *h) { return h->n ? h->v[0] : NULL; }

#endif
