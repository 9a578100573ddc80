/* test_locks.c -- the lock table: Redisson's key and channel names (hash
 * tags included) and the decoding of script replies into domain results;
 * the listing's paging over SCAN (service/lock/listing.c, included too).
 * scripts_run() and redis_conn_send() are wrapped (-Wl,--wrap) to check
 * the KEYS and ARGV a call passes and to hand a canned reply to its
 * callback at once. */
#include "unit.h"

#include "service/lock/locks.c"
#include "service/lock/listing.c"

/* ----- Mock of scripts_run ----- */

static redisReply *canned;		/* handed back, then freed by the caller */
static redisReply *canned_next[4];	/* the next calls' replies, in turn */
static int ncanned_next;
static enum script_id last_id;
static char last_keys[8][300];
static char last_args[8][300];
static int last_nkeys, last_nargs;

void __wrap_scripts_run(struct redis_conn *c, enum script_id id, int nkeys,
			const char *const *keys, int nargs, const char *const *args,
			redis_reply_fn fn, void *ctx);
void __wrap_scripts_run(struct redis_conn *c, enum script_id id, int nkeys,
			const char *const *keys, int nargs, const char *const *args,
			redis_reply_fn fn, void *ctx)
{
	redisReply *r = canned;

	(void)c;
	last_id = id;
	last_nkeys = nkeys;
	last_nargs = nargs;
	for (int i = 0; i < nkeys && i < 8; i++)
		snprintf(last_keys[i], sizeof(last_keys[i]), "%s", keys[i]);
	for (int i = 0; i < nargs && i < 8; i++)
		snprintf(last_args[i], sizeof(last_args[i]), "%s", args[i]);
	canned = NULL;
	if (ncanned_next) {
		canned = canned_next[0];
		memmove(canned_next, canned_next + 1, --ncanned_next * sizeof(*canned_next));
	}
	fn(ctx, r);		/* as redis_conn does: the reply is freed after */
	if (r)
		freeReplyObject(r);
}

/* The listing's SCANs: the COUNT asked for, answered with scans[] in turn. */
static redisReply *scans[4];
static int nscans;
static char last_count[16], last_cursor[32];

static void scan_sent(struct redis_conn *c, int argc, const char **argv, const size_t *lens,
		      bool deadline, redis_reply_fn fn, void *ctx)
{
	redisReply *r = nscans ? scans[0] : NULL;

	(void)c;
	(void)lens;
	assert_false(deadline);
	assert_int_equal(argc, 6);	/* no TYPE: a semaphore's name is a string */
	assert_string_equal(argv[0], "SCAN");
	snprintf(last_cursor, sizeof(last_cursor), "%s", argv[1]);
	snprintf(last_count, sizeof(last_count), "%s", argv[5]);
	if (nscans)
		memmove(scans, scans + 1, --nscans * sizeof(*scans));
	fn(ctx, r);
	if (r)
		freeReplyObject(r);
}

/* A renewal tells the waiters of the lock's channel its new lease end. */
static char lease_end_channel[300];

void __wrap_waiters_lease_ends(struct waiters *ws, const char *channel, int64_t at_ms);
void __wrap_waiters_lease_ends(struct waiters *ws, const char *channel, int64_t at_ms)
{
	(void)ws;
	(void)at_ms;
	snprintf(lease_end_channel, sizeof(lease_end_channel), "%s", channel);
}

/* What dlockd published last, and how often: a request that started or
 * ended a holding tells the lock's watchers. */
static char published[2][300];
static int npublished;

static void publish_sent(struct redis_conn *c, int argc, const char **argv,
			 const size_t *lens, bool deadline, redis_reply_fn fn, void *ctx)
{
	redisReply *r = xcalloc(1, sizeof(*r));

	(void)c;
	(void)lens;
	(void)deadline;
	assert_int_equal(argc, 3);
	assert_string_equal(argv[0], "publish");	/* scripts_set_sharded(false) */
	snprintf(published[0], sizeof(published[0]), "%s", argv[1]);
	snprintf(published[1], sizeof(published[1]), "%s", argv[2]);
	npublished++;
	r->type = REDIS_REPLY_INTEGER;
	fn(ctx, r);
	freeReplyObject(r);
}

/* The two commands locks.c sends outside scripts: SCAN and PUBLISH. */
void __wrap_redis_conn_send(struct redis_conn *c, int argc, const char **argv,
			    const size_t *lens, bool deadline, redis_reply_fn fn, void *ctx);
void __wrap_redis_conn_send(struct redis_conn *c, int argc, const char **argv,
			    const size_t *lens, bool deadline, redis_reply_fn fn, void *ctx)
{
	if (argc > 0 && !strcmp(argv[0], "SCAN"))
		scan_sent(c, argc, argv, lens, deadline, fn, ctx);
	else
		publish_sent(c, argc, argv, lens, deadline, fn, ctx);
}

/* A single Redis: the listing's SCAN goes through redis_conn_send. */
bool __wrap_redis_conn_is_cluster(const struct redis_conn *c);
bool __wrap_redis_conn_is_cluster(const struct redis_conn *c)
{
	(void)c;
	return false;
}

void __wrap_redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
				 const size_t *lens, redis_reply_fn fn, void *ctx);
void __wrap_redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
				 const size_t *lens, redis_reply_fn fn, void *ctx)
{
	assert_int_equal(slot, -1);
	__wrap_redis_conn_send(c, argc, argv, lens, false, fn, ctx);
}

/* No loop, no connection: scripts_run, redis_conn_send and
 * waiters_lease_ends are mocks. */
static const struct backend B;

/* The outcome handed to the last operation's callback. */
static enum lock_result got;
static struct lock_state got_st;

static void record(void *ctx, enum lock_result r, const struct lock_state *st)
{
	(void)ctx;
	got = r;
	got_st = *st;
}

/* The operations, called as if they answered at once: the mock calls
 * record() before locks_*() returns. */
#define OUTCOME(st, call) (got = LOCK_RESULT_COUNT, (call), *(st) = got_st, got)

static enum lock_result acquire(enum lock_kind k, const char *name, const char *owner,
				int64_t ttl, bool queue, struct lock_state *st)
{
	return OUTCOME(st, locks_acquire(&B, k, name, owner, "", ttl, queue ? LOCK_QUEUE : 0,
					 NULL, record, NULL));
}

static enum lock_result release(enum lock_kind k, const char *name, const char *owner,
				struct lock_state *st)
{
	return OUTCOME(st, locks_release(&B, k, name, owner, "", record, NULL));
}

static enum lock_result renew(enum lock_kind k, const char *name, const char *owner,
			      int64_t ttl, struct lock_state *st)
{
	return OUTCOME(st, locks_renew(&B, k, name, owner, "", ttl, 0, record, NULL));
}

/* The view the last inspect handed over (freed by the next one). */
static struct lock_view *got_view;

static void view_record(void *ctx, enum lock_result r, const struct lock_state *st,
			struct lock_view *v)
{
	(void)ctx;
	got = r;
	got_st = *st;
	lock_view_free(got_view);
	got_view = v;
}

static enum lock_result inspect(enum lock_kind k, const char *name, struct lock_state *st)
{
	return OUTCOME(st, locks_inspect(&B, k, name, NULL, view_record, NULL));
}

static enum lock_result force_release(enum lock_kind k, const char *name, struct lock_state *st)
{
	return OUTCOME(st, locks_force_release(&B, k, name, record, NULL));
}

static redisReply *reply_new(int type)
{
	redisReply *r = xcalloc(1, sizeof(*r));

	r->type = type;
	return r;
}

/* An array reply of n integers. */
static redisReply *ints(int n, ...)
{
	redisReply *r = reply_new(REDIS_REPLY_ARRAY);
	va_list ap;

	r->elements = (size_t)n;
	r->element = xcalloc((size_t)n, sizeof(*r->element));
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		r->element[i] = reply_new(REDIS_REPLY_INTEGER);
		r->element[i]->integer = va_arg(ap, long long);
	}
	va_end(ap);
	return r;
}

static redisReply *str_reply(const char *s)
{
	redisReply *r = reply_new(REDIS_REPLY_STRING);

	r->str = xstrdup(s);
	r->len = strlen(s);
	return r;
}

