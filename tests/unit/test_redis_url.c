/* test_redis_url.c -- the --redis URL: hosts, ports and dbs; user and
 * password percent-decoded; unix sockets with ?db=, ?user=, ?password=;
 * redis-sentinel:// (Lettuce's form); what is refused, with the message
 * that says why; hiding the passwords. */
#include "unit.h"

#include "service/redis/redis_url.c"

/* Parse s, which must be refused with a message containing want; the
 * message must never contain the secret. */
static void refused(const char *s, const char *want)
{
	struct redis_url u;
	char why[256];

	if (redis_url_parse(s, &u, why, sizeof(why)) != -1)
		fail_msg("'%s' was accepted", s);
	if (!strstr(why, want))
		fail_msg("'%s': message '%s' does not say '%s'", s, why, want);
	if (strncmp(why, "redis url: ", 11))
		fail_msg("'%s': message '%s' does not start 'redis url: '", s, why);
	if (strstr(why, "secret"))
		fail_msg("'%s': message '%s' quotes the password", s, why);
	assert_null(u.host);
	assert_null(u.password);
	assert_null(u.sentinels);
	assert_null(u.master);
	assert_null(u.sentinel_password);
}

static void test_redis_url__tcp(void **state)
{
	struct redis_url u;

	(void)state;
	/* several hosts: a cluster's seeds; host and port are the first */
	assert_int_equal(redis_url_parse("redis://:pw@127.0.0.1:7000,[::1]:7001,h", &u, NULL, 0), 0);
	assert_int_equal(u.nseeds, 3);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 7000);
	assert_string_equal(u.seeds[1].host, "::1");
	assert_int_equal(u.seeds[1].port, 7001);
	assert_string_equal(u.seeds[2].host, "h");
	assert_int_equal(u.seeds[2].port, 6379);
	assert_string_equal(u.password, "pw");
	redis_url_release(&u);
	refused("redis://a:1,,b:2", "an empty host in the cluster seed list");
	refused("redis://a:1,", "an empty host in the cluster seed list");
	refused("redis://a:1,b:0", "port '0' is not a number from 1 to 65535");

	assert_int_equal(redis_url_parse("redis://127.0.0.1:6380/2", &u, NULL, 0), 0);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 6380);
	assert_int_equal(u.db, 2);
	assert_null(u.password);
	assert_null(u.user);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://app:s3cret@[::1]:7000/0", &u, NULL, 0), 0);
	assert_string_equal(u.user, "app");
	assert_string_equal(u.password, "s3cret");
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 7000);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://:pw@localhost", &u, NULL, 0), 0);
	assert_null(u.user);
	assert_string_equal(u.password, "pw");
	assert_int_equal(u.port, 6379);
	assert_int_equal(u.db, 0);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://redis-0.redis.svc/", &u, NULL, 0), 0);
	assert_string_equal(u.host, "redis-0.redis.svc");
	assert_int_equal(u.db, 0);
	redis_url_release(&u);
}

/* RFC 3986: '@', '/', ':' (and anything else) percent-encoded in the
 * user and the password. A raw ':' in the password is fine too: the
 * first ':' ends the user. */
static void test_redis_url__userinfo_is_percent_decoded(void **state)
{
	struct redis_url u;

	(void)state;
	assert_int_equal(redis_url_parse("redis://:p%40ss%2Fw%3Ard@h:1/3", &u, NULL, 0), 0);
	assert_string_equal(u.password, "p@ss/w:rd");
	assert_null(u.user);
	assert_string_equal(u.host, "h");
	assert_int_equal(u.port, 1);
	assert_int_equal(u.db, 3);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://us%3Aer%40x:a:b%25c%20d+e@h", &u, NULL, 0), 0);
	assert_string_equal(u.user, "us:er@x");
	assert_string_equal(u.password, "a:b%c d+e");
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://:%3f%23%26@h", &u, NULL, 0), 0);
	assert_string_equal(u.password, "?#&");
	redis_url_release(&u);
}

