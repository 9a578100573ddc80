/* test_cluster_slots.c -- Redis Cluster's key slots (the values are what a
 * real cluster node's CLUSTER KEYSLOT answered), hash tags, a slot map
 * read from CLUSTER SLOTS replies built by hand, and MOVED / ASK
 * redirections, well and badly formed. */
#include "unit.h"

#include "service/redis/cluster_slots.c"

static unsigned slot_of(const char *key)
{
	return cluster_key_slot(key, strlen(key));
}

static void test_cluster_slots__key_slots_match_redis(void **state)
{
	static const struct {
		const char *key;
		unsigned slot;
	} known[] = {
		{ "foo", 12182 }, { "bar", 5061 }, { "hello", 866 }, { "123456789", 12739 },
		{ "{user1000}.following", 3443 },
		{ "foo{}{bar}", 8363 },		/* an empty tag: the whole key */
		{ "foo{{bar}}zap", 4015 },	/* the tag is "{bar" */
		{ "foo{bar}{zap}", 5061 },	/* the first tag only: "bar" */
		{ "a{b", 13340 },		/* no '}': the whole key */
		{ "{}", 15257 },
		{ "redisson_lock__channel:{x}", 16287 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (slot_of(known[i].key) != known[i].slot)
			fail_msg("'%s': slot %u, Redis says %u", known[i].key, slot_of(known[i].key),
				 known[i].slot);
	/* every key of one lock is on one slot */
	assert_int_equal(slot_of("redisson_lock_queue:{deploy}"), slot_of("deploy"));
	assert_int_equal(slot_of("dlockd_lock_owners:{deploy}"), slot_of("deploy"));
	/* a key with a NUL byte counts every byte */
	assert_int_not_equal(cluster_key_slot("a\0b", 3), cluster_key_slot("a", 1));
}

/* ----- Building replies ----- */

static redisReply *integer(long long v)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_INTEGER;
	r->integer = v;
	return r;
}

static redisReply *string(const char *s)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_STRING;
	r->str = strdup(s);
	r->len = strlen(s);
	return r;
}

static redisReply *array(size_t n, ...)
{
	redisReply *r = calloc(1, sizeof(*r));
	va_list ap;

	r->type = REDIS_REPLY_ARRAY;
	r->elements = n;
	r->element = calloc(n ? n : 1, sizeof(*r->element));
	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		r->element[i] = va_arg(ap, redisReply *);
	va_end(ap);
	return r;
}

/* One range of CLUSTER SLOTS: start, end, master host:port, one replica. */
static redisReply *range(long long a, long long b, const char *host, long long port)
{
	return array(4, integer(a), integer(b), array(3, string(host), integer(port),
						     string("id-master")),
		     array(3, string("127.0.0.1"), integer(port + 100), string("id-replica")));
}

static void test_cluster_slots__map_from_cluster_slots(void **state)
{
	struct cluster_map m;
	redisReply *r = array(3, range(0, 5460, "127.0.0.1", 7000),
			      range(5461, 10922, "127.0.0.1", 7001),
			      range(10923, 16383, "", 7002));
	int n;

	(void)state;
	cluster_map_init(&m);
	assert_int_equal(cluster_map_read_slots(&m, r, "127.0.0.9"), 16384);
	assert_int_equal(m.nnodes, 3);
	n = cluster_map_master(&m, slot_of("foo"));	/* 12182: the third */
	assert_string_equal(m.nodes[n].host, "127.0.0.9");	/* "" is the seed's */
	assert_int_equal(m.nodes[n].port, 7002);
	n = cluster_map_master(&m, 0);
	assert_int_equal(m.nodes[n].port, 7000);
	n = cluster_map_master(&m, 5461);
	assert_int_equal(m.nodes[n].port, 7001);
	assert_int_equal(cluster_map_master(&m, 16384), -1);

	/* a node already known keeps its index; a new one is added */
	assert_int_equal(cluster_map_node(&m, "127.0.0.1", 7001), 1);
	assert_int_equal(cluster_map_node(&m, "127.0.0.1", 7003), 3);
	freeReplyObject(r);

	/* a partial map: the slots it lists move, the rest stay */
	r = array(1, range(100, 199, "127.0.0.1", 7003));
	assert_int_equal(cluster_map_read_slots(&m, r, "x"), 100);
	assert_int_equal(cluster_map_master(&m, 150), 3);
	assert_int_equal(cluster_map_master(&m, 99), 0);
	assert_int_equal(cluster_map_master(&m, 200), 0);
	freeReplyObject(r);
	cluster_map_release(&m);
}

static void test_cluster_slots__bad_replies_leave_the_map_alone(void **state)
{
	struct cluster_map m;
	redisReply *bad[] = {
		string("ERR This instance has cluster support disabled"),
		array(1, array(2, integer(0), integer(10))),		/* no master */
		array(1, range(10, 5, "h", 7000)),			/* start > end */
		array(1, range(0, 16384, "h", 7000)),			/* past the last slot */
		array(1, range(0, 1, "h", 0)),				/* port 0 */
		array(2, range(0, 1, "h", 7000), integer(3)),		/* a stray element */
	};

	(void)state;
	cluster_map_init(&m);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (cluster_map_read_slots(&m, bad[i], "h") != -1)
			fail_msg("bad reply %zu was accepted", i);
		freeReplyObject(bad[i]);
	}
	assert_int_equal(m.nnodes, 0);
	assert_int_equal(cluster_map_master(&m, 0), -1);
	assert_int_equal(cluster_map_read_slots(&m, NULL, "h"), -1);
	cluster_map_release(&m);
}

static void test_cluster_slots__redirections(void **state)
{
	static const char *const not_redirects[] = {
		"MOVED", "MOVED 12", "MOVED x 127.0.0.1:7000", "MOVED 16384 127.0.0.1:7000",
		"MOVED 12 127.0.0.1", "MOVED 12 127.0.0.1:", "MOVED 12 127.0.0.1:70000",
		"MOVED 12 127.0.0.1:7000x", "ASKING 12 h:1", "ERR unknown", "TRYAGAIN Multiple keys",
		"CLUSTERDOWN The cluster is down",
	};
	struct cluster_node to;
	unsigned slot;

	(void)state;
	assert_int_equal(cluster_redirect_parse("MOVED 3999 127.0.0.1:6381", &slot, &to),
			 CLUSTER_MOVED);
	assert_int_equal(slot, 3999);
	assert_string_equal(to.host, "127.0.0.1");
	assert_int_equal(to.port, 6381);
	assert_int_equal(cluster_redirect_parse("ASK 0 ::1:7002", &slot, &to), CLUSTER_ASK);
	assert_int_equal(slot, 0);
	assert_string_equal(to.host, "::1");	/* the port follows the last ':' */
	assert_int_equal(to.port, 7002);
	assert_int_equal(cluster_redirect_parse("MOVED 7 :7000", &slot, &to), CLUSTER_MOVED);
	assert_string_equal(to.host, "");	/* the node that answered */
	for (size_t i = 0; i < sizeof(not_redirects) / sizeof(not_redirects[0]); i++)
		if (cluster_redirect_parse(not_redirects[i], &slot, &to) != CLUSTER_NO_REDIRECT)
			fail_msg("'%s' taken for a redirection", not_redirects[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cluster_slots__key_slots_match_redis),
		cmocka_unit_test(test_cluster_slots__map_from_cluster_slots),
		cmocka_unit_test(test_cluster_slots__bad_replies_leave_the_map_alone),
		cmocka_unit_test(test_cluster_slots__redirections),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
