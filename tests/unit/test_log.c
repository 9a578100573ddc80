/* test_log.c -- log lines stay whole and honest whatever a client sent:
 * each JSON line parses (control characters escaped, UTF-8 kept as it is,
 * invalid bytes replaced, long fields cut at a character boundary with a
 * marker), and a text line is one line. */
#include "unit.h"

#include "service/base/log.c"

#include <jansson.h>
#include <limits.h>

/* Run fn with the log going to a temporary file; return what it wrote. */
static char *capture(void (*fn)(void))
{
	FILE *f = tmpfile();
	static char out[65536];
	size_t n;

	assert_non_null(f);
	log_fd = fileno(f);
	fn();
	log_fd = STDERR_FILENO;
	rewind(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	return out;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static json_t *only_json_line(const char *out)
{
	json_error_t err;
	json_t *j;

	assert_int_equal(count_lines(out), 1);
	j = json_loads(out, 0, &err);
	if (!j)
		fail_msg("not JSON (%s): %s", err.text, out);
	return j;
}

static const char *field(json_t *j, const char *key)
{
	json_t *v = json_object_get(j, key);

	assert_true(json_is_string(v));
	return json_string_value(v);
}

static char long_path[6000];

static void access_nasty(void)
{
	log_access(&(struct log_access){
		.method = "PUT", .path = "/locks/a\nb\"c\\d\x01\x7f", .status = 400,
		.kind = "lock", .lock = "caf\xc3\xa9", .owner = "o\r\tx", .delivered = 1 });
}

static void access_invalid_utf8(void)
{
	/* a lone continuation byte, an overlong '/', a surrogate, a cut 3-byte char */
	log_access(&(struct log_access){
		.method = "GET", .path = "/x\x80y\xc0\xafz\xed\xa0\x80w\xe2\x82", .status = 404,
		.delivered = 1 });
}

static void access_long(void)
{
	log_access(&(struct log_access){
		.method = "GET", .path = long_path, .status = 404, .delivered = 1 });
}

static void access_forced(void)
{
	log_access(&(struct log_access){
		.method = "DELETE", .path = "/locks/job", .status = 200, .kind = "lock",
		.lock = "job", .force = 1, .principal = "ops team", .peer = "[::1]:5555",
		.delivered = 1 });
}

static void access_refused(void)
{
	log_access(&(struct log_access){
		.method = "DELETE", .path = "/locks/job", .status = 409, .kind = "lock",
		.lock = "job", .owner = "w1", .error = "not_owner", .delivered = 1 });
}

static void msg_forged(void)
{
	log_warn("name '%s'", "x\n{\"level\":\"error\",\"msg\":\"forged\"}");
}

static void test_log__json_escapes_controls_and_keeps_utf8(void **state)
{
	json_t *j;

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	j = only_json_line(capture(access_nasty));
	assert_string_equal(field(j, "path"), "/locks/a\nb\"c\\d\x01\x7f");
	assert_string_equal(field(j, "lock"), "caf\xc3\xa9");	/* é as UTF-8, not Latin-1 */
	assert_string_equal(field(j, "owner"), "o\r\tx");
	json_decref(j);
}

static void test_log__json_replaces_invalid_utf8(void **state)
{
	json_t *j;

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	j = only_json_line(capture(access_invalid_utf8));
	assert_string_equal(field(j, "path"),
			    "/x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbdz"
			    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdw\xef\xbf\xbd\xef\xbf\xbd");
	json_decref(j);
}

static void test_log__long_field_is_cut_whole(void **state)
{
	const char *p;
	json_t *j;

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	/* "é" repeated: a cut in the middle of a character would be invalid */
	long_path[0] = '/';
	for (size_t i = 1; i + 2 < sizeof(long_path); i += 2) {
		long_path[i] = '\xc3';
		long_path[i + 1] = '\xa9';
	}
	long_path[sizeof(long_path) - 2] = '\0';
	j = only_json_line(capture(access_long));
	p = field(j, "path");
	assert_true(strlen(p) <= FIELD_MAX_BYTES + 32);
	assert_non_null(strstr(p, "\xe2\x80\xa6[+"));		/* the marker */
	assert_memory_equal(p, "/\xc3\xa9\xc3\xa9", 5);
	json_decref(j);
}

static void test_log__message_cannot_forge_a_line(void **state)
{
	json_t *j;

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	j = only_json_line(capture(msg_forged));
	assert_string_equal(field(j, "level"), "warn");
	assert_non_null(strstr(field(j, "msg"), "\n{"));
	json_decref(j);
}

static void test_log__text_line_is_one_line(void **state)
{
	const char *out;

	(void)state;
	log_set_format(LOG_FORMAT_TEXT);
	out = capture(access_nasty);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, " PUT /locks/a\\nb\"c\\\\d\\x01\\x7f 400 "));
	assert_non_null(strstr(out, " lock=caf\xc3\xa9 owner=o\\r\\tx"));
	out = capture(msg_forged);
	assert_int_equal(count_lines(out), 1);
	out = capture(access_invalid_utf8);
	assert_non_null(strstr(out, " /x\\x80y\\xc0\\xafz"));
	out = capture(access_long);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "...[+"));
	log_set_format(LOG_FORMAT_JSON);
}