/* The query, on either scheme: db, user, password (decoded). */
static void test_redis_url__query_parameters(void **state)
{
	struct redis_url u;

	(void)state;
	assert_int_equal(redis_url_parse("unix:///run/redis.sock", &u, NULL, 0), 0);
	assert_string_equal(u.unix_path, "/run/redis.sock");
	assert_null(u.host);
	assert_int_equal(u.db, 0);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("unix:///run/redis.sock?db=1", &u, NULL, 0), 0);
	assert_string_equal(u.unix_path, "/run/redis.sock");
	assert_int_equal(u.db, 1);
	assert_null(u.password);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("unix:///tmp/r%20s.sock?db=4&password=p%40ss%2Fw%3Ard"
					 "&user=app", &u, NULL, 0), 0);
	assert_string_equal(u.unix_path, "/tmp/r s.sock");
	assert_int_equal(u.db, 4);
	assert_string_equal(u.password, "p@ss/w:rd");
	assert_string_equal(u.user, "app");
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis://h:7?db=5&password=x", &u, NULL, 0), 0);
	assert_int_equal(u.port, 7);
	assert_int_equal(u.db, 5);
	assert_string_equal(u.password, "x");
	redis_url_release(&u);
}

static void test_redis_url__refusals_say_why(void **state)
{
	(void)state;
	refused("http://x", "scheme 'http' is not redis://, rediss://, unix://, "
		"redis-sentinel:// or rediss-sentinel://");
	refused("redis+tls://h", "scheme 'redis+tls'");
	refused("localhost:6379", "not redis://host:port/db, rediss://host:port/db, unix:///path");
	refused("redis://", "host '' is not a host name");
	refused("redis://h:0", "port '0' is not a number from 1 to 65535");
	refused("redis://h:port", "port 'port'");
	refused("redis://h:99999", "port '99999'");
	refused("redis://h/db", "db 'db' is not a database number");
	refused("redis://h/-1", "db '-1'");
	refused("redis://h/99999999999", "db '99999999999'");
	refused("redis://h/1/2", "path '/1/2' is not /DB");
	refused("redis://user@h", "a user without a password");
	refused("redis://h?user=app", "a user without a password");
	refused("unix://relative", "unix:///absolute/path");
	refused("unix://", "unix:///absolute/path");
	refused("unix:///s?foo=1", "unknown parameter 'foo'");
	refused("redis://h/0?timeout=5", "unknown parameter 'timeout'");
	refused("unix:///s?db", "parameter 'db' has no value");
	refused("unix:///s?db=x", "db 'x' is not a database number");
	refused("unix:///s?db=99999999999", "db '99999999999'");
	refused("unix:///s?db=1&db=2", "db given twice");
	refused("redis://h/1?db=2", "db given twice");
	refused("redis://:secret@h?password=secret", "password given twice");
	refused("unix:///s?db=1&", "empty parameter");
	refused("unix:///s?&db=1", "empty parameter");
	refused("unix:///s?password=secret%zz", "bad percent-escape in the password");
	refused("redis://:secret%4@h", "bad percent-escape in the password");
	refused("redis://:secret%00@h", "%00");
	refused("unix:///s%2", "bad percent-escape in the socket path");
	/* a raw '@', '/', '?' or '#' in a password: refused, never quoted */
	refused("redis://:sec@ret@h", "write '@', '/' and '?'");
	refused("redis://:sec/secret@h", "write '@', '/' and '?'");
	refused("redis://:sec?secret@h", "write '@', '/' and '?'");
	refused("redis://:sec#secret@h", "'#'");
	refused("unix:///s?password=secret@x", "%40");
	refused("redis://h h", "host 'h h'");
	refused("redis://[::1", "IPv6");
	refused("redis://[::1]x", "after the IPv6 address");
}

/* Lettuce's form: sentinels in order, 26379 by default, the master after
 * '#', the data nodes' user and password, the sentinels' own password as
 * a parameter. */
