/* test_list.c -- the intrusive list every queue uses: FIFO order through
 * append and pop, removal from any place leaves the rest in order and the
 * node unlinked, splice keeps both orders, and the safe walk may free the
 * node it visits. */
#include "unit.h"

#include <stdlib.h>

#include "service/base/list.h"

struct item {
	int v;
	struct list_node node;
};

/* The values of list, in order, into out[]; how many. */
static int values(const struct list_node *list, int *out, int max)
{
	int n = 0;

	for (const struct list_node *p = list_first(list); p && n < max; p = list_next(list, p))
		out[n++] = list_entry(p, const struct item, node)->v;
	return n;
}

static void test_list__fifo_and_removal_anywhere(void **state)
{
	struct item it[5];
	struct list_node list;
	int got[8];

	(void)state;
	list_init(&list);
	assert_true(list_empty(&list));
	assert_null(list_first(&list));
	assert_null(list_pop(&list));
	for (int i = 0; i < 5; i++) {
		it[i].v = i;
		list_node_init(&it[i].node);
		assert_false(list_linked(&it[i].node));
		list_append(&list, &it[i].node);
		assert_true(list_linked(&it[i].node));
	}
	list_remove(&it[2].node);	/* middle */
	list_remove(&it[4].node);	/* last */
	assert_false(list_linked(&it[2].node));
	assert_int_equal(values(&list, got, 8), 3);
	assert_int_equal(got[0], 0);
	assert_int_equal(got[1], 1);
	assert_int_equal(got[2], 3);
	assert_ptr_equal(list_pop(&list), &it[0].node);	/* first */
	assert_false(list_linked(&it[0].node));
	list_append(&list, &it[2].node);	/* a removed node goes back in */
	assert_int_equal(values(&list, got, 8), 3);
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 3);
	assert_int_equal(got[2], 2);
	/* as elements: NULL where there is none, the argument evaluated once */
	assert_ptr_equal(list_entry_or_null(list_pop(&list), struct item, node), &it[1]);
	assert_ptr_equal(list_entry_or_null(list_first(&list), struct item, node), &it[3]);
	while (list_pop(&list))
		;
	assert_true(list_empty(&list));
	assert_null(list_entry_or_null(list_pop(&list), struct item, node));
}

static void test_list__splice_keeps_order(void **state)
{
	struct item it[4];
	struct list_node a, b;
	int got[8];

	(void)state;
	list_init(&a);
	list_init(&b);
	list_splice(&a, &b);	/* empty into empty */
	assert_true(list_empty(&a));
	for (int i = 0; i < 4; i++) {
		it[i].v = i;
		list_append(i < 2 ? &a : &b, &it[i].node);
	}
	list_splice(&a, &b);
	assert_true(list_empty(&b));
	assert_int_equal(values(&a, got, 8), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(got[i], i);
	list_splice(&b, &a);	/* all into empty */
	assert_int_equal(values(&b, got, 8), 4);
	assert_int_equal(got[3], 3);
}

static void test_list__safe_walk_frees(void **state)
{
	struct list_node list, *n, *tmp;
	int seen = 0;

	(void)state;
	list_init(&list);
	for (int i = 0; i < 10; i++) {
		struct item *x = malloc(sizeof(*x));

		assert_non_null(x);
		x->v = i;
		list_append(&list, &x->node);
	}
	list_each_safe(&list, n, tmp) {
		struct item *x = list_entry(n, struct item, node);

		assert_int_equal(x->v, seen++);
		list_remove(n);
		free(x);
	}
	assert_int_equal(seen, 10);
	assert_true(list_empty(&list));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list__fifo_and_removal_anywhere),
		cmocka_unit_test(test_list__splice_keeps_order),
		cmocka_unit_test(test_list__safe_walk_frees),
	};

	return cmocka_run_group_tests_name("list", tests, NULL, NULL);
}