static redisReply *int_reply(long long v)
{
	redisReply *r = reply_new(REDIS_REPLY_INTEGER);

	r->integer = v;
	return r;
}

/* An array reply of the n replies given (taken over). */
static redisReply *arr(int n, ...)
{
	redisReply *r = reply_new(REDIS_REPLY_ARRAY);
	va_list ap;

	r->elements = (size_t)n;
	r->element = xcalloc((size_t)n + 1, sizeof(*r->element));
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		r->element[i] = va_arg(ap, redisReply *);
	va_end(ap);
	return r;
}

/* ----- Key building ----- */

static void test_locks__key_uses_hash_tag(void **state)
{
	char *s;

	(void)state;
	s = locks_prefix_name("redisson_lock__channel", "foo");
	assert_string_equal(s, "redisson_lock__channel:{foo}");
	free(s);
	s = locks_prefix_name("redisson_lock_token", "a:b");
	assert_string_equal(s, "redisson_lock_token:{a:b}");
	free(s);
	s = locks_tag_name("foo");		/* the rwlock scripts append :<field>:... */
	assert_string_equal(s, "{foo}");
	free(s);
}

static void test_locks__name_with_brace_gets_no_extra_tag(void **state)
{
	char *s;

	(void)state;
	s = locks_prefix_name("redisson_lock__channel", "{test}:abc");
	assert_string_equal(s, "redisson_lock__channel:{test}:abc");
	free(s);
	s = locks_tag_name("{test}:abc");
	assert_string_equal(s, "{test}:abc");
	free(s);
}

/* A call's keys are built in struct keys' buffer, those past it on the
 * heap: the same names either way, tagged or not, short or long. */
static void test_locks__keys_in_the_buffer_and_past_it(void **state)
{
	static const char *const prefixes[] = {
		[K_TOKEN] = "redisson_lock_token", [K_QUEUE] = "redisson_lock_queue",
		[K_DEADLINES] = "redisson_lock_timeout", [K_WRITERS] = "dlockd_rwlock_writers",
		[K_OWNERS] = "dlockd_lock_owners", [K_SEM_WAITERS] = "dlockd_sem_waiters",
		[K_STATE] = "dlockd_lock_state",
	};
	char longname[LOCKS_NAME_MAX * 3 + 1];
	const char *names[] = { "job", "{t}:abc", longname };
	struct keys ks;
	char *want;

	(void)state;
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		bool tagged = strchr(names[i], '{');

		keys_init(&ks, LOCK_KIND_LOCK, names[i]);
		for (int id = 0; id < K_COUNT; id++) {
			if (id == K_END || id == K_LOCK || id == K_CHANNEL || id == K_TAG ||
			    id == K_PERMITS)
				continue;
			want = locks_prefix_name(prefixes[id], names[i]);
			assert_string_equal(key_get(&ks, id), want);
			assert_ptr_equal(key_get(&ks, id), key_get(&ks, id));	/* built once */
			free(want);
		}
		want = locks_prefix_name(kinds[LOCK_KIND_LOCK].channel_prefix, names[i]);
		assert_string_equal(key_get(&ks, K_CHANNEL), want);
		free(want);
		want = locks_tag_name(names[i]);
		assert_string_equal(key_get(&ks, K_TAG), want);
		free(want);
		want = tagged ? xstrjoin(names[i], ":timeout", NULL)
			      : xstrjoin("{", names[i], "}:timeout", NULL);
		assert_string_equal(key_get(&ks, K_PERMITS), want);
		free(want);
		assert_ptr_equal(key_get(&ks, K_LOCK), names[i]);
		/* the long name's keys overflowed the buffer */
		assert_true(i < 2 ? !ks.heap[K_PERMITS] : ks.heap[K_PERMITS] != NULL);
		keys_free(&ks);
	}
}

static void test_locks__wait_channel_of_an_exclusive_lock(void **state)
{
	char *s = locks_wait_channel(LOCK_KIND_LOCK, "job", "owner-1");

	(void)state;
	assert_string_equal(s, "redisson_lock__channel:{job}");
	free(s);
}

/* ----- Operations: keys passed and replies decoded ----- */

static void test_locks__acquire_passes_lock_token_and_holders_keys(void **state)
{
	struct lock_state st;

	(void)state;
	canned = ints(5, 1LL, 7LL, 2LL, 30000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 30000, false, &st), LOCK_OK);
	assert_int_equal(last_id, SCRIPT_LOCK_ACQUIRE);
	assert_int_equal(last_nkeys, 4);
	assert_string_equal(last_keys[0], "job");
	assert_string_equal(last_keys[1], "redisson_lock_token:{job}");
	assert_string_equal(last_keys[2], "dlockd_lock_owners:{job}");
	assert_string_equal(last_keys[3], "dlockd_lock_state:{job}");
	assert_int_equal(last_nargs, 10);
	assert_string_equal(last_args[0], "30000");
	assert_string_equal(last_args[1], "w1");
	assert_string_equal(last_args[3], "0");		/* not reentrant */
	assert_string_equal(last_args[4], "");		/* no principal: auth off */
	assert_string_equal(last_args[7], "0");		/* no holder value given */
	assert_int_equal(st.token, 7);
	assert_int_equal(st.holds, 2);
	assert_int_equal(st.ttl_ms, 30000);
	assert_true(st.added);
	canned = ints(5, 1LL, 7LL, 2LL, 30000LL, 0LL);	/* a repeat */
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 30000, false, &st), LOCK_OK);
	assert_false(st.added);
}

/* The flags and the principal reach the script; a holding made under
 * another principal is not_owner, for an acquire too. */
static void test_locks__acquire_reentrant_principal_and_not_owner(void **state)
{
	(void)state;
	canned = ints(3, -2LL, 7LL, 0LL);
	got = LOCK_RESULT_COUNT;
	locks_acquire(&B, LOCK_KIND_WRITE, "doc", "w1", "team-a", 1000,
		      LOCK_QUEUE | LOCK_REENTRANT, NULL, record, NULL);
	assert_int_equal(got, LOCK_NOT_OWNER);
	assert_int_equal(got_st.why, LOCK_WHY_PRINCIPAL);
	assert_int_equal(last_nkeys, 6);
	assert_string_equal(last_keys[4], "dlockd_lock_owners:{doc}");
	assert_string_equal(last_keys[5], "dlockd_lock_state:{doc}");
	assert_string_equal(last_args[3], "1");
	assert_string_equal(last_args[4], "team-a");
	canned = ints(3, -2LL, 7LL, 0LL);
	got = LOCK_RESULT_COUNT;
	locks_release(&B, LOCK_KIND_READ, "doc", "w1", "team-b", record, NULL);
	assert_int_equal(got, LOCK_NOT_OWNER);
	assert_int_equal(got_st.why, LOCK_WHY_PRINCIPAL);
	assert_string_equal(last_keys[3], "dlockd_lock_owners:{doc}");
	assert_string_equal(last_args[1], "team-b");
}

static void test_locks__acquire_decodes_held_and_wrong_kind(void **state)
{
	struct lock_state st;

	(void)state;
	canned = ints(2, 0LL, 1234LL);
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, true, &st), LOCK_HELD);
	assert_int_equal(st.ttl_ms, 1234);
	canned = ints(1, -1LL);
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, true, &st), LOCK_WRONG_KIND);
}

static void test_locks__release_codes(void **state)
{
	struct lock_state st;

	(void)state;
	canned = ints(2, 1LL, 0LL);
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_OK);
	assert_string_equal(last_keys[1], "redisson_lock__channel:{job}");
	assert_string_equal(last_keys[2], "dlockd_lock_owners:{job}");
	assert_int_equal(st.holds, 0);
	canned = ints(2, 1LL, 3LL);
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_OK);
	assert_int_equal(st.holds, 3);
	canned = ints(1, 0LL);
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_NOT_HELD);
	canned = ints(1, -2LL);
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_NOT_OWNER);
	canned = ints(1, -1LL);
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_WRONG_KIND);
}

