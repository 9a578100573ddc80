/* test_scripts.c -- how a script call goes to Redis (service/lock/scripts.c,
 * included): as FCALL once the library of functions is loaded, else
 * EVALSHA or EVAL; what a refused FUNCTION LOAD or FCALL turns into; and
 * that a call sent again keeps its first deadline. The connection's sends
 * are wrapped (-Wl,--wrap) and recorded; the test answers them. */
#include "unit.h"

#include "service/lock/scripts.c"

/* ----- Mock of the connection: every send recorded, answered later ----- */

struct sent {
	char cmd[32];		/* argv[0], argv[1] ("FUNCTION LOAD") */
	char what[64];		/* argv[1]: a function's name, "LOAD", ... */
	int slot;		/* redis_conn_send_slot's; -1 otherwise */
	int64_t deadline_from;	/* redis_conn_send_from's; -1 otherwise */
	redis_reply_fn fn;
	void *ctx;
	bool done;		/* answered */
};

static struct sent sent[16];
static int nsent;

static void record(int argc, const char **argv, int slot, int64_t from, redis_reply_fn fn,
		   void *ctx)
{
	struct sent *s = &sent[nsent++];

	assert_true(nsent <= 16 && argc >= 2);
	snprintf(s->cmd, sizeof(s->cmd), "%s", argv[0]);
	snprintf(s->what, sizeof(s->what), "%.63s", argv[1]);
	s->slot = slot;
	s->deadline_from = from;
	s->fn = fn;
	s->ctx = ctx;
	s->done = false;
}

void __wrap_redis_conn_send(struct redis_conn *c, int argc, const char **argv,
			    const size_t *lens, bool deadline, redis_reply_fn fn, void *ctx);
void __wrap_redis_conn_send(struct redis_conn *c, int argc, const char **argv,
			    const size_t *lens, bool deadline, redis_reply_fn fn, void *ctx)
{
	(void)c;
	(void)lens;
	(void)deadline;
	record(argc, argv, -1, -1, fn, ctx);
}

void __wrap_redis_conn_send_from(struct redis_conn *c, int argc, const char **argv,
				 const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
				 void *ctx);
void __wrap_redis_conn_send_from(struct redis_conn *c, int argc, const char **argv,
				 const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
				 void *ctx)
{
	(void)c;
	(void)lens;
	record(argc, argv, -1, deadline_from, fn, ctx);
}

void __wrap_redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
				 const size_t *lens, redis_reply_fn fn, void *ctx);
void __wrap_redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
				 const size_t *lens, redis_reply_fn fn, void *ctx)
{
	(void)c;
	(void)lens;
	record(argc, argv, slot, -1, fn, ctx);
}

/* Answer send i with a reply of type and text. */
static void answer(int i, int type, const char *text)
{
	redisReply r = { .type = type, .str = (char *)text, .len = text ? strlen(text) : 0 };

	sent[i].done = true;
	sent[i].fn(sent[i].ctx, &r);
}

/* Was any send from index from on a cmd ("FCALL")? */
static bool sent_from(int from, const char *cmd)
{
	for (int i = from; i < nsent; i++)
		if (!strcmp(sent[i].cmd, cmd))
			return true;
	return false;
}

/* Answer every send still open (and any retry that makes): no call is
 * left allocated. */
static int answer_the_rest(void **state)
{
	(void)state;
	for (int i = 0; i < nsent; i++)
		if (!sent[i].done)
			answer(i, REDIS_REPLY_ERROR, "ERR the test is over");
	return 0;
}

/* ----- The caller ----- */

static int replies;
static char last_reply[128];

static void on_reply(void *ctx, redisReply *r)
{
	(void)ctx;
	replies++;
	snprintf(last_reply, sizeof(last_reply), "%s", r && r->str ? r->str : "");
}

/* One lock_acquire call on key "job" (slot 5458: "job" hashes there). */
static void call(void)
{
	const char *keys[] = { "job" }, *args[] = { "30000" };

	scripts_run(NULL, SCRIPT_LOCK_ACQUIRE, 1, keys, 1, args, on_reply, NULL);
}

/* A fresh start: the calls still open answered (freed), nothing sent,
 * nothing known of Redis. */
static int reset(void **state)
{
	answer_the_rest(state);
	nsent = 0;
	replies = 0;
	fn_state = FN_UNTRIED;
	fn_retry_ms = 0;
	fn_refusal_logged = false;
	atomic_store(&fn_on_trust, false);
	memset(scripts, 0, sizeof(scripts));
	return 0;
}

