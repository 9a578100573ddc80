/* heap.c -- binary min-heap of intrusive timer nodes, ordered by at_ms.
 * Each node records its index so it can be removed or moved in O(log n). */
#include "service/base/heap.h"

#include "service/base/util.h"

#include <stdlib.h>

void heap_init(struct heap *h)
{
	h->v = NULL;
	h->n = h->cap = 0;
}

void heap_release(struct heap *h)
{
	for (size_t i = 0; i < h->n; i++)
		h->v[i]->idx = HEAP_NONE;
	free(h->v);
	heap_init(h);
}

static void place(struct heap *h, size_t i, struct heap_node *n)
{
	h->v[i] = n;
	n->idx = i;
}

static void sift_up(struct heap *h, size_t i)
{
	struct heap_node *n = h->v[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (h->v[parent]->at_ms <= n->at_ms)
			break;
		place(h, i, h->v[parent]);
		i = parent;
	}
	place(h, i, n);
}

static void sift_down(struct heap *h, size_t i)
{
	struct heap_node *n = h->v[i];

	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= h->n)
			break;
		if (child + 1 < h->n && h->v[child + 1]->at_ms < h->v[child]->at_ms)
			child++;
		if (n->at_ms <= h->v[child]->at_ms)
			break;
		place(h, i, h->v[child]);
		i = child;
	}
	place(h, i, n);
}

void heap_set(struct heap *h, struct heap_node *n, int64_t at_ms)
{
	if (heap_armed(n)) {
		int64_t old = n->at_ms;

		n->at_ms = at_ms;
		if (at_ms < old)
			sift_up(h, n->idx);
		else
			sift_down(h, n->idx);
		return;
	}
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->v = xrealloc(h->v, h->cap * sizeof(*h->v));
	}
	n->at_ms = at_ms;
	place(h, h->n++, n);
	sift_up(h, n->idx);
}

void heap_remove(struct heap *h, struct heap_node *n)
{
	size_t i = n->idx;
	struct heap_node *last;

	if (!heap_armed(n))
		return;
	n->idx = HEAP_NONE;
	last = h->v[--h->n];
	if (i == h->n)
		return;
	place(h, i, last);
	if (i > 0 && h->v[(i - 1) / 2]->at_ms > last->at_ms)
		sift_up(h, i);
	else
		sift_down(h, i);
}