/* A renewal that took reports the lock's channel and new lease end to the
 * waiters (a shorter lease publishes nothing they could miss); a refused
 * one reports nothing. */
static void test_locks__renewal_tells_the_waiters_its_lease_end(void **state)
{
	struct lock_state st;

	(void)state;
	lease_end_channel[0] = '\0';
	canned = ints(1, 0LL);
	assert_int_equal(renew(LOCK_KIND_LOCK, "job", "w1", 5000, &st), LOCK_NOT_HELD);
	assert_string_equal(lease_end_channel, "");
	canned = ints(2, 1LL, 5000LL);
	assert_int_equal(renew(LOCK_KIND_LOCK, "job", "w1", 5000, &st), LOCK_OK);
	assert_string_equal(lease_end_channel, "redisson_lock__channel:{job}");
	canned = ints(2, 1LL, 5000LL);
	assert_int_equal(renew(LOCK_KIND_FAIR, "q", "w1", 5000, &st), LOCK_OK);
	assert_string_equal(lease_end_channel, "redisson_lock__channel:{q}:w1");
}

static redisReply *error_reply(const char *text)
{
	redisReply *err = reply_new(REDIS_REPLY_ERROR);

	err->str = xstrdup(text);
	err->len = strlen(err->str);
	return err;
}

/* No reply: unreachable. An error that says Redis cannot serve now: a
 * 503 with Redis' reason. Any other error: the script failed -- never
 * "unreachable". */
static void test_locks__backend_down_and_script_errors(void **state)
{
	static const struct {
		const char *error;
		enum lock_result want;
		const char *why;	/* in st.fault */
	} cases[] = {
		{ "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN "
		  "NOSAVE.", LOCK_BACKEND_DOWN, "busy running a script" },
		{ "LOADING Redis is loading the dataset in memory", LOCK_BACKEND_DOWN, "loading" },
		{ "READONLY You can't write against a read only replica. script: 1, on "
		  "@user_script:1.", LOCK_BACKEND_DOWN, "read-only replica" },
		{ "OOM command not allowed when used memory > 'maxmemory'.", LOCK_BACKEND_DOWN,
		  "out of memory" },
		{ "NOPERM this user has no permissions to run the 'evalsha' command",
		  LOCK_BACKEND_DOWN, "no permission (NOPERM)" },
		{ "ERR The user executing the script can't run this command or subcommand "
		  "script: 1, on @user_script:1.", LOCK_BACKEND_DOWN, "no permission (NOPERM)" },
		{ "ERR The user executing the script can't publish to the channel mentioned in "
		  "the command script: 1, on @user_script:1.", LOCK_BACKEND_DOWN,
		  "no permission (NOPERM)" },
		{ "ERR The user executing the script can't access at least one of the keys "
		  "mentioned in the command script: 1, on @user_script:1.", LOCK_BACKEND_DOWN,
		  "no permission (NOPERM)" },
		{ "ERR ACL failure in script: User dlockd has no permissions to access the "
		  "'redisson_lock__channel:{job}' channel script: 1, on @user_script:1.",
		  LOCK_BACKEND_DOWN, "no permission (NOPERM)" },
		{ "MASTERDOWN Link with MASTER is down", LOCK_BACKEND_DOWN, "lost its master" },
		{ "TRYAGAIN Multiple keys request during rehashing of slot", LOCK_BACKEND_DOWN,
		  "TRYAGAIN" },
		{ "CLUSTERDOWN The cluster is down", LOCK_BACKEND_DOWN, "cluster is down" },
		{ "DLOCKD_LATE the call reached redis after its deadline", LOCK_BACKEND_DOWN,
		  "changed nothing" },
		{ "WRONGTYPE Operation against a key holding the wrong kind of value script: 1",
		  LOCK_SCRIPT_ERROR, "script failed" },
		{ "ERR user_script:1: Script attempted to access nonexistent global variable 'x'",
		  LOCK_SCRIPT_ERROR, "script failed" },
		{ "ERR something", LOCK_SCRIPT_ERROR, "script failed" },
		{ "BUSYKEY Target key name already exists.", LOCK_SCRIPT_ERROR, "script failed" },
	};
	struct lock_state st;

	(void)state;
	canned = NULL;
	assert_int_equal(renew(LOCK_KIND_LOCK, "job", "w1", 100, &st), LOCK_BACKEND_DOWN);
	assert_null(st.fault);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		canned = error_reply(cases[i].error);
		if (inspect(LOCK_KIND_LOCK, "job", &st) != cases[i].want)
			fail_msg("'%s' gave %d, want %d", cases[i].error, (int)got,
				 (int)cases[i].want);
		if (!st.fault || !strstr(st.fault, cases[i].why))
			fail_msg("'%s' explained as '%s', want '%s'", cases[i].error,
				 st.fault ? st.fault : "(null)", cases[i].why);
	}
}

static void test_locks__inspect_and_force_release(void **state)
{
	struct lock_state st;
	const struct lock_holding *h;

	(void)state;
	canned = arr(5, int_reply(1), int_reply(900),
		     arr(4, str_reply("w1"), int_reply(2), int_reply(17), str_reply("svc")),
		     arr(0), int_reply(0));
	assert_int_equal(inspect(LOCK_KIND_LOCK, "job", &st), LOCK_OK);
	assert_int_equal(last_id, SCRIPT_LOCK_STATUS);
	assert_int_equal(last_nkeys, 2);
	assert_string_equal(last_keys[1], "dlockd_lock_owners:{job}");
	assert_int_equal(last_nargs, 0);
	assert_true(st.locked);
	assert_int_equal(st.ttl_ms, 900);
	assert_true(got_view->locked);
	assert_int_equal(got_view->index, 17);
	assert_int_equal(got_view->changes_in_ms, 900);
	assert_int_equal(got_view->nholders, 1);
	h = lock_view_holding(got_view, "w1", LOCK_MODE_NONE);
	assert_non_null(h);
	assert_int_equal(h->holds, 2);
	assert_int_equal(h->token, 17);
	assert_int_equal(h->ttl_ms, 900);
	assert_string_equal(h->principal, "svc");
	assert_null(lock_view_holding(got_view, "w2", LOCK_MODE_NONE));

	/* a holder dlockd has no token of (a Redisson client): index 1 */
	canned = arr(5, int_reply(1), int_reply(-1),
		     arr(4, str_reply("uuid:1"), int_reply(1), int_reply(0), str_reply("")),
		     arr(0), int_reply(0));
	assert_int_equal(inspect(LOCK_KIND_LOCK, "job", &st), LOCK_OK);
	assert_int_equal(got_view->index, 1);
	assert_null(got_view->holders[0].principal);
	assert_int_equal(got_view->changes_in_ms, -1);	/* no lease: never by itself */

	canned = arr(5, int_reply(0), int_reply(-2), arr(0), arr(0), int_reply(0));
	assert_int_equal(inspect(LOCK_KIND_LOCK, "job", &st), LOCK_OK);
	assert_false(st.locked);
	assert_int_equal(st.ttl_ms, 0);
	assert_int_equal(got_view->index, 0);
	assert_int_equal(got_view->nholders, 0);
	assert_int_equal(got_view->changes_in_ms, -1);

	npublished = 0;
	canned = int_reply(1);
	assert_int_equal(force_release(LOCK_KIND_LOCK, "job", &st), LOCK_OK);
	assert_true(st.locked);
	assert_int_equal(npublished, 1);
	assert_string_equal(published[0], "dlockd_lock_state:{job}");
	assert_string_equal(published[1], "released");
	canned = int_reply(0);			/* nobody held it: nothing changed */
	assert_int_equal(force_release(LOCK_KIND_LOCK, "job", &st), LOCK_OK);
	assert_int_equal(npublished, 1);
	lock_view_free(got_view);
	got_view = NULL;
}

