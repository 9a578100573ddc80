/* test_params.c -- name and owner validation, and parameter parsing from
 * the query string or a JSON body. MHD's query iterator and the error reply
 * are wrapped (-Wl,--wrap) so no connection is needed. */
#include "unit.h"

#include "api/params.c"

/* ----- Mocks ----- */

static const char *const *fake_query;	/* key, value, key, value, ..., NULL */
static enum api_error last_error;
static char last_message[512];
static int errors_replied;

int __wrap_MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind kind,
				     MHD_KeyValueIterator it, void *cls);
int __wrap_MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind kind,
				     MHD_KeyValueIterator it, void *cls)
{
	int n = 0;

	(void)c;
	assert_int_equal(kind, MHD_GET_ARGUMENT_KIND);
	for (const char *const *q = fake_query; q && *q; q += 2) {
		n++;
		if (it(cls, kind, q[0], q[1]) != MHD_YES)
			break;
	}
	return n;
}

enum MHD_Result __wrap_reply_error(struct request *rq, enum api_error err, json_t *extra,
				   const char *fmt, ...);
enum MHD_Result __wrap_reply_error(struct request *rq, enum api_error err, json_t *extra,
				   const char *fmt, ...)
{
	va_list ap;

	(void)rq;
	if (extra)
		json_decref(extra);
	last_error = err;
	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	errors_replied++;
	return MHD_YES;
}

static struct config cfg = { .max_ttl_ms = 86400000, .max_wait_ms = 300000 };

/* Parse with the query q and body (NULL: none); returns the result. */
static int parse(struct request *rq, const char *const *q, const char *body, unsigned allowed)
{
	memset(rq, 0, sizeof(*rq));
	rq->cfg = &cfg;
	rq->body = (char *)body;
	rq->body_len = body ? strlen(body) : 0;
	fake_query = q;
	errors_replied = 0;
	last_message[0] = '\0';
	return params_or_reply(rq, allowed);
}

#define ALL (P_OWNER | P_TTL | P_WAIT)

/* ----- Validators ----- */

static void test_params__names_take_the_documented_charset(void **state)
{
	char why[256], name[202];

	(void)state;
	assert_int_equal(params_check_name("a", 1, why, sizeof(why)), 0);
	assert_int_equal(params_check_name("Job.1_x:y-Z", 11, why, sizeof(why)), 0);
	memset(name, 'n', 200);
	assert_int_equal(params_check_name(name, 200, why, sizeof(why)), 0);
	assert_int_equal(params_check_name(name, 201, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "1 to 200"));
	assert_int_equal(params_check_name("", 0, why, sizeof(why)), -1);
	assert_int_equal(params_check_name("a b", 3, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "'a b'"));
	assert_int_equal(params_check_name("{a}", 3, why, sizeof(why)), -1);
	assert_int_equal(params_check_name("a/b", 3, why, sizeof(why)), -1);
	assert_int_equal(params_check_name("caf\xc3\xa9", 5, why, sizeof(why)), -1);
	assert_int_equal(params_check_name("a\0b", 3, why, sizeof(why)), -1);
}

static void test_params__owners_may_not_end_in_write(void **state)
{
	char why[256], owner[130];

	(void)state;
	assert_int_equal(params_check_owner("9c345276-aa6e-44c1-b478-bf4b14ba1498:805", 40, why,
					     sizeof(why)), 0);
	assert_int_equal(params_check_owner("a:write", 7, why, sizeof(why)), -1);
	assert_non_null(strstr(why, ":write"));
	assert_int_equal(params_check_owner("writer", 6, why, sizeof(why)), 0);
	/* "mode" marks a read-write lock hash: an owner of that name collides */
	assert_int_equal(params_check_owner("mode", 4, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "'mode' is reserved"));
	assert_int_equal(params_check_owner("modes", 5, why, sizeof(why)), 0);
	assert_int_equal(params_check_owner("Mode", 4, why, sizeof(why)), 0);
	assert_int_equal(params_check_owner("a:rwlock_timeout:1", 18, why, sizeof(why)), 0);
	memset(owner, 'o', 129);
	assert_int_equal(params_check_owner(owner, 128, why, sizeof(why)), 0);
	assert_int_equal(params_check_owner(owner, 129, why, sizeof(why)), -1);
}

/* ----- Query string ----- */