/* The first call loads the library (on its key's node) and goes as EVAL;
 * once the library is there, calls go as FCALL of the script's function. */
static void test_first_call_loads_the_library_then_calls_go_as_fcall(void **state)
{
	(void)state;
	call();
	assert_int_equal(nsent, 3);
	assert_string_equal(sent[0].cmd, "FUNCTION");
	assert_string_equal(sent[0].what, "LOAD");
	assert_int_equal(sent[0].slot, (int)cluster_key_slot("job", 3));
	assert_string_equal(sent[1].cmd, "SCRIPT");
	assert_string_equal(sent[2].cmd, "EVAL");
	answer(0, REDIS_REPLY_STRING, lua_library_name);
	answer(2, REDIS_REPLY_ARRAY, NULL);
	assert_int_equal(replies, 1);

	call();
	assert_int_equal(nsent, 4);
	assert_string_equal(sent[3].cmd, "FCALL");
	assert_string_equal(sent[3].what, lua_sources[SCRIPT_LOCK_ACQUIRE].function);
	assert_non_null(strstr(sent[3].what, lua_library_name));
	answer(3, REDIS_REPLY_ARRAY, NULL);
	assert_int_equal(replies, 2);
}

/* The library's name "already exists" (another dlockd of the build
 * loaded it) is loaded; a function of another library under one of its
 * functions' names is not. */
static void test_a_library_already_there_is_used(void **state)
{
	char exists[128];

	(void)state;
	snprintf(exists, sizeof(exists), "ERR Library '%s' already exists", lua_library_name);
	call();
	answer(0, REDIS_REPLY_ERROR, exists);
	call();
	assert_string_equal(sent[nsent - 1].cmd, "FCALL");

	reset(state);
	call();
	answer(0, REDIS_REPLY_ERROR, "ERR Function dlockd_x_lock_acquire already exists");
	assert_int_equal(fn_state, FN_UNTRIED);
	assert_true(fn_retry_ms >= now_ms() + FN_REFUSED_RETRY_MS - 1000);
	call();
	assert_string_not_equal(sent[nsent - 1].cmd, "FCALL");
}

/* After a "Function not found", the LOAD that says the library exists
 * (another dlockd reloaded it meanwhile) is trusted once: if the next
 * FCALL finds no function either, the library has dlockd's name and not
 * its functions, and calls go as EVALSHA for a minute, not as an FCALL,
 * a LOAD and an EVAL each. An FCALL that runs ends the doubt. */
static void test_a_library_named_as_dlockds_without_its_functions_is_not_used(void **state)
{
	char exists[128];

	(void)state;
	snprintf(exists, sizeof(exists), "ERR Library '%s' already exists", lua_library_name);
	for (int ran = 0; ran < 2; ran++) {
		reset(state);
		fn_state = FN_READY;
		call();
		answer(0, REDIS_REPLY_ERROR, "ERR Function not found");
		assert_string_equal(sent[1].cmd, "FUNCTION");
		answer(1, REDIS_REPLY_ERROR, exists);
		assert_int_equal(fn_state, FN_READY);	/* on trust */
		answer(2, REDIS_REPLY_ARRAY, NULL);
		if (ran) {	/* an FCALL runs: the library has its functions */
			call();
			assert_string_equal(sent[3].cmd, "FCALL");
			answer(3, REDIS_REPLY_ARRAY, NULL);
		}
		call();
		assert_string_equal(sent[nsent - 1].cmd, "FCALL");
		answer(nsent - 1, REDIS_REPLY_ERROR, "ERR Function not found");
		if (ran) {	/* a reload, as after any FUNCTION FLUSH */
			assert_string_equal(sent[nsent - 2].cmd, "FUNCTION");
			continue;
		}
		assert_int_equal(fn_state, FN_UNTRIED);
		assert_true(fn_retry_ms >= now_ms() + FN_REFUSED_RETRY_MS - 1000);
		assert_string_equal(sent[nsent - 1].cmd, "EVAL");
		int n0 = nsent;

		call();
		assert_false(sent_from(n0, "FCALL") || sent_from(n0, "FUNCTION"));
	}
}

/* An FCALL answered "Function not found" (FUNCTION FLUSH, a restart) is
 * not the caller's answer: the call goes again as EVAL, with its first
 * deadline, after a FUNCTION LOAD to its node. */