static void test_locks__inspect_of_a_fair_lock_lists_its_queue(void **state)
{
	struct lock_state st;

	(void)state;
	canned = arr(5, int_reply(1), int_reply(700),
		     arr(4, str_reply("w1"), int_reply(1), int_reply(42), str_reply("")),
		     arr(4, str_reply("q1"), int_reply(4900), str_reply("q2"), int_reply(3000)),
		     int_reply(7));
	assert_int_equal(inspect(LOCK_KIND_FAIR, "job", &st), LOCK_OK);
	assert_int_equal(last_nkeys, 4);
	assert_string_equal(last_keys[2], "redisson_lock_queue:{job}");
	assert_string_equal(last_keys[3], "redisson_lock_timeout:{job}");
	assert_int_equal(last_nargs, 2);
	assert_string_equal(last_args[0], "100");	/* places listed, at most */
	assert_string_equal(last_args[1], "1000");	/* queue entries looked at, at most */
	assert_int_equal(got_view->index, 42);
	assert_int_equal(got_view->nplaces, 2);
	assert_string_equal(got_view->places[0].owner, "q1");
	assert_int_equal(got_view->places[0].ttl_ms, 4900);
	assert_string_equal(got_view->places[1].owner, "q2");
	assert_int_equal(got_view->queued, 7);

	/* a reply not shaped as promised is the script failing */
	canned = arr(5, int_reply(1), int_reply(700), arr(3, str_reply("w1"), int_reply(1),
							  int_reply(2)), arr(0), int_reply(0));
	assert_int_equal(inspect(LOCK_KIND_FAIR, "job", &st), LOCK_SCRIPT_ERROR);
	assert_null(got_view);
	canned = int_reply(1);
	assert_int_equal(inspect(LOCK_KIND_FAIR, "job", &st), LOCK_SCRIPT_ERROR);
}

static void test_locks__inspect_of_a_rwlock_indexes_writer_then_newest_reader(void **state)
{
	struct lock_state st;
	const struct lock_holding *h;

	(void)state;
	/* written, and the writer reads too (a downgrade to come) */
	canned = arr(3, int_reply(2), int_reply(800),
		     arr(12, str_reply("w"), int_reply(1), int_reply(9), str_reply(""),
			 int_reply(1), int_reply(300),
			 str_reply("w"), int_reply(2), int_reply(5), str_reply(""),
			 int_reply(2), int_reply(800)));
	assert_int_equal(inspect(LOCK_KIND_READ, "doc", &st), LOCK_OK);
	assert_int_equal(last_id, SCRIPT_RW_STATUS);
	assert_string_equal(last_keys[2], "dlockd_lock_owners:{doc}");
	assert_int_equal(st.mode, LOCK_MODE_WRITE);
	assert_int_equal(got_view->index, 5);		/* the writer's */
	assert_int_equal(got_view->changes_in_ms, 300);	/* the read hold ends first */
	h = lock_view_holding(got_view, "w", LOCK_MODE_WRITE);
	assert_non_null(h);
	assert_int_equal(h->holds, 2);
	assert_int_equal(h->ttl_ms, 800);
	h = lock_view_holding(got_view, "w", LOCK_MODE_READ);
	assert_non_null(h);
	assert_int_equal(h->ttl_ms, 300);

	/* read: the newest reader's */
	canned = arr(3, int_reply(1), int_reply(800),
		     arr(12, str_reply("a"), int_reply(1), int_reply(9), str_reply(""),
			 int_reply(1), int_reply(800),
			 str_reply("b"), int_reply(3), int_reply(12), str_reply("svc"),
			 int_reply(1), int_reply(500)));
	assert_int_equal(inspect(LOCK_KIND_WRITE, "doc", &st), LOCK_OK);
	assert_int_equal(st.mode, LOCK_MODE_READ);
	assert_int_equal(got_view->index, 12);
	assert_int_equal(got_view->nholders, 2);

	canned = ints(1, -1LL);
	assert_int_equal(inspect(LOCK_KIND_READ, "doc", &st), LOCK_WRONG_KIND);
	assert_null(got_view);
}

static void test_locks__new_and_ended_holdings_are_published(void **state)
{
	struct lock_state st;

	(void)state;
	npublished = 0;
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);	/* a new holding */
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, false, &st), LOCK_OK);
	/* a plain lock's scripts publish on the state channel themselves:
	 * it is their KEYS[4], and no PUBLISH follows */
	assert_string_equal(last_keys[3], "dlockd_lock_state:{job}");
	assert_int_equal(npublished, 0);
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 0LL);	/* a repeat */
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, false, &st), LOCK_OK);
	canned = ints(5, 1LL, 7LL, 2LL, 1000LL, 1LL);	/* a counted re-entry */
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, false, &st), LOCK_OK);
	canned = ints(2, 1LL, 1LL);			/* one hold of two released */
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_OK);
	canned = ints(2, 1LL, 0LL);			/* the holding ends */
	assert_int_equal(release(LOCK_KIND_LOCK, "job", "w1", &st), LOCK_OK);
	assert_int_equal(last_nkeys, 3);	/* its "0" tells the watchers */
	canned = ints(5, 0LL, 900LL, 0LL, 0LL, 0LL);	/* held by another */
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w2", 1000, false, &st), LOCK_HELD);
	assert_int_equal(npublished, 0);
	/* so do every other kind's: on the state channel, or (a write or
	 * semaphore release) on the kind's own, where watchers listen too */
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_FAIR, "job", "w1", 1000, false, &st), LOCK_OK);
	assert_string_equal(last_keys[6], "dlockd_lock_state:{job}");
	canned = ints(2, 1LL, 0LL);
	assert_int_equal(release(LOCK_KIND_FAIR, "job", "w1", &st), LOCK_OK);
	assert_string_equal(last_keys[5], "dlockd_lock_state:{job}");
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_READ, "doc", "r1", 1000, false, &st), LOCK_OK);
	assert_string_equal(last_keys[5], "dlockd_lock_state:{doc}");
	canned = ints(3, 1LL, 0LL, 0LL);		/* a reader's holding ends */
	assert_int_equal(release(LOCK_KIND_READ, "doc", "r1", &st), LOCK_OK);
	assert_string_equal(last_keys[4], "dlockd_lock_state:{doc}");
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_WRITE, "doc", "w1", 1000, false, &st), LOCK_OK);
	assert_string_equal(last_keys[5], "dlockd_lock_state:{doc}");
	canned = ints(3, 1LL, 0LL, 1LL);
	assert_int_equal(release(LOCK_KIND_WRITE, "doc", "w1", &st), LOCK_OK);
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_SEMAPHORE, "pool", "p1", 1000, false, &st), LOCK_OK);
	assert_string_equal(last_keys[6], "dlockd_lock_state:{pool}");
	canned = ints(2, 1LL, 0LL);
	assert_int_equal(release(LOCK_KIND_SEMAPHORE, "pool", "p1", &st), LOCK_OK);
	assert_int_equal(npublished, 0);
	/* an undo that ended a holding is published by dlockd */
	canned = ints(2, 1LL, 1LL);
	got = LOCK_RESULT_COUNT;
	locks_undo(&B, LOCK_KIND_READ, "doc", "r1", 5, record, NULL);
	assert_int_equal(got, LOCK_OK);
	assert_int_equal(npublished, 1);
	assert_string_equal(published[0], "dlockd_lock_state:{doc}");
	assert_string_equal(published[1], "released");
}

static void test_locks__watch_channels(void **state)
{
	char *ch[2];

	(void)state;
	assert_int_equal(locks_watch_channels(LOCK_KIND_LOCK, "job", ch), 2);
	assert_string_equal(ch[0], "dlockd_lock_state:{job}");
	assert_string_equal(ch[1], "redisson_lock__channel:{job}");
	free(ch[0]);
	free(ch[1]);
	assert_int_equal(locks_watch_channels(LOCK_KIND_READ, "doc", ch), 2);
	assert_string_equal(ch[1], "redisson_rwlock:{doc}");
	free(ch[0]);
	free(ch[1]);
	/* a fair lock's release speaks to its queue head, or with nobody
	 * queued on the plain lock's channel */
	assert_int_equal(locks_watch_channels(LOCK_KIND_FAIR, "q", ch), 2);
	assert_string_equal(ch[0], "dlockd_lock_state:{q}");
	assert_string_equal(ch[1], "redisson_lock__channel:{q}");
	free(ch[0]);
	free(ch[1]);
}

