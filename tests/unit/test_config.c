/* test_config.c -- settings: integers, listen addresses, the order
 * environment < flags, and what is refused at start (Redis URLs
 * themselves: test_redis_url.c). */
#include "unit.h"

#include "service/config/config.c"

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

/* --redis-sync-replicas: off, auto or 1..64; nothing else. */
static void test_config__sync_replicas_values(void **state)
{
	char *argv[] = { (char[]){ "dlockd" }, (char[]){ "--redis-sync-replicas" }, NULL, NULL };
	struct config cfg;
	static const struct {
		const char *val;
		int rc, want;
	} cases[] = {
		{ "off", 0, 0 }, { "auto", 0, REPLICA_SYNC_AUTO }, { "1", 0, 1 }, { "64", 0, 64 },
		{ "0", -1, 0 }, { "65", -1, 0 }, { "-1", -1, 0 }, { "Auto", -1, 0 }, { "", -1, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		argv[2] = (char *)cases[i].val;
		assert_int_equal(config_load(&cfg, 3, argv), cases[i].rc);
		if (cases[i].rc == 0) {
			assert_int_equal(cfg.sync_replicas, cases[i].want);
			assert_int_equal(cfg.sync_timeout_ms, 1000);
		}
		config_release(&cfg);
	}
}

/* The cap on a fair queue (and on waiting writers): 1000 unless set, from
 * a flag or the environment; 1..100000. */
static void test_config__fair_queue_cap(void **state)
{
	char *argv[] = { (char[]){ "dlockd" }, (char[]){ "--max-fair-queue" }, (char[]){ "8" },
			 NULL };
	char *none[] = { (char[]){ "dlockd" }, NULL };
	struct config cfg;

	(void)state;
	assert_int_equal(config_load(&cfg, 1, none), 0);
	assert_int_equal(cfg.fair_queue_max, 1000);
	config_release(&cfg);
	setenv("DLOCKD_MAX_FAIR_QUEUE", "50", 1);
	assert_int_equal(config_load(&cfg, 1, none), 0);
	assert_int_equal(cfg.fair_queue_max, 50);
	config_release(&cfg);
	assert_int_equal(config_load(&cfg, 3, argv), 0);
	assert_int_equal(cfg.fair_queue_max, 8);
	config_release(&cfg);
	setenv("DLOCKD_MAX_FAIR_QUEUE", "0", 1);
	assert_int_equal(config_load(&cfg, 1, none), -1);
	config_release(&cfg);
	unsetenv("DLOCKD_MAX_FAIR_QUEUE");
}

/* The caps on read holds: 64 per owner and 256 per lock unless set, from
 * a flag or the environment; 1..100000. */
static void test_config__read_hold_caps(void **state)
{
	char *argv[] = { (char[]){ "dlockd" }, (char[]){ "--max-read-holds-per-owner" },
			 (char[]){ "8" }, NULL };
	char *none[] = { (char[]){ "dlockd" }, NULL };
	char *zero[] = { (char[]){ "dlockd" }, (char[]){ "--max-read-holds-per-lock" },
			 (char[]){ "0" }, NULL };
	struct config cfg;

	(void)state;
	assert_int_equal(config_load(&cfg, 1, none), 0);
	assert_int_equal(cfg.read_holds_per_owner, 64);
	assert_int_equal(cfg.read_holds_per_lock, 256);
	config_release(&cfg);
	setenv("DLOCKD_MAX_READ_HOLDS_PER_LOCK", "1000", 1);
	assert_int_equal(config_load(&cfg, 3, argv), 0);
	assert_int_equal(cfg.read_holds_per_owner, 8);
	assert_int_equal(cfg.read_holds_per_lock, 1000);
	config_release(&cfg);
	setenv("DLOCKD_MAX_READ_HOLDS_PER_LOCK", "100001", 1);
	assert_int_equal(config_load(&cfg, 1, none), -1);
	config_release(&cfg);
	unsetenv("DLOCKD_MAX_READ_HOLDS_PER_LOCK");
	assert_int_equal(config_load(&cfg, 3, zero), -1);
	config_release(&cfg);
}

/* A bad --redis is refused at start with what is wrong, and the password
 * is not printed. */
static void test_config__tls_files_go_together(void **state)
{
	static const struct {
		const char *cert, *key, *ca;	/* NULL: flag not given */
		int rc;
	} cases[] = {
		{ "c.pem", "k.pem", NULL, 0 }, { "c.pem", "k.pem", "ca.pem", 0 },
		{ "c.pem", NULL, NULL, -1 }, { NULL, "k.pem", NULL, -1 },
		{ NULL, NULL, "ca.pem", -1 }, { "c.pem", "", NULL, -1 },	/* '' is none */
		{ "", "", NULL, 0 },
	};
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[8] = { (char[]){ "dlockd" } };
		int argc = 1;

		if (cases[i].cert) {
			argv[argc++] = (char *)"--tls-cert";
			argv[argc++] = (char *)cases[i].cert;
		}
		if (cases[i].key) {
			argv[argc++] = (char *)"--tls-key";
			argv[argc++] = (char *)cases[i].key;
		}
		if (cases[i].ca) {
			argv[argc++] = (char *)"--tls-client-ca";
			argv[argc++] = (char *)cases[i].ca;
		}
		assert_int_equal(config_load(&cfg, argc, argv), cases[i].rc);
		if (cases[i].rc == 0 && cases[i].cert && *cases[i].cert) {
			assert_string_equal(cfg.tls_cert, cases[i].cert);
			assert_string_equal(cfg.tls_key, cases[i].key);
		} else if (cases[i].rc == 0) {
			assert_null(cfg.tls_cert);
			assert_null(cfg.tls_key);
		}
		config_release(&cfg);
	}
}

