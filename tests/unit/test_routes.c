/* test_routes.c -- the route table: paths (as sent, escapes and all) to
 * operations and lock kinds, HEAD wherever GET, 404 for unknown paths, 405
 * with the Allow list for wrong methods. */
#include "unit.h"

#include "api/routes.c"
#include "api/ui_assets.h"

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
	assert_string_equal(rm.allow, "GET, HEAD");
	assert_int_equal(routes_match("/rwlocks/doc/write", METHOD_GET, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "PUT, DELETE");
}

static void test_routes__semaphores(void **state)
{
	struct route_match rm;

	(void)state;
	expect_route("/semaphores/pool", METHOD_PUT, OP_ACQUIRE, "pool");
	expect_route("/semaphores/pool", METHOD_GET, OP_STATUS, "pool");
	expect_route("/semaphores/pool", METHOD_DELETE, OP_RELEASE, "pool");
	expect_route("/semaphores/pool/heartbeat", METHOD_POST, OP_HEARTBEAT, "pool");
	expect_route("/semaphores/pool/limit", METHOD_PUT, OP_SET_LIMIT, "pool");
	assert_int_equal(routes_match("/semaphores/pool", METHOD_PUT, &rm), ROUTE_OK);
	assert_int_equal(rm.kind, LOCK_KIND_SEMAPHORE);
	assert_int_equal(routes_match("/semaphores/pool/limit", METHOD_GET, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "PUT");
	/* an escaped slash is part of the name, never the limit resource */
	assert_int_equal(routes_match("/semaphores/a%2Flimit", METHOD_PUT, &rm), ROUTE_OK);
	assert_int_equal(rm.op, OP_ACQUIRE);
}

static void test_routes__fixed_paths(void **state)
{
	(void)state;
	expect_route("/healthz", METHOD_GET, OP_HEALTHZ, NULL);
	expect_route("/readyz", METHOD_GET, OP_READYZ, NULL);
	expect_route("/metrics", METHOD_GET, OP_METRICS, NULL);
	expect_route("/locks", METHOD_GET, OP_LIST, NULL);
	expect_route("/", METHOD_GET, OP_INDEX, NULL);	/* the index */
}

static void test_routes__unknown_paths_are_not_found(void **state)
{
	static const char *const paths[] = { "//", "/nope", "/lock", "/locksx/a", "/healthz/",
					     "/Locks/a", "/fairlocks", "/rwlocks", "" };
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
	assert_string_equal(rm.allow, "GET, HEAD, PUT, DELETE");
	assert_int_equal(routes_match("/locks/a/heartbeat", METHOD_GET, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "POST");
	assert_int_equal(routes_match("/healthz", METHOD_OTHER, &rm), ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "GET, HEAD");
	assert_int_equal(routes_match("/locks/a", METHOD_HEAD, &rm), ROUTE_OK);
	assert_int_equal(routes_match("/locks/a/heartbeat", METHOD_HEAD, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
}

static void test_routes__head_is_get_without_body(void **state)
{
	(void)state;
	expect_route("/healthz", METHOD_HEAD, OP_HEALTHZ, NULL);
	expect_route("/readyz", METHOD_HEAD, OP_READYZ, NULL);
	expect_route("/metrics", METHOD_HEAD, OP_METRICS, NULL);
	expect_route("/openapi.yaml", METHOD_HEAD, OP_OPENAPI, NULL);
	expect_route("/locks/a", METHOD_HEAD, OP_STATUS, "a");
	expect_route("/rwlocks/a", METHOD_HEAD, OP_STATUS, "a");
}

/* The path is routed as sent; an escaped slash is part of the name. */
static void test_routes__escaped_slash_is_no_separator(void **state)
{
	struct route_match rm;
	size_t len;
	char *name;

	(void)state;
	assert_int_equal(routes_match("/rwlocks/enc1%2Fwrite", METHOD_PUT, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);	/* the status resource of "enc1/write" */
	assert_int_equal(routes_match("/rwlocks/enc1%2fwrite", METHOD_GET, &rm), ROUTE_OK);
	assert_int_equal(rm.op, OP_STATUS);
	name = routes_name(&rm, &len);
	assert_string_equal(name, "enc1/write");
	assert_int_equal(len, 10);
	free(name);
	assert_int_equal(routes_match("/locks/enc2%2Fheartbeat", METHOD_POST, &rm),
			 ROUTE_METHOD_NOT_ALLOWED);
	expect_route("/locks/enc2%2Fheartbeat", METHOD_GET, OP_STATUS, "enc2%2Fheartbeat");
	expect_route("/locks/a%2Fb/heartbeat", METHOD_POST, OP_HEARTBEAT, "a%2Fb");
	assert_int_equal(routes_match("/%6Cocks/a", METHOD_GET, &rm), ROUTE_NOT_FOUND);
	/* decoding keeps %00 (no NUL can cut the name short) */
	assert_int_equal(routes_match("/locks/caf%C3%A9%00x", METHOD_GET, &rm), ROUTE_OK);
	name = routes_name(&rm, &len);
	assert_string_equal(name, "caf\xc3\xa9%00x");
	assert_int_equal(len, strlen(name));
	free(name);
}

static void test_routes__method_names(void **state)
{
	(void)state;
	assert_int_equal(routes_method("GET"), METHOD_GET);
	assert_int_equal(routes_method("PUT"), METHOD_PUT);
	assert_int_equal(routes_method("POST"), METHOD_POST);
	assert_int_equal(routes_method("DELETE"), METHOD_DELETE);
	assert_int_equal(routes_method("HEAD"), METHOD_HEAD);
	assert_int_equal(routes_method("get"), METHOD_OTHER);
	assert_int_equal(routes_method("PATCH"), METHOD_OTHER);
}

/* Every file of the status page has its route and every /ui route its
 * file (api/ui/ and the table must agree); nothing else is under /ui. */
static void test_routes__ui_files_and_routes_agree(void **state)
{
	struct route_match rm;
	unsigned ui_routes = 0;

	(void)state;
	for (size_t i = 0; i < ui_assets_count; i++)
		expect_route(ui_assets[i].path, METHOD_GET, OP_UI, NULL);
	for (size_t i = 0; i < ARRAY_LEN(routes); i++)
		if (routes[i].ops[METHOD_GET] == OP_UI)
			ui_routes++;
	assert_int_equal(ui_routes, ui_assets_count);
	assert_string_equal(ui_assets[0].path, "/ui");
	assert_int_equal(routes_match("/ui/", METHOD_GET, &rm), ROUTE_NOT_FOUND);
	assert_int_equal(routes_match("/ui/nope.js", METHOD_GET, &rm), ROUTE_NOT_FOUND);
	assert_int_equal(routes_match("/ui", METHOD_PUT, &rm), ROUTE_METHOD_NOT_ALLOWED);
	assert_string_equal(rm.allow, "GET, HEAD");
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
		cmocka_unit_test(test_routes__semaphores),
		cmocka_unit_test(test_routes__head_is_get_without_body),
		cmocka_unit_test(test_routes__escaped_slash_is_no_separator),
		cmocka_unit_test(test_routes__ui_files_and_routes_agree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