static void test_locks__fair_lock_keys_and_per_owner_channel(void **state)
{
	struct lock_state st;
	char *ch = locks_wait_channel(LOCK_KIND_FAIR, "job", "w1");

	(void)state;
	assert_string_equal(ch, "redisson_lock__channel:{job}:w1");
	free(ch);
	locks_configure(6000);
	canned = ints(3, 0LL, 500LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_FAIR, "job", "w1", 1000, true, &st), LOCK_HELD);
	assert_int_equal(last_id, SCRIPT_FAIR_ACQUIRE);
	assert_int_equal(last_nkeys, 7);
	assert_string_equal(last_keys[2], "redisson_lock_queue:{job}");
	assert_string_equal(last_keys[3], "redisson_lock_timeout:{job}");
	assert_string_equal(last_keys[4], "redisson_lock__channel:{job}");
	assert_string_equal(last_keys[5], "dlockd_lock_owners:{job}");
	assert_string_equal(last_keys[6], "dlockd_lock_state:{job}");
	assert_string_equal(last_args[2], "6000");	/* queue place lifetime */
	assert_true(st.queued);
	assert_int_equal(st.retry_ms, 502);		/* the head watches the lease (and 2 ms) */
	assert_false(st.refresh_place);			/* and so refreshes its own place */
	canned = ints(3, 0LL, 9000LL, 0LL);
	assert_int_equal(acquire(LOCK_KIND_FAIR, "job", "w2", 1000, true, &st), LOCK_HELD);
	/* the others are told when their turn comes; the loop keeps their place */
	assert_int_equal(st.retry_ms, 0);
	assert_true(st.refresh_place);
	assert_int_equal(locks_queue_refresh_ms(), 2000);
	canned = ints(3, 0LL, 500LL, 0LL);
	assert_int_equal(acquire(LOCK_KIND_FAIR, "job", "w2", 1000, false, &st), LOCK_HELD);
	assert_string_equal(last_args[2], "0");		/* no wait: never queued */
	assert_false(st.queued);
	assert_false(st.refresh_place);
	locks_configure(5000);
}

/* What locks_fair_refresh's caller heard. */
static enum lock_result refresh_got;
static char refresh_retry[4][32];
static size_t refresh_n;

static void refresh_record(void *ctx, enum lock_result r, const char *const *retry, size_t n)
{
	(void)ctx;
	refresh_got = r;
	refresh_n = n;
	for (size_t i = 0; i < n && i < 4; i++)
		snprintf(refresh_retry[i], sizeof(refresh_retry[i]), "%s", retry[i]);
}

static void test_locks__fair_refresh_sends_every_owner_in_one_argument(void **state)
{
	static const char *const owners[] = { "w1", "ci:job-22", "x" };
	redisReply *r;

	(void)state;
	locks_configure(6000);
	/* {1, "x"}: x must look again */
	r = ints(1, 1LL);
	r->elements = 2;
	r->element = xrealloc(r->element, 2 * sizeof(*r->element));
	r->element[1] = str_reply("x");
	canned = r;
	refresh_got = LOCK_RESULT_COUNT;
	locks_fair_refresh(&B, "job", owners, 3, refresh_record, NULL);
	assert_int_equal(last_id, SCRIPT_FAIR_REFRESH);
	assert_int_equal(last_nkeys, 4);
	assert_string_equal(last_keys[0], "job");
	assert_string_equal(last_keys[1], "redisson_lock_queue:{job}");
	assert_string_equal(last_keys[2], "redisson_lock_timeout:{job}");
	assert_string_equal(last_keys[3], "redisson_lock__channel:{job}");
	assert_int_equal(last_nargs, 2);
	assert_string_equal(last_args[0], "6000");	/* the place's new life */
	assert_string_equal(last_args[1], "2:w19:ci:job-221:x");
	assert_int_equal(refresh_got, LOCK_OK);
	assert_int_equal(refresh_n, 1);
	assert_string_equal(refresh_retry[0], "x");

	/* not a fair lock any more, or no answer: the refresh did not happen */
	canned = ints(1, -1LL);
	locks_fair_refresh(&B, "job", owners, 3, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_WRONG_KIND);
	canned = ints(1, -3LL);
	locks_fair_refresh(&B, "job", owners, 3, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_WRONG_KIND);
	canned = NULL;
	locks_fair_refresh(&B, "job", owners, 3, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_BACKEND_DOWN);
	canned = reply_new(REDIS_REPLY_INTEGER);
	locks_fair_refresh(&B, "job", owners, 3, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_SCRIPT_ERROR);
	locks_configure(5000);
}

/* Many waiters' places go in scripts of REFRESH_MAX owners, one after
 * another; their answers are heard once, in the order given, and a
 * failure of any is the refresh's. */
static void test_locks__fair_refresh_of_many_waiters_goes_in_short_scripts(void **state)
{
	enum { N = 2 * REFRESH_MAX + 5 };
	static char names[N][16];
	const char *owners[N];
	redisReply *r;

	(void)state;
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "w%d", i);
		owners[i] = names[i];
	}
	r = ints(1, 1LL);				/* first script: w1 looks again */
	r->elements = 2;
	r->element = xrealloc(r->element, 2 * sizeof(*r->element));
	r->element[1] = str_reply("w1");
	canned = r;
	canned_next[0] = ints(1, 1LL);			/* second: nobody */
	r = ints(1, 1LL);				/* third: the last owner */
	r->elements = 2;
	r->element = xrealloc(r->element, 2 * sizeof(*r->element));
	r->element[1] = str_reply(names[N - 1]);
	canned_next[1] = r;
	ncanned_next = 2;
	refresh_got = LOCK_RESULT_COUNT;
	locks_fair_refresh(&B, "job", owners, N, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_OK);
	assert_int_equal(refresh_n, 2);
	assert_string_equal(refresh_retry[0], "w1");
	assert_string_equal(refresh_retry[1], names[N - 1]);
	{
		char last5[64];	/* the last 5 owners, each as <length>:<owner> */
		int at = 0;

		for (int i = N - 5; i < N; i++)
			at += snprintf(last5 + at, sizeof(last5) - (size_t)at, "%zu:%s",
				       strlen(names[i]), names[i]);
		assert_string_equal(last_args[1], last5);
	}

	/* the second script fails: the refresh did not happen, nobody named */
	canned = ints(1, 1LL);
	canned_next[0] = NULL;
	ncanned_next = 1;
	locks_fair_refresh(&B, "job", owners, N, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_BACKEND_DOWN);
	assert_int_equal(refresh_n, 0);
	assert_int_equal(ncanned_next, 0);

	/* an answer naming more owners than it was given is not believed past them */
	r = ints(1, 1LL);
	r->elements = 4;
	r->element = xrealloc(r->element, 4 * sizeof(*r->element));
	r->element[1] = str_reply("a");
	r->element[2] = str_reply("b");
	r->element[3] = str_reply("c");
	canned = r;
	locks_fair_refresh(&B, "job", owners, 2, refresh_record, NULL);
	assert_int_equal(refresh_got, LOCK_OK);
	assert_int_equal(refresh_n, 2);
}

/* A read acquire is given the caps on read holds; a hold past one is
 * LOCK_TOO_MANY_HOLDS, saying which and how many. */
static void test_locks__read_acquire_passes_the_caps_and_decodes_their_refusal(void **state)
{
	struct lock_state st;

	(void)state;
	locks_set_read_hold_caps(5, 9);
	canned = ints(3, -4LL, 1LL, 5LL);
	assert_int_equal(acquire(LOCK_KIND_READ, "doc", "r1", 1000, false, &st),
			 LOCK_TOO_MANY_HOLDS);
	assert_int_equal(last_id, SCRIPT_RW_READ_ACQUIRE);
	assert_int_equal(last_nargs, 10);
	assert_string_equal(last_args[5], "5");
	assert_string_equal(last_args[6], "9");
	assert_int_equal(st.why, LOCK_WHY_OWNER_HOLDS);
	assert_int_equal(st.others, 5);
	canned = ints(3, -4LL, 2LL, 12LL);	/* Redisson's holds may pass the cap */
	assert_int_equal(acquire(LOCK_KIND_READ, "doc", "r1", 1000, false, &st),
			 LOCK_TOO_MANY_HOLDS);
	assert_int_equal(st.why, LOCK_WHY_LOCK_HOLDS);
	assert_int_equal(st.others, 12);
	/* every kind gets the same ten arguments; the other kinds add no read
	 * holds, and a write (and a fair acquire) takes the cap on its queue in
	 * the first cap's place */
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_WRITE, "doc", "w1", 1000, false, &st), LOCK_OK);
	assert_int_equal(last_nargs, 10);
	assert_string_equal(last_args[5], "1000");
	locks_set_read_hold_caps(64, 256);
}