static void test_config__cgroup_cpu_quota_rounds_up(void **state)
{
	(void)state;
	assert_int_equal(config_cpu_quota("50000 100000\n"), 1);	/* half a core */
	assert_int_equal(config_cpu_quota("150000 100000"), 2);
	assert_int_equal(config_cpu_quota("400000 100000"), 4);
	assert_int_equal(config_cpu_quota("max 100000\n"), 0);	/* no limit */
	assert_int_equal(config_cpu_quota(""), 0);
	assert_int_equal(config_cpu_quota("0 100000"), 0);
	assert_int_equal(config_cpu_quota(NULL), 0);
}

static void test_config__a_bad_redis_url_is_refused_with_why(void **state)
{
	char *argv[] = { (char[]){ "dlockd" }, (char[]){ "--redis" },
			 (char[]){ "redis://:hunter2@127.0.0.1/0?foo=1" }, NULL };
	struct config cfg;
	char out[1024] = "";
	FILE *saved = stderr, *err = tmpfile();
	size_t n;

	(void)state;
	assert_non_null(err);
	stderr = err;
	assert_int_equal(config_load(&cfg, 3, argv), -1);
	stderr = saved;
	config_release(&cfg);
	rewind(err);
	n = fread(out, 1, sizeof(out) - 1, err);
	out[n] = '\0';
	fclose(err);
	assert_non_null(strstr(out, "redis url: unknown parameter 'foo'"));
	assert_null(strstr(out, "hunter2"));
}

/* --health-check: live by default, =ready, refused otherwise; and known
 * even when a setting read before the flags is refused (a probe exits 1). */
static void test_config__health_check_modes(void **state)
{
	char *live[] = { (char[]){ "dlockd" }, (char[]){ "--health-check" }, NULL };
	char *ready[] = { (char[]){ "dlockd" }, (char[]){ "--health-check=ready" }, NULL };
	char *bad[] = { (char[]){ "dlockd" }, (char[]){ "--health-check=soon" }, NULL };
	char *serve[] = { (char[]){ "dlockd" }, NULL };
	struct config cfg;

	(void)state;
	assert_int_equal(config_load(&cfg, 2, live), 0);
	assert_int_equal(cfg.health_check, HEALTH_CHECK_LIVE);
	config_release(&cfg);
	assert_int_equal(config_load(&cfg, 2, ready), 0);
	assert_int_equal(cfg.health_check, HEALTH_CHECK_READY);
	config_release(&cfg);
	assert_int_equal(config_load(&cfg, 1, serve), 0);
	assert_int_equal(cfg.health_check, HEALTH_CHECK_OFF);
	config_release(&cfg);
	assert_int_equal(config_load(&cfg, 2, bad), -1);
	assert_int_equal(cfg.health_check, HEALTH_CHECK_LIVE);
	config_release(&cfg);
	setenv("DLOCKD_THREADS", "0", 1);
	assert_int_equal(config_load(&cfg, 2, ready), -1);
	assert_int_equal(cfg.health_check, HEALTH_CHECK_LIVE);
	config_release(&cfg);
	unsetenv("DLOCKD_THREADS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config__integers_are_whole_and_in_range),
		cmocka_unit_test(test_config__listen_addresses),
		cmocka_unit_test(test_config__flags_win_over_environment),
		cmocka_unit_test(test_config__inconsistent_settings_are_refused),
		cmocka_unit_test(test_config__a_bad_redis_url_is_refused_with_why),
		cmocka_unit_test(test_config__cgroup_cpu_quota_rounds_up),
		cmocka_unit_test(test_config__sync_replicas_values),
		cmocka_unit_test(test_config__read_hold_caps),
		cmocka_unit_test(test_config__fair_queue_cap),
		cmocka_unit_test(test_config__health_check_modes),
		cmocka_unit_test(test_config__tls_files_go_together),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
