/* test_util.c -- random_hex: ids of the size asked for, lowercase hex,
 * never repeated across the refills of its per-thread pool, and the pool
 * wiped behind what it handed out; put_decimal writes what printf's %lld
 * does. */
#include "unit.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "service/base/util.c"

static void test_util__random_hex_is_hex_and_never_repeats(void **state)
{
	enum { N = 2000 };	/* 16-byte ids: several refills of the 4 KiB pool */
	static char ids[N][33];

	(void)state;
	for (int i = 0; i < N; i++) {
		random_hex(ids[i], 16);
		assert_int_equal(strlen(ids[i]), 32);
		assert_int_equal(strspn(ids[i], "0123456789abcdef"), 32);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(ids[i], ids[j]);
	}
}

static void test_util__random_hex_wipes_what_it_handed_out(void **state)
{
	char a[129], b[3];

	(void)state;
	random_hex(b, 1);	/* the pool is filled */
	random_hex(a, 64);
	for (size_t i = 0; i < RANDOM_POOL - random_left; i++)
		assert_int_equal(random_pool[i], 0);
	/* sizes that do not divide the pool cross a refill whole */
	for (int i = 0; i < 300; i++) {
		random_hex(a, 61);
		assert_int_equal(strlen(a), 122);
	}
}

static void test_util__put_decimal_is_printfs_lld(void **state)
{
	static const long long v[] = { 0, 1, -1, 9, 10, 99, 100, 1234567890123LL, -42,
				       LLONG_MAX, LLONG_MIN, LLONG_MIN + 1 };
	char got[DECIMAL_MAX + 1], want[32];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		*put_decimal(got, v[i]) = '\0';
		snprintf(want, sizeof(want), "%lld", v[i]);
		assert_string_equal(got, want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_util__random_hex_is_hex_and_never_repeats),
		cmocka_unit_test(test_util__random_hex_wipes_what_it_handed_out),
		cmocka_unit_test(test_util__put_decimal_is_printfs_lld),
	};

	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