static void test_function_not_found_is_sent_again_with_its_deadline(void **state)
{
	int64_t from;

	(void)state;
	fn_state = FN_READY;
	call();
	assert_int_equal(nsent, 1);
	assert_string_equal(sent[0].cmd, "FCALL");
	from = sent[0].deadline_from;
	answer(0, REDIS_REPLY_ERROR, "ERR Function not found");
	assert_int_equal(replies, 0);
	assert_int_equal(nsent, 3);
	assert_string_equal(sent[1].cmd, "FUNCTION");
	assert_int_equal(sent[1].slot, (int)cluster_key_slot("job", 3));
	assert_string_equal(sent[2].cmd, "EVAL");
	assert_true(sent[2].deadline_from == from);
	answer(2, REDIS_REPLY_ERROR, "DLOCKD_LATE the call reached redis after its deadline");
	assert_int_equal(replies, 1);
	assert_non_null(strstr(last_reply, "DLOCKD_LATE"));
	/* not sent a third time, whatever the retry's answer */
	assert_int_equal(nsent, 3);
}

/* A user refused FCALL: the call goes again as EVAL (nothing ran), and
 * the calls of the next minute go as EVALSHA/EVAL, loading nothing. */
static void test_fcall_refused_falls_back_for_a_minute(void **state)
{
	(void)state;
	fn_state = FN_READY;
	call();
	answer(0, REDIS_REPLY_ERROR,
	       "NOPERM this user has no permissions to run the 'fcall' command");
	assert_int_equal(nsent, 2);
	assert_string_equal(sent[1].cmd, "EVAL");
	answer(1, REDIS_REPLY_ARRAY, NULL);
	assert_int_equal(replies, 1);
	call();
	assert_false(sent_from(2, "FCALL") || sent_from(2, "FUNCTION"));
	assert_true(fn_retry_ms >= now_ms() + FN_REFUSED_RETRY_MS - 1000);
}

/* An error raised inside the function is the caller's answer: not sent
 * again, the library state unchanged. */
static void test_an_error_inside_the_function_is_the_answer(void **state)
{
	(void)state;
	fn_state = FN_READY;
	call();
	answer(0, REDIS_REPLY_ERROR,
	       "NOPERM this user has no permissions to access the 'job' key script: x");
	assert_int_equal(replies, 1);
	assert_int_equal(nsent, 1);
	assert_int_equal(fn_state, FN_READY);
}

/* FUNCTION LOAD refused for good (a Redis before 7.0, NOPERM): EVALSHA,
 * and no FUNCTION LOAD again for a minute; refused for now (BUSY, OOM,
 * no reply): tried again a second later. */
static void test_a_refused_load_is_asked_again_later(void **state)
{
	static const struct {
		const char *error;	/* NULL: no reply */
		int64_t wait_ms;
	} cases[] = {
		{ "ERR unknown command 'FUNCTION', with args beginning with: 'LOAD' ",
		  FN_REFUSED_RETRY_MS },
		{ "NOPERM this user has no permissions to run the 'function|load' command",
		  FN_REFUSED_RETRY_MS },
		{ "OOM command not allowed when used memory > 'maxmemory'.", FN_ERROR_RETRY_MS },
		{ NULL, FN_ERROR_RETRY_MS },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t t0 = now_ms();

		reset(state);
		call();
		if (cases[i].error) {
			answer(0, REDIS_REPLY_ERROR, cases[i].error);
		} else {
			sent[0].done = true;
			sent[0].fn(sent[0].ctx, NULL);
		}
		assert_int_equal(fn_state, FN_UNTRIED);
		assert_true(fn_retry_ms >= t0 + cases[i].wait_ms &&
			    fn_retry_ms <= now_ms() + cases[i].wait_ms);
		call();		/* within the wait: no FUNCTION LOAD, no FCALL */
		assert_false(sent_from(3, "FUNCTION") || sent_from(3, "FCALL"));
		fn_retry_ms = 0;	/* the wait over */
		call();
		assert_string_equal(sent[nsent - 3].cmd, "FUNCTION");
		answer_the_rest(state);
	}
}

int main(void)
{
#define TEST(t) cmocka_unit_test_setup_teardown(t, reset, answer_the_rest)
	const struct CMUnitTest tests[] = {
		TEST(test_first_call_loads_the_library_then_calls_go_as_fcall),
		TEST(test_a_library_already_there_is_used),
		TEST(test_a_library_named_as_dlockds_without_its_functions_is_not_used),
		TEST(test_function_not_found_is_sent_again_with_its_deadline),
		TEST(test_fcall_refused_falls_back_for_a_minute),
		TEST(test_an_error_inside_the_function_is_the_answer),
		TEST(test_a_refused_load_is_asked_again_later),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