static void test_locks__queueing_acquires_pass_the_queue_cap_and_decode_queue_full(void **state)
{
	struct lock_state st;

	(void)state;
	locks_set_fair_queue_cap(3);
	canned = ints(2, -5LL, 4LL);	/* Redisson's places may pass the cap */
	assert_int_equal(acquire(LOCK_KIND_FAIR, "q", "f1", 1000, false, &st), LOCK_QUEUE_FULL);
	assert_int_equal(last_id, SCRIPT_FAIR_ACQUIRE);
	assert_int_equal(last_nargs, 10);
	assert_string_equal(last_args[5], "3");
	assert_int_equal(st.others, 4);
	canned = ints(2, -5LL, 3LL);
	assert_int_equal(acquire(LOCK_KIND_WRITE, "q", "w1", 1000, false, &st), LOCK_QUEUE_FULL);
	assert_int_equal(last_id, SCRIPT_RW_WRITE_ACQUIRE);
	assert_string_equal(last_args[5], "3");
	assert_int_equal(st.others, 3);
	/* a plain lock has no queue: its first cap is the read holds' */
	canned = ints(5, 1LL, 7LL, 1LL, 1000LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_LOCK, "q2", "o", 1000, false, &st), LOCK_OK);
	assert_int_equal(last_nargs, 10);
	assert_string_not_equal(last_args[5], "3");
	locks_set_fair_queue_cap(1000);
}

static void test_locks__rwlock_keys_follow_redissons_tag_rule(void **state)
{
	struct lock_state st;

	(void)state;
	canned = ints(4, 1LL, 3LL, 1LL, 1000LL);
	assert_int_equal(acquire(LOCK_KIND_READ, "doc", "r1", 1000, true, &st), LOCK_OK);
	assert_int_equal(last_id, SCRIPT_RW_READ_ACQUIRE);
	assert_string_equal(last_keys[1], "redisson_lock_token:{doc}");
	assert_string_equal(last_keys[2], "{doc}");
	assert_string_equal(last_keys[3], "dlockd_rwlock_writers:{doc}");
	assert_string_equal(last_args[2], "0");		/* readers hold no queue place */
	canned = ints(4, 1LL, 4LL, 1LL, 1000LL);
	assert_int_equal(acquire(LOCK_KIND_WRITE, "{test}:abc", "w", 1000, true, &st),
			 LOCK_OK);
	assert_string_equal(last_keys[2], "{test}:abc");
	assert_string_equal(last_keys[3], "dlockd_rwlock_writers:{test}:abc");
	assert_string_equal(last_args[2], "5000");	/* a waiting writer does */
}

static void test_locks__rwlock_release_reports_whether_free(void **state)
{
	struct lock_state st;

	(void)state;
	canned = ints(3, 1LL, 0LL, 0LL);	/* other readers remain */
	assert_int_equal(release(LOCK_KIND_READ, "doc", "r1", &st), LOCK_OK);
	assert_string_equal(last_keys[1], "redisson_rwlock:{doc}");
	assert_true(st.locked);
	assert_int_equal(st.holds, 0);
	canned = ints(3, 1LL, 0LL, 1LL);
	assert_int_equal(release(LOCK_KIND_WRITE, "doc", "w", &st), LOCK_OK);
	assert_false(st.locked);
}

static void test_locks__held_says_why_and_not_a_lock_is_told_apart(void **state)
{
	struct lock_state st;
	redisReply *minus3 = reply_new(REDIS_REPLY_INTEGER);

	(void)state;
	canned = ints(5, 0LL, -2LL, 0LL, 1LL, 3LL);	/* free fair lock, 3 queued */
	assert_int_equal(acquire(LOCK_KIND_FAIR, "job", "w1", 1000, false, &st), LOCK_HELD);
	assert_int_equal(st.why, LOCK_WHY_QUEUE);
	assert_int_equal(st.others, 3);
	canned = ints(5, 0LL, 900LL, 0LL, 4LL, 1LL);	/* the caller and 1 other read */
	assert_int_equal(acquire(LOCK_KIND_WRITE, "doc", "r1", 1000, false, &st), LOCK_HELD);
	assert_int_equal(st.why, LOCK_WHY_OTHER_READERS);
	assert_int_equal(st.others, 1);
	canned = ints(5, 0LL, 900LL, 0LL, 99LL, 0LL);	/* an unknown code says nothing */
	assert_int_equal(acquire(LOCK_KIND_READ, "doc", "r1", 1000, false, &st), LOCK_HELD);
	assert_int_equal(st.why, LOCK_WHY_NONE);
	canned = ints(2, 0LL, 900LL);			/* the plain lock's short reply */
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, false, &st), LOCK_HELD);
	assert_int_equal(st.why, LOCK_WHY_NONE);
	canned = ints(1, -3LL);
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, false, &st), LOCK_WRONG_KIND);
	assert_int_equal(st.why, LOCK_WHY_NOT_A_LOCK);
	canned = ints(1, -1LL);
	assert_int_equal(acquire(LOCK_KIND_LOCK, "job", "w1", 1000, false, &st), LOCK_WRONG_KIND);
	assert_int_equal(st.why, LOCK_WHY_NONE);
	canned = ints(1, -3LL);
	assert_int_equal(release(LOCK_KIND_READ, "doc", "r1", &st), LOCK_WRONG_KIND);
	assert_int_equal(st.why, LOCK_WHY_NOT_A_LOCK);
	canned = ints(1, -3LL);
	assert_int_equal(renew(LOCK_KIND_LOCK, "job", "w1", 100, &st), LOCK_WRONG_KIND);
	assert_int_equal(st.why, LOCK_WHY_NOT_A_LOCK);
	canned = ints(1, -3LL);
	assert_int_equal(inspect(LOCK_KIND_WRITE, "doc", &st), LOCK_WRONG_KIND);
	assert_int_equal(st.why, LOCK_WHY_NOT_A_LOCK);
	minus3->integer = -3;
	canned = minus3;
	assert_int_equal(force_release(LOCK_KIND_LOCK, "job", &st), LOCK_WRONG_KIND);
	assert_int_equal(st.why, LOCK_WHY_NOT_A_LOCK);
	canned = ints(3, -2LL, 3LL, 2LL);		/* write release: 2 readers hold it */
	assert_int_equal(release(LOCK_KIND_WRITE, "doc", "w", &st), LOCK_NOT_OWNER);
	assert_int_equal(st.why, LOCK_WHY_READERS);
	assert_int_equal(st.others, 2);
	assert_int_equal(st.holds, 0);
}

static void test_locks__key_prefix_goes_before_every_name(void **state)
{
	struct lock_state st;
	char *ch;

	(void)state;
	locks_set_key_prefix("app1:");
	canned = ints(4, 1LL, 3LL, 1LL, 1000LL);
	assert_int_equal(acquire(LOCK_KIND_READ, "doc", "r1", 1000, true, &st), LOCK_OK);
	assert_string_equal(last_keys[0], "app1:doc");
	assert_string_equal(last_keys[1], "redisson_lock_token:{app1:doc}");
	assert_string_equal(last_keys[2], "{app1:doc}");
	assert_string_equal(last_keys[3], "dlockd_rwlock_writers:{app1:doc}");
	canned = ints(3, 0LL, 500LL, 1LL);
	assert_int_equal(acquire(LOCK_KIND_FAIR, "job", "w1", 1000, true, &st), LOCK_HELD);
	assert_string_equal(last_keys[0], "app1:job");
	assert_string_equal(last_keys[2], "redisson_lock_queue:{app1:job}");
	assert_string_equal(last_keys[3], "redisson_lock_timeout:{app1:job}");
	assert_string_equal(last_keys[4], "redisson_lock__channel:{app1:job}");
	ch = locks_wait_channel(LOCK_KIND_FAIR, "job", "w1");
	assert_string_equal(ch, "redisson_lock__channel:{app1:job}:w1");
	free(ch);
	ch = locks_wait_channel(LOCK_KIND_WRITE, "doc", "w1");
	assert_string_equal(ch, "redisson_rwlock:{app1:doc}");
	free(ch);
	locks_set_key_prefix(NULL);
	canned = arr(5, int_reply(0), int_reply(-2), arr(0), arr(0), int_reply(0));
	assert_int_equal(inspect(LOCK_KIND_LOCK, "job", &st), LOCK_OK);
	assert_string_equal(last_keys[0], "job");
	lock_view_free(got_view);
	got_view = NULL;
}

