/* test_config.c -- settings: integers, listen addresses, Redis URLs, and
 * the order environment < flags. */
#include "unit.h"

#include "../../service/config.c"

static void test_config__integers_are_whole_and_in_range(void **state)
{
	int64_t v;

	(void)state;
	assert_int_equal(config_parse_int("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(config_parse_int("-1", -5, 5, &v), 0);
	assert_int_equal(v, -1);
	assert_int_equal(config_parse_int("101", 0, 100, &v), -1);
	assert_int_equal(config_parse_int("4x", 0, 100, &v), -1);
	assert_int_equal(config_parse_int(" 4", 0, 100, &v), -1);
	assert_int_equal(config_parse_int("", 0, 100, &v), -1);
	assert_int_equal(config_parse_int("99999999999999999999", 0, INT64_MAX, &v), -1);
}

static void test_config__listen_addresses(void **state)
{
	struct sockaddr_storage a;
	socklen_t len;

	(void)state;
	assert_int_equal(config_parse_listen("127.0.0.1:8080", &a, &len), 0);
	assert_int_equal(a.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&a)->sin_port), 8080);
	assert_int_equal(config_parse_listen("[::1]:9", &a, &len), 0);
	assert_int_equal(a.ss_family, AF_INET6);
	assert_int_equal(config_parse_listen("localhost:0", &a, &len), 0);
	assert_int_equal(config_parse_listen("127.0.0.1", &a, &len), -1);
	assert_int_equal(config_parse_listen("127.0.0.1:65536", &a, &len), -1);
	assert_int_equal(config_parse_listen("[::1:80", &a, &len), -1);
	assert_int_equal(config_parse_listen(":80", &a, &len), -1);
	assert_int_equal(config_parse_listen("example.com:80", &a, &len), -1);
}

static void test_config__redis_urls(void **state)
{
	struct redis_url u;

	(void)state;
	assert_int_equal(redis_url_parse("redis://127.0.0.1:6380/2", &u), 0);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 6380);
	assert_int_equal(u.db, 2);
	assert_null(u.password);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://app:s3cret@[::1]:7000/0", &u), 0);
	assert_string_equal(u.user, "app");
	assert_string_equal(u.password, "s3cret");
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 7000);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://:pw@localhost", &u), 0);
	assert_null(u.user);
	assert_string_equal(u.password, "pw");
	assert_int_equal(u.port, 6379);
	assert_int_equal(u.db, 0);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("unix:///run/redis.sock", &u), 0);
	assert_string_equal(u.unix_path, "/run/redis.sock");
	assert_null(u.host);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("http://x", &u), -1);
	assert_int_equal(redis_url_parse("redis://", &u), -1);
	assert_int_equal(redis_url_parse("redis://h:0", &u), -1);
	assert_int_equal(redis_url_parse("redis://h:port", &u), -1);
	assert_int_equal(redis_url_parse("redis://h/db", &u), -1);
	assert_int_equal(redis_url_parse("redis://user@h", &u), -1);
	assert_int_equal(redis_url_parse("unix://relative", &u), -1);
}

static void test_config__flags_win_over_environment(void **state)
{
	char *argv[] = { (char[]){ "dlockd" }, (char[]){ "--max-ttl-ms" }, (char[]){ "5000" }, (char[]){ "--threads" }, (char[]){ "3" }, NULL };
	struct config cfg;

	(void)state;
	setenv("DLOCKD_MAX_TTL_MS", "7000", 1);
	setenv("DLOCKD_DEFAULT_TTL_MS", "1000", 1);
	assert_int_equal(config_load(&cfg, 5, argv), 0);
	assert_int_equal(cfg.max_ttl_ms, 5000);
	assert_int_equal(cfg.default_ttl_ms, 1000);
	assert_int_equal(cfg.threads, 3);
	assert_int_equal(cfg.max_wait_ms, 300000);
	config_release(&cfg);
	unsetenv("DLOCKD_MAX_TTL_MS");
	unsetenv("DLOCKD_DEFAULT_TTL_MS");
}

static void test_config__inconsistent_settings_are_refused(void **state)
{
	char *argv[] = { (char[]){ "dlockd" }, (char[]){ "--default-ttl-ms" }, (char[]){ "9000" }, (char[]){ "--max-ttl-ms" }, (char[]){ "5000" }, NULL };
	char *argv2[] = { (char[]){ "dlockd" }, (char[]){ "--listen" }, (char[]){ "nowhere" }, NULL };
	struct config cfg;

	(void)state;
	assert_int_equal(config_load(&cfg, 5, argv), -1);
	config_release(&cfg);
	assert_int_equal(config_load(&cfg, 3, argv2), -1);
	config_release(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config__integers_are_whole_and_in_range),
		cmocka_unit_test(test_config__listen_addresses),
		cmocka_unit_test(test_config__redis_urls),
		cmocka_unit_test(test_config__flags_win_over_environment),
		cmocka_unit_test(test_config__inconsistent_settings_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