static void test_redis_url__sentinel(void **state)
{
	struct redis_url u;

	(void)state;
	assert_int_equal(redis_url_parse("redis-sentinel://127.0.0.1:26380,h2,[::1]:7#mymaster",
					  &u, NULL, 0), 0);
	assert_int_equal(u.nsentinels, 3);
	assert_string_equal(u.sentinels[0].host, "127.0.0.1");
	assert_int_equal(u.sentinels[0].port, 26380);
	assert_string_equal(u.sentinels[1].host, "h2");
	assert_int_equal(u.sentinels[1].port, 26379);
	assert_string_equal(u.sentinels[2].host, "::1");
	assert_int_equal(u.sentinels[2].port, 7);
	assert_string_equal(u.master, "mymaster");
	assert_null(u.host);
	assert_null(u.unix_path);
	assert_null(u.password);
	assert_null(u.sentinel_password);
	assert_int_equal(u.db, 0);
	redis_url_release(&u);

	/* password@ alone is the password (Lettuce); user:password@ too */
	assert_int_equal(redis_url_parse("redis-sentinel://pw@s1/3#m", &u, NULL, 0), 0);
	assert_null(u.user);
	assert_string_equal(u.password, "pw");
	assert_int_equal(u.db, 3);
	assert_int_equal(u.nsentinels, 1);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis-sentinel://app:p%23w@s1:1,s2:2/1?"
					  "sentinel_password=s%26p#m%23aster", &u, NULL, 0), 0);
	assert_string_equal(u.user, "app");
	assert_string_equal(u.password, "p#w");
	assert_string_equal(u.sentinel_password, "s&p");
	assert_string_equal(u.master, "m#aster");
	assert_int_equal(u.db, 1);
	assert_int_equal(u.nsentinels, 2);
	assert_int_equal(u.sentinels[1].port, 2);
	redis_url_release(&u);

	assert_int_equal(redis_url_parse("redis-sentinel://s?db=2&user=u&password=p#m",
					  &u, NULL, 0), 0);
	assert_int_equal(u.db, 2);
	assert_string_equal(u.user, "u");
	assert_string_equal(u.password, "p");
	redis_url_release(&u);
}

static void test_redis_url__sentinel_refusals(void **state)
{
	(void)state;
	refused("redis-sentinel://s1,s2", "no master name");
	refused("redis-sentinel://s1#", "no master name");
	refused("redis-sentinel://s1/0?db=1", "no master name");
	refused("redis-sentinel://#m", "no sentinel");
	refused("redis-sentinel:///0#m", "no sentinel");
	refused("redis-sentinel://:secret@#m", "no sentinel");
	refused("redis-sentinel://s1,#m", "an empty host");
	refused("redis-sentinel://,s1#m", "an empty host");
	refused("redis-sentinel://s1,,s2#m", "an empty host");
	refused("redis-sentinel://s1:0#m", "port '0' is not a number from 1 to 65535");
	refused("redis-sentinel://s1,s2:99999#m", "port '99999'");
	refused("redis-sentinel://s1:x#m", "port 'x'");
	refused("redis-sentinel://s1:#m", "port ''");
	refused("redis-sentinel://s1/x#m", "db 'x'");
	refused("redis-sentinel://[::1#m", "IPv6");
	refused("redis-sentinel://s1#m#n", "a second '#'");
	refused("redis-sentinel://s1#m%zz", "bad percent-escape in the master name");
	refused("redis-sentinel://s1?sentinel_password=secret%z#m",
		"bad percent-escape in the sentinel_password");
	refused("redis-sentinel://s1?sentinel_password=secret&sentinel_password=secret#m",
		"sentinel_password given twice");
	refused("redis-sentinel://s1?timeout=5#m", "unknown parameter 'timeout'");
	refused("redis-sentinel://s1?user=u#m", "a user without a password");
	/* only the sentinel scheme knows these */
	refused("redis://h?sentinel_password=secret", "unknown parameter 'sentinel_password'");
	refused("redis://h#m", "a '#' is not allowed");
	refused("unix:///s#m", "a '#' is not allowed");
	refused("redis-sentinel://:sec@ret@s1#m", "write '@', '/' and '?'");
}

static void shown(const char *url, const char *want)
{
	char *s = redis_url_redacted(url);

	if (strcmp(s, want))
		fail_msg("'%s' shown as '%s', want '%s'", url, s, want);
	free(s);
}