static void test_params__query_parameters_are_parsed(void **state)
{
	static const char *const q[] = { "owner", "w1", "ttl_ms", "5000", "wait_ms", "0", NULL };
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, q, NULL, ALL), 0);
	assert_int_equal(errors_replied, 0);
	assert_string_equal(rq.lock.params.owner, "w1");
	assert_int_equal(rq.lock.params.ttl_ms, 5000);
	assert_int_equal(rq.lock.params.wait_ms, 0);
	assert_int_equal(rq.lock.params.given, ALL);
}

static void test_params__bad_query_numbers_are_refused(void **state)
{
	static const char *const bad[][3] = {
		{ "ttl_ms", "0", "out of range 1..86400000" },
		{ "ttl_ms", "86400001", "out of range" },
		{ "ttl_ms", "-1", "out of range" },
		{ "ttl_ms", "1.5", "not an integer" },
		{ "ttl_ms", "", "not an integer" },
		{ "ttl_ms", " 5", "not an integer" },
		{ "ttl_ms", "+5", "not an integer" },
		{ "ttl_ms", "5x", "not an integer" },
		{ "ttl_ms", "99999999999999999999", "out of range" },
		{ "wait_ms", "300001", "out of range 0..300000" },
	};
	struct request rq;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *q[] = { bad[i][0], bad[i][1], NULL };

		assert_int_equal(parse(&rq, q, NULL, ALL), -1);
		assert_int_equal(last_error, ERR_INVALID_ARGUMENT);
		if (!strstr(last_message, bad[i][2]))
			fail_msg("%s=%s: message '%s' lacks '%s'", bad[i][0], bad[i][1],
				 last_message, bad[i][2]);
	}
}

static void test_params__unknown_twice_and_not_taken_parameters(void **state)
{
	static const char *const unknown[] = { "color", "red", NULL };
	static const char *const twice[] = { "owner", "a", "owner", "b", NULL };
	static const char *const not_here[] = { "owner", "a", "ttl_ms", "5", NULL };
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, unknown, NULL, ALL), -1);
	assert_non_null(strstr(last_message, "unknown parameter 'color'"));
	assert_non_null(strstr(last_message, "owner, ttl_ms, wait_ms"));
	assert_int_equal(parse(&rq, twice, NULL, ALL), -1);
	assert_non_null(strstr(last_message, "given twice"));
	assert_int_equal(parse(&rq, not_here, NULL, P_OWNER | P_FORCE), -1);
	assert_non_null(strstr(last_message, "'ttl_ms'"));
}

static void test_params__force_takes_true_or_false(void **state)
{
	static const char *const yes[] = { "force", "true", NULL };
	static const char *const no[] = { "force", "0", NULL };
	static const char *const bad[] = { "force", "yes", NULL };
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, yes, NULL, P_OWNER | P_FORCE), 0);
	assert_true(rq.lock.params.force);
	assert_int_equal(parse(&rq, no, NULL, P_OWNER | P_FORCE), 0);
	assert_false(rq.lock.params.force);
	assert_int_equal(parse(&rq, bad, NULL, P_OWNER | P_FORCE), -1);
}

/* reentrant, like force: true/1 or false/0 in the query, a boolean in a
 * body; anything else is a 400 invalid_argument naming it. */
static void test_params__reentrant_takes_true_or_false(void **state)
{
	static const char *const yes[] = { "reentrant", "1", NULL };
	static const char *const no[] = { "reentrant", "false", NULL };
	static const char *const bad[] = { "reentrant", "TRUE", NULL };
	const unsigned acquire = ALL | P_REENTRANT;
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, yes, NULL, acquire), 0);
	assert_true(rq.lock.params.reentrant);
	assert_int_equal(parse(&rq, no, NULL, acquire), 0);
	assert_false(rq.lock.params.reentrant);
	assert_int_equal(parse(&rq, bad, NULL, acquire), -1);
	assert_int_equal(last_error, ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(last_message, "reentrant 'TRUE' is not true or false"));
	assert_int_equal(parse(&rq, NULL, "{\"reentrant\":true}", acquire), 0);
	assert_true(rq.lock.params.reentrant);
	assert_int_equal(parse(&rq, NULL, "{\"reentrant\":\"true\"}", acquire), -1);
	assert_int_equal(last_error, ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(last_message, "reentrant must be true or false"));
	assert_int_equal(parse(&rq, yes, NULL, P_OWNER | P_FORCE), -1);	/* PUT only */
	assert_non_null(strstr(last_message, "unknown parameter 'reentrant'"));
}