static void test_log__forced_release_and_error_code(void **state)
{
	const char *out;
	json_t *j;

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	j = only_json_line(capture(access_forced));
	assert_true(json_is_true(json_object_get(j, "force")));
	assert_string_equal(field(j, "principal"), "ops team");
	assert_string_equal(field(j, "peer"), "[::1]:5555");
	assert_null(json_object_get(j, "error"));
	json_decref(j);
	j = only_json_line(capture(access_refused));
	assert_string_equal(field(j, "error"), "not_owner");
	assert_null(json_object_get(j, "force"));
	assert_null(json_object_get(j, "peer"));
	json_decref(j);

	log_set_format(LOG_FORMAT_TEXT);
	out = capture(access_forced);
	assert_non_null(strstr(out, " lock=job principal=ops\\x20team peer=[::1]:5555 force\n"));
	out = capture(access_refused);
	assert_non_null(strstr(out, " lock=job owner=w1 error=not_owner\n"));
	log_set_format(LOG_FORMAT_JSON);
}

/* The access line's numbers and time are written without printf (the hot
 * path); they must read exactly as printf wrote them. */
static double cheap_duration;
static long long cheap_num;

static void access_timed(void)
{
	log_access(&(struct log_access){
		.method = "PUT", .path = "/locks/a", .status = 200,
		.duration_ms = cheap_duration, .delivered = 1 });
}

static void fields_num(void)
{
	log_fields(LOG_INFO, "m", &(struct log_field){ .key = "n", .num = cheap_num }, 1);
}

static void test_log__cheap_formatter_matches_printf(void **state)
{
	static const long long us[] = { 0, 1, 9, 10, 999, 1000, 1234, 60000, 123456789, 999999999999LL };
	static const long long nums[] = { 0, 7, -1, 1795729918563847LL, LLONG_MAX, LLONG_MIN };
	char want[64], *out;
	const char *p;

	(void)state;
	for (size_t i = 0; i < sizeof(us) / sizeof(us[0]); i++) {
		cheap_duration = (double)us[i] / 1000.0;	/* as server.c computes it */
		snprintf(want, sizeof(want), ",\"duration_ms\":%.3f", cheap_duration);
		log_set_format(LOG_FORMAT_JSON);
		out = capture(access_timed);
		if (!strstr(out, want))
			fail_msg("want %s in %s", want, out);
		assert_non_null(strstr(out, ",\"status\":200,"));
		json_decref(only_json_line(out));
		snprintf(want, sizeof(want), " 200 %.3fms", cheap_duration);
		log_set_format(LOG_FORMAT_TEXT);
		out = capture(access_timed);
		log_set_format(LOG_FORMAT_JSON);
		if (!strstr(out, want))
			fail_msg("want %s in %s", want, out);
		/* "YYYY-MM-DDTHH:MM:SS.mmmZ info  PUT ..." */
		assert_int_equal(strlen(out) > 30, 1);
		assert_int_equal(out[4], '-');
		assert_int_equal(out[10], 'T');
		assert_int_equal(out[19], '.');
		assert_int_equal(out[23], 'Z');
		assert_memory_equal(out + 24, " info  PUT ", 11);
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		cheap_num = nums[i];
		snprintf(want, sizeof(want), ",\"n\":%lld}", cheap_num);
		out = capture(fields_num);
		if (!strstr(out, want))
			fail_msg("want %s in %s", want, out);
		p = strstr(out, "\"ts\":\"");
		assert_non_null(p);
		assert_int_equal(p[29], 'Z');
		assert_int_equal(p[30], '"');
	}
}

static void test_log__utf8_len(void **state)
{
	(void)state;
	assert_int_equal(log_utf8_len((const unsigned char *)"a", 1), 1);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xc3\xa9", 1), 0);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xe2\x82\xac", 3), 3);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xf0\x9f\x94\x92", 4), 4);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xc1\xbf", 2), 0);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xe0\x80\xaf", 3), 0);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xed\xb0\x80", 3), 0);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
	assert_int_equal(log_utf8_len((const unsigned char *)"\xbf", 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log__json_escapes_controls_and_keeps_utf8),
		cmocka_unit_test(test_log__json_replaces_invalid_utf8),
		cmocka_unit_test(test_log__long_field_is_cut_whole),
		cmocka_unit_test(test_log__message_cannot_forge_a_line),
		cmocka_unit_test(test_log__text_line_is_one_line),
		cmocka_unit_test(test_log__forced_release_and_error_code),
		cmocka_unit_test(test_log__utf8_len),
		cmocka_unit_test(test_log__cheap_formatter_matches_printf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
