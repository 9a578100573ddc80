/* test_routes.c -- the route table: paths to operations and lock kinds,
 * 404 for unknown paths, 405 with the Allow list for wrong methods. */
#include "unit.h"

#include "../../api/routes.c"

static void expect_route(const char *path, enum http_method m, enum route_op op,
			 const char *name)
{
	struct route_match rm;

	assert_int_equal(routes_match(path, m, &rm), ROUTE_OK);
	assert_int_equal(rm.op, op);
	if (name) {
		assert_non_null(rm.name);
		assert_int_equal(rm.name_len, strlen(name));
		assert_memory_equal(rm.name, name, strlen(name));
	} else {
		assert_null(rm.name);
	}
}

static void test_routes__lock_methods_map_to_operations(void **state)
{
	(void)state;
	expect_route("/locks/a", METHOD_PUT, OP_ACQUIRE, "a");
	expect_route("/locks/a", METHOD_DELETE, OP_RELEASE, "a");
	expect_route("/locks/a", METHOD_GET, OP_STATUS, "a");
	expect_route("/locks/job.1:x-y", METHOD_GET, OP_STATUS, "job.1:x-y");
}

static void test_routes__heartbeat_suffix_wins_over_name(void **state)
{
	(void)state;
	expect_route("/locks/a/heartbeat", METHOD_POST, OP_HEARTBEAT, "a");
	/* a lock may be called "heartbeat" */
	expect_route("/locks/heartbeat", METHOD_GET, OP_STATUS, "heartbeat");
	expect_route("/locks/heartbeat/heartbeat", METHOD_POST, OP_HEARTBEAT, "heartbeat");
}

static void test_routes__fair_and_rw_locks(void **state)
{
	struct route_match rm;

	(void)state;
	expect_route("/fairlocks/q", METHOD_PUT, OP_ACQUIRE, "q");
	expect_route("/fairlocks/q/heartbeat", METHOD_POST, OP_HEARTBEAT, "q");
	expect_route("/rwlocks/doc/read", METHOD_PUT, OP_ACQUIRE, "doc");
	assert_int_equal(routes_match("/rwlocks/doc/read", METHOD_DELETE, &rm), ROUTE_OK);
	assert_int_equal(rm.kind, LOCK_KIND_READ);
	assert_int_equal(routes_match("/rwlocks/doc/write/heartbeat", METHOD_POST, &rm), ROUTE_OK);
	assert_int_equal(rm.kind, LOCK_KIND_WRITE);
	assert_int_equal(rm.op, OP_HEARTBEAT);
	assert_int_equal(routes_match("/rwlocks/doc/read/heartbeat", METHOD_POST, &rm), ROUTE_OK);
	assert_int_equal(rm.kind, LOCK_KIND_READ);
	expect_route("/rwlocks/doc", METHOD_GET, OP_STATUS, "doc");
	expect_route("/rwlocks/read", METHOD_GET, OP_STATUS, "read");	/* a lock named "read" */
	assert_int_equal(routes_match("/rwlocks/doc", METHOD_PUT, &rm), ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "GET");
	assert_int_equal(routes_match("/rwlocks/doc/write", METHOD_GET, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "PUT, DELETE");
}

static void test_routes__fixed_paths(void **state)
{
	(void)state;
	expect_route("/healthz", METHOD_GET, OP_HEALTHZ, NULL);
	expect_route("/readyz", METHOD_GET, OP_READYZ, NULL);
	expect_route("/metrics", METHOD_GET, OP_METRICS, NULL);
}

static void test_routes__unknown_paths_are_not_found(void **state)
{
	static const char *const paths[] = { "/", "/nope", "/locks", "/locksx/a", "/healthz/",
					     "/Locks/a", "" };
	struct route_match rm;

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		assert_int_equal(routes_match(paths[i], METHOD_GET, &rm), ROUTE_NOT_FOUND);
}

static void test_routes__wrong_method_lists_allowed_ones(void **state)
{
	struct route_match rm;

	(void)state;
	assert_int_equal(routes_match("/locks/a", METHOD_POST, &rm), ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "GET, PUT, DELETE");
	assert_int_equal(routes_match("/locks/a/heartbeat", METHOD_GET, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "POST");
	assert_int_equal(routes_match("/healthz", METHOD_OTHER, &rm), ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "GET");
}

static void test_routes__method_names(void **state)
{
	(void)state;
	assert_int_equal(routes_method("GET"), METHOD_GET);
	assert_int_equal(routes_method("PUT"), METHOD_PUT);
	assert_int_equal(routes_method("POST"), METHOD_POST);
	assert_int_equal(routes_method("DELETE"), METHOD_DELETE);
	assert_int_equal(routes_method("get"), METHOD_OTHER);
	assert_int_equal(routes_method("PATCH"), METHOD_OTHER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_routes__lock_methods_map_to_operations),
		cmocka_unit_test(test_routes__heartbeat_suffix_wins_over_name),
		cmocka_unit_test(test_routes__fair_and_rw_locks),
		cmocka_unit_test(test_routes__fixed_paths),
		cmocka_unit_test(test_routes__unknown_paths_are_not_found),
		cmocka_unit_test(test_routes__wrong_method_lists_allowed_ones),
		cmocka_unit_test(test_routes__method_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