static void test_redis_url__tls(void **state)
{
	struct redis_url u;

	(void)state;
	/* rediss:// is redis:// over TLS, seeds and all */
	assert_int_equal(redis_url_parse("rediss://u:p@redis.example:6380,h2/2", &u, NULL, 0), 0);
	assert_true(u.tls);
	assert_string_equal(u.host, "redis.example");
	assert_int_equal(u.port, 6380);
	assert_int_equal(u.nseeds, 2);
	assert_int_equal(u.db, 2);
	assert_string_equal(u.password, "p");
	redis_url_release(&u);
	assert_int_equal(redis_url_parse("redis://h", &u, NULL, 0), 0);
	assert_false(u.tls);
	redis_url_release(&u);
	/* tls=true on redis:// and redis-sentinel://; tls=false is plaintext */
	assert_int_equal(redis_url_parse("redis://h?tls=true&db=1", &u, NULL, 0), 0);
	assert_true(u.tls);
	assert_int_equal(u.db, 1);
	redis_url_release(&u);
	assert_int_equal(redis_url_parse("redis://h?tls=false", &u, NULL, 0), 0);
	assert_false(u.tls);
	redis_url_release(&u);
	assert_int_equal(redis_url_parse("redis-sentinel://s1,s2?tls=true#m", &u, NULL, 0), 0);
	assert_true(u.tls);
	assert_int_equal(u.nsentinels, 2);
	redis_url_release(&u);
	/* rediss-sentinel:// as Lettuce writes it */
	assert_int_equal(redis_url_parse("rediss-sentinel://pw@s1:26380/1#mymaster", &u, NULL, 0),
			 0);
	assert_true(u.tls);
	assert_int_equal(u.nsentinels, 1);
	assert_int_equal(u.sentinels[0].port, 26380);
	assert_string_equal(u.master, "mymaster");
	assert_string_equal(u.password, "pw");
	assert_int_equal(u.db, 1);
	redis_url_release(&u);

	refused("rediss://h?tls=false", "tls=false with a rediss scheme");
	refused("rediss-sentinel://s?tls=false#m", "tls=false with a rediss scheme");
	refused("unix:///tmp/r.sock?tls=true", "tls=true on a unix socket");
	refused("redis://h?tls=yes", "tls 'yes' is not true or false");
	refused("redis://h?tls=true&tls=true", "tls given twice");
	refused("rediss-sentinel://s", "no master name");

	/* the redacted form keeps a rediss-sentinel:// master name */
	{
		char *r = redis_url_redacted("rediss-sentinel://:secret@s1?sentinel_password=x#m");

		assert_string_equal(r, "rediss-sentinel://***@s1?sentinel_password=***#m");
		free(r);
	}
}

static void test_redis_url__the_password_is_hidden(void **state)
{
	(void)state;
	shown("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0");
	shown("redis://app:s3cret@h:1/2", "redis://***@h:1/2");
	shown("redis://:p%40ss%2Fw%3Ard@h/3", "redis://***@h/3");
	shown("redis://:p@ss/w@rd@h", "redis://***@h");
	shown("redis://:raw/pass@h/0", "redis://***@h/0");
	shown("unix:///run/r.sock?db=1&password=p%40ss&user=u",
	      "unix:///run/r.sock?db=1&password=***&user=u");
	shown("redis://h?password=a&password=", "redis://h?password=***&password=***");
	shown("no-scheme", "no-scheme");
	shown("redis-sentinel://u:pw@s1,s2:1/0?sentinel_password=sp&db=1#m",
	      "redis-sentinel://***@s1,s2:1/0?sentinel_password=***&db=1#m");
	shown("redis-sentinel://s1?password=a#b#m", "redis-sentinel://s1?password=***#m");
	shown("redis-sentinel://s1#m", "redis-sentinel://s1#m");
	/* a '#' before the query is not taken for the master's name */
	shown("redis-sentinel://s1#x?password=a", "redis-sentinel://s1#x?password=***");
	/* no '#' outside the sentinel scheme ends the query */
	shown("redis://h?password=a#b", "redis://h?password=***");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_url__tcp),
		cmocka_unit_test(test_redis_url__userinfo_is_percent_decoded),
		cmocka_unit_test(test_redis_url__query_parameters),
		cmocka_unit_test(test_redis_url__refusals_say_why),
		cmocka_unit_test(test_redis_url__sentinel),
		cmocka_unit_test(test_redis_url__sentinel_refusals),
		cmocka_unit_test(test_redis_url__tls),
		cmocka_unit_test(test_redis_url__the_password_is_hidden),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