/* index (GET): 0..2^53 - 1 in the query or a body, an integer. */
static void test_params__index_is_an_integer_below_2_to_the_53(void **state)
{
	static const char *const top[] = { "index", "9007199254740991", "wait_ms", "10", NULL };
	static const char *const over[] = { "index", "9007199254740992", NULL };
	static const char *const neg[] = { "index", "-1", NULL };
	const unsigned get = P_OWNER | P_WAIT | P_INDEX;
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, top, NULL, get), 0);
	assert_int_equal(rq.lock.params.index, 9007199254740991LL);
	assert_int_equal(rq.lock.params.wait_ms, 10);
	assert_true(rq.lock.params.given & P_INDEX);
	assert_int_equal(parse(&rq, over, NULL, get), -1);
	assert_int_equal(last_error, ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(last_message, "index '9007199254740992' is out of range "
				"0..9007199254740991"));
	assert_int_equal(parse(&rq, neg, NULL, get), -1);
	assert_int_equal(parse(&rq, NULL, "{\"index\":0}", get), 0);
	assert_true(rq.lock.params.given & P_INDEX);
	assert_int_equal(parse(&rq, NULL, "{\"index\":\"5\"}", get), -1);
	assert_non_null(strstr(last_message, "index must be an integer"));
	assert_null(strstr(last_message, "milliseconds"));
	assert_int_equal(parse(&rq, top, NULL, ALL), -1);	/* GET only */
	assert_non_null(strstr(last_message, "unknown parameter 'index'"));
}

/* ----- JSON body ----- */

static void test_params__json_body_is_parsed(void **state)
{
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, NULL, "{\"owner\":\"w\",\"ttl_ms\":100,\"wait_ms\":5}", ALL), 0);
	assert_string_equal(rq.lock.params.owner, "w");
	assert_int_equal(rq.lock.params.ttl_ms, 100);
	assert_int_equal(rq.lock.params.wait_ms, 5);
	assert_int_equal(parse(&rq, NULL, "{}", ALL), 0);
	assert_int_equal(rq.lock.params.given, 0);
}

static void test_params__bad_json_bodies_are_refused(void **state)
{
	static const struct {
		const char *body;
		enum api_error err;
	} bad[] = {
		{ "{", ERR_INVALID_JSON },
		{ "[]", ERR_INVALID_JSON },
		{ "5", ERR_INVALID_JSON },
		{ "{\"owner\":\"a\",\"owner\":\"b\"}", ERR_INVALID_JSON },
		{ "{\"owner\":\"a\"} trailing", ERR_INVALID_JSON },
		{ "{\"ttl_ms\":\"5\"}", ERR_INVALID_ARGUMENT },
		{ "{\"ttl_ms\":5.0}", ERR_INVALID_ARGUMENT },
		{ "{\"ttl_ms\":0}", ERR_INVALID_ARGUMENT },
		{ "{\"wait_ms\":-1}", ERR_INVALID_ARGUMENT },
		{ "{\"owner\":null}", ERR_INVALID_ARGUMENT },
		{ "{\"owner\":\"x:write\"}", ERR_INVALID_ARGUMENT },
		{ "{\"owner\":\"mode\"}", ERR_INVALID_ARGUMENT },
		{ "{\"owner\":\"a\\u0000b\"}", ERR_INVALID_JSON },
		{ "{\"force\":true}", ERR_INVALID_ARGUMENT },	/* not taken by acquire */
	};
	struct request rq;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(&rq, NULL, bad[i].body, ALL) != -1 || last_error != bad[i].err)
			fail_msg("body %s: want error %d, got %d (%s)", bad[i].body, bad[i].err,
				 last_error, last_message);
		assert_int_equal(errors_replied, 1);
	}
}

static void test_params__body_and_query_together_are_refused(void **state)
{
	static const char *const q[] = { "owner", "a", NULL };
	struct request rq;

	(void)state;
	assert_int_equal(parse(&rq, q, "{\"ttl_ms\":5}", ALL), -1);
	assert_int_equal(last_error, ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(last_message, "not both"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_params__names_take_the_documented_charset),
		cmocka_unit_test(test_params__owners_may_not_end_in_write),
		cmocka_unit_test(test_params__query_parameters_are_parsed),
		cmocka_unit_test(test_params__bad_query_numbers_are_refused),
		cmocka_unit_test(test_params__unknown_twice_and_not_taken_parameters),
		cmocka_unit_test(test_params__force_takes_true_or_false),
		cmocka_unit_test(test_params__reentrant_takes_true_or_false),
		cmocka_unit_test(test_params__index_is_an_integer_below_2_to_the_53),
		cmocka_unit_test(test_params__json_body_is_parsed),
		cmocka_unit_test(test_params__bad_json_bodies_are_refused),
		cmocka_unit_test(test_params__body_and_query_together_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