/* ----- Listing ----- */

static void test_locks__listing_pattern_and_cursor(void **state)
{
	struct listing l = { 0 };
	char *p;

	(void)state;
	p = match_pattern("job-");
	assert_string_equal(p, "job-*");
	free(p);
	p = match_pattern("");
	assert_string_equal(p, "*");
	free(p);
	locks_set_key_prefix("k[1]*?\\:");	/* no such prefix passes --key-prefix; escaped anyway */
	p = match_pattern("a");
	assert_string_equal(p, "k\\[1\\]\\*\\?\\\\:a*");
	free(p);
	locks_set_key_prefix(NULL);

	assert_int_equal(cursor_parse(&l, NULL, false), 0);
	assert_string_equal(l.scan, "0");
	assert_null(l.after);
	assert_int_equal(cursor_parse(&l, "1234", false), 0);
	assert_string_equal(l.scan, "1234");
	assert_null(l.after);
	assert_int_equal(l.count, LIST_SCAN_COUNT);
	assert_int_equal(cursor_parse(&l, "18446744073709551615:job:7", false), 0);
	assert_string_equal(l.scan, "18446744073709551615");
	assert_string_equal(l.after, "job:7");
	assert_int_equal(l.count, 1);		/* that one bucket again */
	free(l.after);
	l.after = NULL;
	assert_int_equal(cursor_parse(&l, "abc", false), -1);
	assert_int_equal(cursor_parse(&l, "12:", false), -1);
	assert_int_equal(cursor_parse(&l, "12:a b", false), -1);
	assert_int_equal(cursor_parse(&l, "12x", false), -1);
	assert_int_equal(cursor_parse(&l, "-1", false), -1);
	assert_int_equal(cursor_parse(&l, "18446744073709551616", false), -1);
	assert_int_equal(cursor_parse(&l, "123456789012345678901", false), -1);
	assert_null(l.after);
	assert_false(l.cluster);

	/* a cluster's: "<shard>.<SCAN's cursor>[:<name>]" */
	assert_int_equal(cursor_parse(&l, NULL, true), 0);
	assert_true(l.cluster);
	assert_int_equal(l.shard, 0);
	assert_string_equal(l.scan, "0");
	assert_int_equal(cursor_parse(&l, "5461.1234", true), 0);
	assert_int_equal(l.shard, 5461);
	assert_string_equal(l.scan, "1234");
	assert_int_equal(cursor_parse(&l, "16383.7:job:7", true), 0);
	assert_int_equal(l.shard, 16383);
	assert_string_equal(l.after, "job:7");
	free(l.after);
	l.after = NULL;
	assert_int_equal(cursor_parse(&l, "1234", true), -1);		/* a single Redis' */
	assert_int_equal(cursor_parse(&l, "16384.0", true), -1);	/* no such slot */
	assert_int_equal(cursor_parse(&l, "123456.0", true), -1);
	assert_int_equal(cursor_parse(&l, ".0", true), -1);
	assert_int_equal(cursor_parse(&l, "5.x", true), -1);
	assert_int_equal(cursor_parse(&l, "5.0", false), -1);		/* a cluster's, elsewhere */
}

/* What the last listing's callback got. */
static enum lock_result list_got;
static size_t list_n;
static char list_cursor[300], page_first[300];

static void list_record(void *ctx, enum lock_result r, const struct lock_state *st,
			const struct lock_page *page)
{
	(void)ctx;
	(void)st;
	list_got = r;
	list_n = page ? page->n : 0;
	snprintf(list_cursor, sizeof(list_cursor), "%s", page && page->cursor ? page->cursor : "");
	page_first[0] = '\0';
	if (page && page->n) {
		const struct lock_entry *e = &page->locks[0];

		snprintf(page_first, sizeof(page_first), "%s %s %lld", e->name,
			 e->rw ? "rw" : "lock", (long long)e->ttl_ms);
		for (size_t i = 0; i < e->nholders; i++)
			snprintf(page_first + strlen(page_first), sizeof(page_first) - strlen(page_first),
				 " %s=%lld/%d", e->holders[i].owner, (long long)e->holders[i].holds,
				 (int)e->holders[i].side);
	}
}

/* A listing whose SCAN from cursor 77 is under way. */
static struct listing *listing_new(unsigned limit)
{
	struct listing *l = xcalloc(1, sizeof(*l));

	l->prefix = xstrdup("");
	l->pattern = xstrdup("*");
	strcpy(l->scan, "77");
	l->b = &B;
	l->count = LIST_SCAN_COUNT;
	l->limit = limit;
	l->v = xcalloc(limit, sizeof(*l->v));
	l->done = list_record;
	return l;
}

/* A listing that has SCANned "a" (and SCAN said it was the last batch),
 * asking lock_list about it. */
static struct listing *listing_at_a(unsigned limit)
{
	struct listing *l = listing_new(limit);

	strcpy(l->next, "0");
	l->names = xcalloc(1, sizeof(*l->names));
	l->names[0] = xstrdup("a");
	l->nnames = 1;
	l->inspecting = 1;
	l->bv = xcalloc(1, sizeof(*l->bv));
	return l;
}

/* lock_list answers r (freed here) about "a". */
static enum lock_result inspect_a(redisReply *r)
{
	list_got = LOCK_RESULT_COUNT;
	on_inspect(listing_at_a(5), r);
	if (r)
		freeReplyObject(r);
	return list_got;
}


static void test_locks__listing_decodes_locks_and_survives_any_answer(void **state)
{
	redisReply *err = reply_new(REDIS_REPLY_ERROR);

	(void)state;
	assert_int_equal(inspect_a(arr(1, arr(4, int_reply(1), int_reply(900), str_reply("w1"),
					      int_reply(2)))), LOCK_OK);
	assert_int_equal(list_n, 1);
	assert_string_equal(page_first, "a lock 900 w1=2/0");
	assert_string_equal(list_cursor, "");		/* the end */
	assert_int_equal(inspect_a(arr(1, arr(9, int_reply(2), int_reply(800), int_reply(2),
					      str_reply("r\x01"), int_reply(1), int_reply(1),
					      str_reply("w"), int_reply(1), int_reply(2)))), LOCK_OK);
	assert_string_equal(page_first, "a rw 800 r?=1/1 w=1/2");	/* no control bytes */
	assert_int_equal(inspect_a(arr(1, int_reply(0))), LOCK_OK);
	assert_int_equal(list_n, 0);

	/* no answer, Redis cannot serve, or anything else: never a crash */
	assert_int_equal(inspect_a(NULL), LOCK_BACKEND_DOWN);
	err->str = xstrdup("BUSY Redis is busy running a script");
	err->len = strlen(err->str);
	assert_int_equal(inspect_a(err), LOCK_BACKEND_DOWN);
	err = reply_new(REDIS_REPLY_ERROR);
	err->str = xstrdup("ERR something broke");
	err->len = strlen(err->str);
	assert_int_equal(inspect_a(err), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(int_reply(1)), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(0)), LOCK_SCRIPT_ERROR);		/* too few */
	assert_int_equal(inspect_a(arr(2, int_reply(0), int_reply(0))), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, int_reply(1))), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, str_reply("x"))), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, arr(1, int_reply(1)))), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, arr(3, int_reply(1), int_reply(9), str_reply("w")))),
			 LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, arr(4, int_reply(1), int_reply(9), int_reply(3),
					      int_reply(2)))), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, arr(4, int_reply(3), int_reply(9), str_reply("w"),
					      int_reply(2)))), LOCK_SCRIPT_ERROR);
	assert_int_equal(inspect_a(arr(1, arr(6, int_reply(2), int_reply(9), int_reply(7),
					      str_reply("w"), int_reply(1), int_reply(2)))),
			 LOCK_SCRIPT_ERROR);		/* no such mode */
	assert_int_equal(inspect_a(arr(1, arr(6, int_reply(2), int_reply(9), int_reply(1),
					      str_reply("w"), int_reply(1), int_reply(0)))),
			 LOCK_SCRIPT_ERROR);		/* no such side */
}

