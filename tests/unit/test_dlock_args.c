/* test_dlock_args.c -- what dlock's options take: durations with and
 * without units, fractions, and everything refused (signs, spaces, unknown
 * units, overflow); the grace a lease leaves room for; lock kinds; exit
 * codes in range. */
#include "unit.h"

#include "../../cli/args.c"

static int64_t dur(const char *s)
{
	int64_t ms = -7;

	return args_duration(s, &ms) ? ms : -1;
}

static void test_dlock_args__durations(void **state)
{
	(void)state;
	assert_int_equal(dur("500ms"), 500);
	assert_int_equal(dur("30s"), 30000);
	assert_int_equal(dur("5m"), 300000);
	assert_int_equal(dur("1h"), 3600000);
	assert_int_equal(dur("15"), 15000);	/* a bare number is seconds, as flock -w */
	assert_int_equal(dur("1.5s"), 1500);
	assert_int_equal(dur("0.25"), 250);
	assert_int_equal(dur("0"), 0);
	assert_int_equal(dur("0ms"), 0);
	assert_int_equal(dur("2147483647ms"), 2147483647);
	assert_int_equal(dur("596h"), 2145600000);
	assert_int_equal(dur("1.0000001s"), 1000);
}

static void test_dlock_args__refused(void **state)
{
	static const char *const bad[] = { "", "s", "-1s", "+1s", " 1s", "1s ", "1 s", "1.s",
					   ".5s", "1d", "1S", "1ms5", "10x", "2147483648ms",
					   "597h", "99999999999999999999", "1e3", "0x10" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t ms = -7;

		if (args_duration(bad[i], &ms))
			fail_msg("'%s' was taken as %lld ms", bad[i], (long long)ms);
		assert_int_equal(ms, -7);	/* left alone */
	}
}

/* `dlock run` sends SIGTERM a grace before the lease ends: a grace given
 * may be half of it at most; the default one is cut to a third of it. */
static void test_dlock_args__grace(void **state)
{
	(void)state;
	assert_true(args_grace_fits(15000, 5000));
	assert_true(args_grace_fits(3000, 1500));
	assert_false(args_grace_fits(3000, 1501));
	assert_true(args_grace_fits(300, 0));
	assert_false(args_grace_fits(300, 151));
	assert_int_equal(args_grace_default(15000, 5000), 5000);
	assert_int_equal(args_grace_default(60000, 5000), 5000);
	assert_int_equal(args_grace_default(3000, 5000), 1000);
	assert_int_equal(args_grace_default(300, 5000), 100);
	assert_true(args_grace_fits(300, args_grace_default(300, 5000)));
}

static void test_dlock_args__kinds_and_ints(void **state)
{
	enum lease_kind k = KIND_LOCK;
	int n = -1;

	(void)state;
	assert_true(args_kind("fairlock", &k));
	assert_int_equal(k, KIND_FAIR);
	assert_true(args_kind("rwlock", &k));
	assert_int_equal(k, KIND_WRITE);
	assert_true(args_mode("read", &k));
	assert_int_equal(k, KIND_READ);
	assert_false(args_mode("fair", &k));
	assert_string_equal(lease_kind_name(KIND_READ), "rwlock");
	assert_string_equal(lease_mode_name(KIND_READ), "read");
	assert_null(lease_mode_name(KIND_FAIR));
	/* dlock's old spellings are still taken */
	assert_true(args_kind("fair", &k));
	assert_int_equal(k, KIND_FAIR);
	assert_true(args_kind("write", &k));
	assert_int_equal(k, KIND_WRITE);
	assert_false(args_kind("fairlocks", &k));
	assert_false(args_kind("", &k));
	assert_int_equal(k, KIND_WRITE);
	assert_true(args_int("0", 0, 255, &n));
	assert_int_equal(n, 0);
	assert_true(args_int("255", 0, 255, &n));
	assert_false(args_int("256", 0, 255, &n));
	assert_false(args_int("-1", 0, 255, &n));
	assert_false(args_int("1x", 0, 255, &n));
	assert_false(args_int("", 0, 255, &n));
	assert_int_equal(n, 255);
}

/* --server and DLOCKD_URL take an http:// or https:// URL with a host:
 * flock's `-s NAME` (--shared) must not pass for one. */
static void test_dlock_args__server_urls(void **state)
{
	static const char *const good[] = { "http://127.0.0.1:8080", "https://dlockd.internal",
					    "http://[::1]:8080/", "HTTP://x", "https://x:1/base" };
	static const char *const bad[] = { "", "nightly-report", "127.0.0.1:8080", "http://",
					   "https:///x", "ftp://x", "http:/x", "unix:///s" };

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!args_server_ok(good[i]))
			fail_msg("'%s' was refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (args_server_ok(bad[i]))
			fail_msg("'%s' was taken", bad[i]);
}

/* One name per setting: the first variable set (not empty) of a list,
 * the new name before its alias. */
static void test_dlock_args__env_names(void **state)
{
	static const char *const names[] = { "DLOCK_ARGS_TEST_NEW", "DLOCK_ARGS_TEST_OLD", NULL };
	const char *which = NULL;

	(void)state;
	unsetenv("DLOCK_ARGS_TEST_NEW");
	unsetenv("DLOCK_ARGS_TEST_OLD");
	assert_null(args_env(names, &which));
	setenv("DLOCK_ARGS_TEST_OLD", "old", 1);
	assert_string_equal(args_env(names, &which), "old");
	assert_string_equal(which, "DLOCK_ARGS_TEST_OLD");
	setenv("DLOCK_ARGS_TEST_NEW", "", 1);	/* empty is unset */
	assert_string_equal(args_env(names, &which), "old");
	setenv("DLOCK_ARGS_TEST_NEW", "new", 1);
	assert_string_equal(args_env(names, &which), "new");
	assert_string_equal(which, "DLOCK_ARGS_TEST_NEW");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dlock_args__durations),
		cmocka_unit_test(test_dlock_args__refused),
		cmocka_unit_test(test_dlock_args__grace),
		cmocka_unit_test(test_dlock_args__kinds_and_ints),
		cmocka_unit_test(test_dlock_args__server_urls),
		cmocka_unit_test(test_dlock_args__env_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
