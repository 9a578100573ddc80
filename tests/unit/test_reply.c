/* test_reply.c -- reply_fields writes what reply_json would: the same
 * object, compact, a newline after it, in the fields' order, with strings
 * that need escaping escaped. MHD's response calls are wrapped
 * (-Wl,--wrap) so the body queued is caught without a connection. */
#include "unit.h"

#include "api/reply.c"

#include <limits.h>

/* ----- Mocks: the body and status queued ----- */

static char body[1024];
static size_t body_len;
static unsigned queued_status;

struct MHD_Response *__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
							    enum MHD_ResponseMemoryMode mode);
struct MHD_Response *__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
							    enum MHD_ResponseMemoryMode mode)
{
	assert_int_equal(mode, MHD_RESPMEM_MUST_FREE);
	assert_true(size < sizeof(body));
	memcpy(body, buffer, size);
	body[size] = '\0';
	body_len = size;
	free(buffer);
	return (struct MHD_Response *)&body;	/* any non-NULL: never looked into */
}

enum MHD_Result __wrap_MHD_add_response_header(struct MHD_Response *r, const char *h,
					       const char *v);
enum MHD_Result __wrap_MHD_add_response_header(struct MHD_Response *r, const char *h,
					       const char *v)
{
	(void)r;
	(void)h;
	(void)v;
	return MHD_YES;
}

enum MHD_Result __wrap_MHD_queue_response(struct MHD_Connection *c, unsigned int status,
					  struct MHD_Response *r);
enum MHD_Result __wrap_MHD_queue_response(struct MHD_Connection *c, unsigned int status,
					  struct MHD_Response *r)
{
	(void)c;
	(void)r;
	queued_status = status;
	return MHD_YES;
}

void __wrap_MHD_destroy_response(struct MHD_Response *r);
void __wrap_MHD_destroy_response(struct MHD_Response *r)
{
	(void)r;
}

/* What reply_json queues for o (stolen), kept in json_body. */
static char json_body[1024];

static void via_json(json_t *o)
{
	struct request rq = { 0 };

	assert_non_null(o);
	assert_int_equal(reply_json(&rq, 200, o), MHD_YES);
	memcpy(json_body, body, body_len + 1);
}

static void test_reply__fields_are_what_jansson_writes(void **state)
{
	struct request rq = { 0 };
	const struct reply_field f[] = {
		RF_STR("name", "orders:2024-01.a_b"), RF_STR("owner", "worker-1"),
		RF_INT("fencing_token", 9007199254740993LL), RF_INT("ttl_ms", 0),
		RF_INT("holds", -12), RF_BOOL("released", true), RF_BOOL("locked", false),
	};

	(void)state;
	via_json(json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:b}", "name", "orders:2024-01.a_b",
			   "owner", "worker-1", "fencing_token", (json_int_t)9007199254740993LL,
			   "ttl_ms", (json_int_t)0, "holds", (json_int_t)-12, "released", 1,
			   "locked", 0));
	assert_int_equal(reply_fields(&rq, 200, f, ARRAY_SIZE(f)), MHD_YES);
	assert_string_equal(body, json_body);
	assert_int_equal(queued_status, 200);
	assert_int_equal(rq.status, 200);
	assert_string_equal(body, "{\"name\":\"orders:2024-01.a_b\",\"owner\":\"worker-1\","
			    "\"fencing_token\":9007199254740993,\"ttl_ms\":0,\"holds\":-12,"
			    "\"released\":true,\"locked\":false}\n");
}

static void test_reply__the_extremes_of_an_integer(void **state)
{
	struct request rq = { 0 };
	const struct reply_field f[] = {
		RF_INT("min", LLONG_MIN), RF_INT("max", LLONG_MAX),
	};

	(void)state;
	via_json(json_pack("{s:I, s:I}", "min", (json_int_t)LLONG_MIN, "max",
			   (json_int_t)LLONG_MAX));
	reply_fields(&rq, 200, f, ARRAY_SIZE(f));
	assert_string_equal(body, json_body);
}

/* No name or owner that passes params.c needs escaping, but nothing
 * reply_fields is given can break the JSON: it parses back to itself. */
static void test_reply__strings_are_escaped(void **state)
{
	static const char nasty[] = "q\"b\\s/\n\t\x01\x1f\x7f caf\xc3\xa9";
	struct request rq = { 0 };
	json_t *back;

	(void)state;
	reply_fields(&rq, 409, &RF_STR(nasty, nasty), 1);
	assert_int_equal(queued_status, 409);
	back = json_loads(body, 0, NULL);
	assert_non_null(back);
	assert_string_equal(json_string_value(json_object_get(back, nasty)), nasty);
	assert_int_equal(json_object_size(back), 1);
	json_decref(back);
	assert_non_null(strstr(body, "\\u0001\\u001f"));
}

static void test_reply__no_fields_is_an_empty_object(void **state)
{
	struct request rq = { 0 };

	(void)state;
	reply_fields(&rq, 200, NULL, 0);
	assert_string_equal(body, "{}\n");
}

#define T(name) cmocka_unit_test(test_reply__##name)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(fields_are_what_jansson_writes),
		T(the_extremes_of_an_integer),
		T(strings_are_escaped),
		T(no_fields_is_an_empty_object),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
