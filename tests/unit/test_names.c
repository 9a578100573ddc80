/* test_names.c -- the string-keyed table shared by the waiters, the
 * subscriber and the fair-queue refresher: entries are found by name
 * through growth, removal takes exactly the one entry, and the safe walk
 * may free what it visits. */
#include "unit.h"

#include <stdio.h>

#include "service/base/names.c"

struct thing {
	char name[16];
	struct name_entry entry;
};

static void test_names__found_through_growth_and_removal(void **state)
{
	enum { N = 1000 };
	static struct thing t[N];
	struct name_table tab;
	size_t seen = 0;

	(void)state;
	names_init(&tab);
	for (int i = 0; i < N; i++) {
		snprintf(t[i].name, sizeof(t[i].name), "ch:%d", i);
		t[i].entry.name = t[i].name;
		names_add(&tab, &t[i].entry);
	}
	assert_int_equal(tab.n, N);
	assert_true(tab.nbuckets >= N);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(names_find(&tab, t[i].name), &t[i].entry);
	assert_null(names_find(&tab, "ch:1000"));
	for (int i = 0; i < N; i += 2)
		names_remove(&tab, &t[i].entry);
	assert_int_equal(tab.n, N / 2);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(names_find(&tab, t[i].name), i % 2 ? &t[i].entry : NULL);
	names_each(&tab, e)
		seen++;
	assert_int_equal(seen, N / 2);
	names_release(&tab);
}

static void test_names__the_safe_walk_may_free_each_entry(void **state)
{
	struct name_table tab;

	(void)state;
	names_init(&tab);
	for (int i = 0; i < 200; i++) {
		struct thing *x = xcalloc(1, sizeof(*x));

		snprintf(x->name, sizeof(x->name), "n%d", i);
		x->entry.name = x->name;
		names_add(&tab, &x->entry);
	}
	names_each_safe(&tab, e, next) {
		names_remove(&tab, e);
		free(container_of(e, struct thing, entry));
	}
	assert_int_equal(tab.n, 0);
	assert_null(names_find(&tab, "n7"));
	names_release(&tab);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names__found_through_growth_and_removal),
		cmocka_unit_test(test_names__the_safe_walk_may_free_each_entry),
	};

	return cmocka_run_group_tests_name("names", tests, NULL, NULL);
}