/* lock_list stops once it looked at LIST_HOLDS_MAX read holds: the names
 * it did not get to are asked about in the next call. */
static void test_locks__listing_asks_again_for_what_lock_list_left(void **state)
{
	struct listing *l;
	redisReply *r;

	(void)state;
	l = listing_new(5);
	canned = arr(1, arr(4, int_reply(1), int_reply(900), str_reply("w1"), int_reply(1)));
	canned_next[0] = arr(1, arr(4, int_reply(1), int_reply(800), str_reply("w2"),
				       int_reply(1)));
	ncanned_next = 1;
	r = arr(2, str_reply("0"), arr(2, str_reply("b"), str_reply("a")));
	list_got = LOCK_RESULT_COUNT;
	on_scan(l, r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_OK);
	assert_int_equal(list_n, 2);
	assert_string_equal(page_first, "a lock 900 w1=1/0");
	assert_string_equal(last_args[0], "1:b");	/* the second call: b alone */
	assert_string_equal(last_args[2], "512");	/* read holds one call looks at */
	assert_int_equal(ncanned_next, 0);

	/* an answer about more names than asked is the script failing */
	assert_int_equal(inspect_a(arr(2, int_reply(0), int_reply(0))), LOCK_SCRIPT_ERROR);
}

static void test_locks__listing_scan_answers(void **state)
{
	struct listing *l;
	redisReply *r;

	(void)state;
	/* the last batch, nothing in it that could be a lock's name */
	l = listing_new(5);
	r = arr(2, str_reply("0"), arr(3, int_reply(5), str_reply("bad name"), str_reply("a{x}")));
	list_got = LOCK_RESULT_COUNT;
	on_scan(l, r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_OK);
	assert_int_equal(list_n, 0);
	assert_string_equal(list_cursor, "");

	/* two locks for a page of one: SCAN again from the same cursor for
	 * fewer keys, and that batch fits */
	l = listing_new(1);
	canned = arr(2, arr(4, int_reply(1), int_reply(900), str_reply("w1"), int_reply(1)),
		     arr(4, int_reply(1), int_reply(800), str_reply("w2"), int_reply(1)));
	scans[0] = arr(2, str_reply("66"), arr(1, str_reply("a")));
	nscans = 1;
	r = arr(2, str_reply("55"), arr(2, str_reply("b"), str_reply("a")));
	list_got = LOCK_RESULT_COUNT;
	on_scan(l, r);		/* its lock_list call takes canned, its SCAN scans[0] */
	freeReplyObject(r);
	assert_string_equal(last_cursor, "77");		/* the same batch... */
	assert_string_equal(last_count, "250");		/* ...for half the room's worth */
	assert_int_equal(last_id, SCRIPT_LOCK_LIST);
	assert_string_equal(last_args[0], "1:a");
	assert_string_equal(last_args[1], "3:{a}");
	assert_int_equal(list_got, LOCK_BACKEND_DOWN);	/* the mock had no second answer */

	/* one bucket (COUNT 1) with two locks for a page of one: cut by name */
	l = listing_new(1);
	l->count = 1;
	canned = arr(2, arr(4, int_reply(1), int_reply(900), str_reply("w1"), int_reply(1)),
		     arr(4, int_reply(1), int_reply(800), str_reply("w2"), int_reply(1)));
	r = arr(2, str_reply("55"), arr(2, str_reply("b"), str_reply("a")));
	on_scan(l, r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_OK);
	assert_int_equal(list_n, 1);
	assert_string_equal(page_first, "a lock 900 w1=1/0");
	assert_string_equal(list_cursor, "77:a");
	assert_string_equal(last_args[0], "1:a1:b");
	assert_string_equal(last_args[1], "3:{a}3:{b}");

	/* a batch that fits: the page goes on from SCAN's next cursor, and
	 * ends full */
	l = listing_new(1);
	canned = arr(2, arr(4, int_reply(1), int_reply(900), str_reply("w1"), int_reply(1)),
		     int_reply(0));
	r = arr(2, str_reply("55"), arr(2, str_reply("b"), str_reply("a")));
	on_scan(l, r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_OK);
	assert_int_equal(list_n, 1);
	assert_string_equal(list_cursor, "55");

	/* malformed answers */
	r = arr(1, str_reply("0"));
	on_scan(listing_new(5), r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_SCRIPT_ERROR);
	r = arr(2, str_reply("12x"), arr(0));
	on_scan(listing_new(5), r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_SCRIPT_ERROR);
	r = arr(2, str_reply("123456789012345678901234567890"), arr(0));
	on_scan(listing_new(5), r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_SCRIPT_ERROR);
	r = arr(2, int_reply(0), arr(0));
	on_scan(listing_new(5), r);
	freeReplyObject(r);
	assert_int_equal(list_got, LOCK_SCRIPT_ERROR);
	on_scan(listing_new(5), NULL);
	assert_int_equal(list_got, LOCK_BACKEND_DOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_locks__key_uses_hash_tag),
		cmocka_unit_test(test_locks__keys_in_the_buffer_and_past_it),
		cmocka_unit_test(test_locks__name_with_brace_gets_no_extra_tag),
		cmocka_unit_test(test_locks__wait_channel_of_an_exclusive_lock),
		cmocka_unit_test(test_locks__acquire_passes_lock_token_and_holders_keys),
		cmocka_unit_test(test_locks__acquire_reentrant_principal_and_not_owner),
		cmocka_unit_test(test_locks__acquire_decodes_held_and_wrong_kind),
		cmocka_unit_test(test_locks__release_codes),
		cmocka_unit_test(test_locks__renewal_tells_the_waiters_its_lease_end),
		cmocka_unit_test(test_locks__backend_down_and_script_errors),
		cmocka_unit_test(test_locks__inspect_and_force_release),
		cmocka_unit_test(test_locks__inspect_of_a_fair_lock_lists_its_queue),
		cmocka_unit_test(test_locks__inspect_of_a_rwlock_indexes_writer_then_newest_reader),
		cmocka_unit_test(test_locks__new_and_ended_holdings_are_published),
		cmocka_unit_test(test_locks__watch_channels),
		cmocka_unit_test(test_locks__fair_lock_keys_and_per_owner_channel),
		cmocka_unit_test(test_locks__fair_refresh_sends_every_owner_in_one_argument),
		cmocka_unit_test(test_locks__fair_refresh_of_many_waiters_goes_in_short_scripts),
		cmocka_unit_test(test_locks__read_acquire_passes_the_caps_and_decodes_their_refusal),
		cmocka_unit_test(test_locks__queueing_acquires_pass_the_queue_cap_and_decode_queue_full),
		cmocka_unit_test(test_locks__rwlock_keys_follow_redissons_tag_rule),
		cmocka_unit_test(test_locks__rwlock_release_reports_whether_free),
		cmocka_unit_test(test_locks__held_says_why_and_not_a_lock_is_told_apart),
		cmocka_unit_test(test_locks__key_prefix_goes_before_every_name),
		cmocka_unit_test(test_locks__listing_pattern_and_cursor),
		cmocka_unit_test(test_locks__listing_decodes_locks_and_survives_any_answer),
		cmocka_unit_test(test_locks__listing_scan_answers),
		cmocka_unit_test(test_locks__listing_asks_again_for_what_lock_list_left),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
