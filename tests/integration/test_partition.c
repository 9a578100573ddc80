/* test_partition.c -- the fault suite's network partitions: Redis, each
 * dlockd and the clients in network namespaces of the test's own, joined
 * by links the test cuts (packets vanish: no RST, no ICMP, so dlockd can
 * only notice by its own timeouts), slows and makes lossy (netns.h), under
 * the continuous load of the grant checker (tests/harness/checker.c: no
 * overlap, no fencing token going back; here also every 503 asked about
 * again once it could no longer take effect, probe_503). Short in `make
 * test`, three times longer with DLOCKD_CHAOS=full (`make chaos`). Where
 * the process may not make namespaces (no CAP_SYS_ADMIN/CAP_NET_ADMIN, no
 * /dev/net/tun), every test here is skipped, saying why. Figures:
 * tests/RELIABILITY.md, "Partitions".
 *
 * The layout: Redis alone in its namespace (on its address and its own
 * loopback), each dlockd in one of its own, reaching Redis over a wire of
 * its own, and the clients in one or two namespaces with a wire to each
 * dlockd. The test's thread enters a namespace to start or to ask what is
 * in it, never through a wire it cuts. */
#include "../harness/checker.h"
#include "../harness/harness.h"
#include "../harness/netns.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_D 2
#define MAX_C 2

/* One test's namespaces, links and processes. */
struct world {
	struct netns *rns, *dns[MAX_D], *cns[MAX_C];
	struct wire *dr[MAX_D];			/* dlockd i to Redis */
	struct wire *cd[MAX_C][MAX_D];		/* clients j to dlockd i */
	struct redis_srv redis;
	struct dlockd_srv d[MAX_D];
	int nd, nc;
	const char *bases[MAX_D];
	char url[96];
	char prefix[160];
	struct load *load;
};

static struct world W;

/* Phase lengths: short in `make test`, three times longer in `make chaos`. */
static int phase_ms(int ms)
{
	return (chaos_full() ? 3 * ms : ms) * slow_factor();
}

/* Redis, nd dlockd with flags, nc client namespaces, every wire. 0: up; 1:
 * this machine cannot (the test is skipped, saying why); -1: a failed
 * CHECK said what. */
static int world_up(int nd, int nc, const char *const *flags)
{
	const char *why = netns_unavailable();
	char tag[24];

	memset(&W, 0, sizeof(W));
	if (why) {
		printf("# SKIP partitions: %s\n", why);
		test_skip("partitions: %s", why);
		return 1;
	}
	W.nd = nd;
	W.nc = nc;
	snprintf(W.prefix, sizeof(W.prefix), "%s", lockname("part"));
	if (!(W.rns = netns_new("redis")))
		return -1;
	for (int i = 0; i < nd; i++) {
		snprintf(tag, sizeof(tag), "dlockd%d", i);
		if (!(W.dns[i] = netns_new(tag)) || !(W.dr[i] = wire_new(W.dns[i], W.rns)))
			return -1;
	}
	for (int j = 0; j < nc; j++) {
		snprintf(tag, sizeof(tag), "clients%d", j);
		if (!(W.cns[j] = netns_new(tag)))
			return -1;
		for (int i = 0; i < nd; i++)
			if (!(W.cd[j][i] = wire_new(W.cns[j], W.dns[i])))
				return -1;
	}
	/* its own directory: its port is one of its namespace's, and may be
	 * that of a Redis elsewhere */
	snprintf(W.redis.dir, sizeof(W.redis.dir), "%s/redis-netns-%s", test_tmpdir(),
		 W.prefix);
	mkdir(W.redis.dir, 0755);
	netns_enter(W.rns);
	snprintf(W.redis.extra, sizeof(W.redis.extra), "--bind 127.0.0.1 %s --protected-mode no",
		 netns_addr(W.rns));
	if (redis_start(&W.redis) < 0) {
		netns_enter(NULL);
		test_fail(__FILE__, __LINE__, "redis-server in its namespace did not start");
		return -1;
	}
	snprintf(W.url, sizeof(W.url), "redis://%s:%d/0", netns_addr(W.rns), W.redis.port);
	for (int i = 0; i < nd; i++) {
		netns_enter(W.dns[i]);
		if (dlockd_start_at(&W.d[i], netns_addr(W.dns[i]), W.url, flags) < 0) {
			netns_enter(NULL);
			test_fail(__FILE__, __LINE__, "dlockd %d in its namespace did not start", i);
			return -1;
		}
		W.bases[i] = W.d[i].base;
	}
	netns_enter(NULL);
	return 0;
}

/* A test that cuts a link at a moment timed from its delay, against
 * dlockd's own fixed times: under valgrind (slow_factor()) dlockd's work
 * takes longer than the moments allow, so it is skipped, saying why. */
static bool timing_too_slow(void)
{
	if (slow_factor() == 1)
		return false;
	printf("# SKIP timed against dlockd's own fixed times: not under valgrind\n");
	test_skip("timed against dlockd's own fixed times: not under valgrind");
	return true;
}

/* Every wire as it was made: nothing cut, delayed or lost. */
static void heal_all(void)
{
	static const struct wire_conf clear;

	for (int i = 0; i < W.nd; i++) {
		if (W.dr[i])
			wire_set(W.dr[i], WIRE_BOTH, &clear);
		for (int j = 0; j < W.nc; j++)
			if (W.cd[j][i])
				wire_set(W.cd[j][i], WIRE_BOTH, &clear);
	}
}

static void world_down(void)
{
	if (W.load) {		/* a failed CHECK left it running: let it end */
		heal_all();
		load_stop(W.load);
		load_free(W.load);
	}
	for (int i = 0; i < W.nd; i++) {
		int rc = W.d[i].pid > 0 ? dlockd_stop(&W.d[i], 5000) : 0;

		if (rc != 0)	/* a sanitizer's or valgrind's finding, or a hang */
			test_fail(__FILE__, __LINE__, "dlockd %d exited with %d (see %s)", i, rc,
				  W.d[i].log);
	}
	redis_stop(&W.redis, false);
	netns_free_all();
	memset(&W, 0, sizeof(W));
}

static void start_load(int ttl_ms, int long_ms)
{
	struct load_opts o = {
		.prefix = W.prefix, .bases = W.bases, .nbases = W.nd,
		.clients = chaos_full() ? 32 : 16, .ttl_ms = ttl_ms, .wait_ms = 3000,
		.hold_max_ms = 20, .long_every = 6, .long_ms = long_ms,
		.nets = W.cns, .nnets = W.nc, .probe_503 = true,
	};

	W.load = load_start(&o);
}

static void stop_and_check(const char *what, struct load_report *rep)
{
	load_stop(W.load);
	load_check(W.load, false, rep);
	load_free(W.load);
	W.load = NULL;
	load_print(what, rep);
}

/* ----- Asking what is in a namespace (from inside it) ----- */

static double waiters_in(int i)
{
	double n;

	netns_enter(W.dns[i]);
	n = waiters_of(&W.d[i]);
	netns_enter(NULL);
	return n;
}

static long ready_status(int i)
{
	long st;

	netns_enter(W.dns[i]);
	st = status_of(&W.d[i], "GET", "/readyz");
	netns_enter(NULL);
	return st;
}

static bool waiters_gone(void)
{
	for (int i = 0; i < W.nd; i++)
		if (W.d[i].pid > 0 && waiters_in(i) != 0)
			return false;
	return true;
}

/* Keys and channels of the test's names in Redis; -1 if it did not say. */
static long long keys_left(void)
{
	redisContext *c;

	netns_enter(W.rns);
	c = redis_client(&W.redis);
	netns_enter(NULL);
	return redis_names_left(c, W.prefix);
}

/* Script calls Redis refused as late (DLOCKD_LATE: they reached it after
 * their deadline, after dlockd had given up on them); -1 if unknown. */
static long long late_calls(void)
{
	redisReply *r;
	const char *p;
	long long n = -1;

	netns_enter(W.rns);
	r = rcmd_on(&W.redis, "INFO errorstats");
	netns_enter(NULL);
	if (r && r->type == REDIS_REPLY_STRING)
		n = (p = strstr(r->str, "errorstat_DLOCKD_LATE:count=")) ?
			strtoll(p + strlen("errorstat_DLOCKD_LATE:count="), NULL, 10) : 0;
	if (r)
		freeReplyObject(r);
	return n;
}

static void print_wire(const char *what, const struct wire *w)
{
	struct wire_stats st;

	wire_stats(w, &st);
	printf("# wire %s: %ld packets passed, %ld vanished in the cut, %ld lost at random\n",
	       what, st.passed, st.cut, st.lost);
}

/* Nothing of the test's names may outlive the leases: no lock, queue
 * place, token counter or channel in Redis, no waiter in any dlockd. */
#define CHECK_SETTLED(within_ms) do { \
	CHECK(WAIT_FOR(keys_left() == 0, (within_ms)), \
	      "%lld keys/channels of the test's names left in Redis", keys_left()); \
	CHECK(WAIT_FOR(waiters_gone(), 5000), "waiters left in a dlockd"); \
	} while (0)

/* The checker's promises, and every 503 without effect. */
#define CHECK_SAFE(rep, min_grants) do { \
	CHECK((rep).grants > (min_grants), "the load ran (%ld grants)", (rep).grants); \
	CHECK((rep).overlaps == 0, "%ld overlapping critical sections", (rep).overlaps); \
	CHECK((rep).token_regressions == 0, "%ld fencing tokens went backwards", \
	      (rep).token_regressions); \
	CHECK((rep).acq_other == 0, "%ld acquires answered neither 200, 409 nor 503", \
	      (rep).acq_other); \
	CHECK((rep).probe_503_effects == 0, "%ld answers 503 took effect", \
	      (rep).probe_503_effects); \
	} while (0)

/* Let the load run calm_ms, then wait (bounded) until clients of group
 * hold long and wait: how many did when last looked at (both non-zero
 * unless the wait ran out)? The two hold names change hands every long
 * hold: 20 s are several chances for a client of the group. */
static bool holding_and_waiting(int calm_ms, int group, int *acquiring, int *holding)
{
	sleep_ms(phase_ms(calm_ms));
	return WAIT_FOR((load_doing(W.load, group, acquiring, holding), *acquiring && *holding),
			20000);
}

static bool run_until_holding_and_waiting(int calm_ms, int group)
{
	int acquiring, holding;

	return holding_and_waiting(calm_ms, group, &acquiring, &holding);
}

/* ----- 1. dlockd cut from Redis while its clients hold and wait ----- */

static void dlockd_cut_from_redis(void)
{
	struct load_report rep;
	struct bg ready;
	int64_t t0, asked, healed;
	long long late0, late;
	int rc = world_up(1, 1, NULL), cut_ms = phase_ms(3000);

	if (rc)
		return;
	start_load(3000, 6000);
	CHECK(run_until_holding_and_waiting(1500, 0), "clients hold long and wait");
	CHECK(WAIT_FOR(waiters_in(0) > 0, 5000), "requests wait (%g waiters; %ld grants)",
	      waiters_in(0), load_grants(W.load));
	late0 = late_calls();
	load_event_begin(W.load);
	wire_cut(W.dr[0], true);
	t0 = mono_ms();
	/* the load sent calls at once; 2 s later dlockd gives up on its
	 * connection (the command timeout) and answers new calls 503 at
	 * once. /readyz asks Redis (PING) on the connection of the thread
	 * that takes it: one with nothing sent since the cut waits for the
	 * PING's answer (up to 10 s, or the heal) */
	sleep_ms(2500 * slow_factor());
	netns_enter(W.dns[0]);
	asked = mono_ms();
	bg_start_on(&ready, W.d[0].base, "GET", "/readyz", NULL);
	netns_enter(NULL);
	sleep_ms(cut_ms - (int)(mono_ms() - t0));
	wire_cut(W.dr[0], false);
	healed = mono_ms();
	load_event_end(W.load);
	sleep_ms(phase_ms(5000));
	stop_and_check("dlockd cut from Redis", &rep);
	bg_join(&ready);
	late = late_calls();
	print_wire("dlockd-redis", W.dr[0]);
	printf("# /readyz asked 2.5 s into the cut: %ld after %lld ms (%s the heal); Redis "
	       "refused %lld calls as late after the heal\n", ready.r.status,
	       (long long)(ready.done_ms - asked), ready.done_ms < healed ? "before" : "after",
	       late - late0);
	http_free(&ready.r);
	CHECK_SAFE(rep, 50);
	/* only dlockd's own timeouts can answer 503 here: nothing came back */
	CHECK(rep.acq_unavailable > 0, "dlockd noticed the cut by itself: acquires answered 503");
	CHECK(rep.grants_after_event > 20, "locks are granted again after the heal (%ld)",
	      rep.grants_after_event);
	CHECK_SETTLED(10000);
}

TEST(chaos_partition_dlockd_cut_from_redis_while_clients_hold_and_wait)
{
	dlockd_cut_from_redis();
	world_down();
}

/* ----- 2. clients cut from dlockd mid-wait and mid-heartbeat ----- */

static void clients_cut(void)
{
	struct load_report rep;
	int acquiring, holding;
	int rc = world_up(1, 2, NULL);

	if (rc)
		return;
	/* group 0 (clients0) is cut for good; group 1 goes on */
	start_load(2000, 4000);
	CHECK(holding_and_waiting(1500, 0, &acquiring, &holding), "clients of the side to cut "
	      "hold long (%d) and wait (%d)", holding, acquiring);
	load_event_begin(W.load);
	wire_cut(W.cd[0][0], true);
	load_event_end(W.load);
	printf("# cut: %d clients of the cut side were in an acquire, %d holding long\n",
	       acquiring, holding);
	sleep_ms(phase_ms(4000));
	load_stop_group(W.load, 0);	/* they give up on their requests */
	wire_cut(W.cd[0][0], false);	/* what was under way meets closed sockets */
	stop_and_check("clients cut from dlockd", &rep);
	print_wire("clients0-dlockd", W.cd[0][0]);
	CHECK_SAFE(rep, 50);
	CHECK(rep.grants_after_event > 50, "the other clients go on (%ld grants)",
	      rep.grants_after_event);
	/* a lock granted into the cut is free at its lease end (2 s), and
	 * so is one held by a client cut mid-heartbeat; a waiter then gets
	 * it at once, though that may be another cut client, still waiting
	 * in dlockd (up to its wait_ms, 3 s, after the cut): 5 s at most,
	 * and some margin for a busy machine */
	CHECK(rep.max_gap_after_event_ms < 5000 + 2000 * slow_factor(),
	      "no name blocked past the cut clients' waits and leases (%lld ms)",
	      (long long)rep.max_gap_after_event_ms);
	CHECK_SETTLED(10000);
}

TEST(chaos_partition_clients_cut_from_dlockd_mid_wait_and_mid_heartbeat)
{
	clients_cut();
	world_down();
}

/* ----- 3. one dlockd of two cut from Redis while the other serves ----- */

static const char *const quick_queue[] = { "--queue-ttl-ms", "2000", NULL };

static void one_of_two_cut(void)
{
	struct load_report rep;
	int rc = world_up(2, 1, quick_queue), cut_ms = phase_ms(4000);

	if (rc)
		return;
	start_load(2000, 3000);
	CHECK(run_until_holding_and_waiting(2000, 0), "clients hold long and wait");
	load_event_begin(W.load);
	wire_cut(W.dr[0], true);
	sleep_ms(cut_ms);
	wire_cut(W.dr[0], false);
	load_event_end(W.load);
	sleep_ms(phase_ms(4000));
	stop_and_check("one dlockd of two cut from Redis", &rep);
	print_wire("dlockd0-redis", W.dr[0]);
	CHECK_SAFE(rep, 50);
	CHECK(rep.grants_during_event_by_base[1] > 20, "the other dlockd serves during the cut "
	      "(%ld grants through it)", rep.grants_during_event_by_base[1]);
	CHECK(rep.grants_after_event > 50, "locks are granted after the heal (%ld)",
	      rep.grants_after_event);
	/* a connection with a call sent into the cut is overdue until that
	 * call's answer comes (TCP resends it after the heal, on its backoff)
	 * or 10 s after its sending */
	CHECK(WAIT_FOR(ready_status(0) == 200, 15000), "the cut dlockd is ready again");
	CHECK_SETTLED(10000);
}

TEST(chaos_partition_one_dlockd_of_two_cut_from_redis)
{
	one_of_two_cut();
	world_down();
}

/* ----- 4. a partition that heals after the leases ran out ----- */

static void heals_after_leases(void)
{
	struct load_report rep;
	long long late0, late;
	int rc = world_up(1, 1, NULL), cut_ms = phase_ms(4000);

	if (rc)
		return;
	start_load(1000, 2500);
	CHECK(run_until_holding_and_waiting(1500, 0), "clients hold long and wait");
	late0 = late_calls();
	load_event_begin(W.load);
	wire_cut(W.dr[0], true);
	/* four leases; in make chaos twelve, and longer than dlockd waits
	 * for an answer (10 s): it gives its connection up in the cut */
	sleep_ms(cut_ms);
	wire_cut(W.dr[0], false);
	load_event_end(W.load);
	sleep_ms(phase_ms(5000));
	stop_and_check("partition healed after the leases ran out", &rep);
	late = late_calls();
	print_wire("dlockd-redis", W.dr[0]);
	printf("# Redis refused %lld calls as late\n", late - late0);
	CHECK_SAFE(rep, 50);
	CHECK(rep.ran_out > 0, "holders' leases ran out in the cut (%ld)", rep.ran_out);
	CHECK(rep.grants_after_event > 50, "locks are granted again after the heal (%ld)",
	      rep.grants_after_event);
	CHECK(rep.straddled_kept == 0, "no lease outlived the cut (%ld kept)", rep.straddled_kept);
	CHECK_SETTLED(10000);
}

TEST(chaos_partition_heals_after_the_leases_ran_out)
{
	heals_after_leases();
	world_down();
}

/* ----- 5. a slow, lossy link between dlockd and Redis under load ----- */

static void slow_lossy_link(void)
{
	struct load_report rep;
	struct wire_conf bad = { .delay_ms = 200, .jitter_ms = 100, .loss_pct = 5 };
	struct wire_conf good = { 0 };
	long long late0;
	int rc = world_up(1, 1, NULL);

	if (rc)
		return;
	start_load(3000, 6000);
	sleep_ms(phase_ms(1000));
	late0 = late_calls();
	load_event_begin(W.load);
	wire_set(W.dr[0], WIRE_BOTH, &bad);
	sleep_ms(phase_ms(6000));
	wire_set(W.dr[0], WIRE_BOTH, &good);
	load_event_end(W.load);
	sleep_ms(phase_ms(2000));
	stop_and_check("200 ms ± 100 ms and 5 % loss each way between dlockd and Redis", &rep);
	print_wire("dlockd-redis", W.dr[0]);
	printf("# Redis refused %lld calls as late\n", late_calls() - late0);
	CHECK_SAFE(rep, 50);
	/* a few a second at best: every call is a round trip of 400 ms
	 * or more, and a lost packet is resent after a second or so */
	CHECK(rep.grants_during_event > 0, "locks are granted over the bad link (%ld)",
	      rep.grants_during_event);
	CHECK_SETTLED(10000);
}

TEST(chaos_partition_slow_lossy_link_between_dlockd_and_redis)
{
	slow_lossy_link();
	world_down();
}

/* ----- 6. a session's heartbeat over a slow link -----
 *
 * These tests time a link's delay d against dlockd's own fixed times (a
 * call's 1.5 s deadline, its 2 s and 10 s waits for an answer), so d is
 * not stretched by slow_factor() under valgrind; only their leases are. */

/* From the clients' namespace: a session of ttl ms (its id into sid)
 * holding plain lock n, through dlockd 0 (a failed CHECK: test_failed()). */
static void session_holding(int ttl, const char *n, char *sid, size_t size)
{
	char path[300];
	struct http_resp r;

	snprintf(path, sizeof(path), "/sessions?ttl_ms=%d", ttl);
	http_on(W.bases[0], "POST", path, NULL, &r);
	CHECK_STATUS(r, 201, "a session");
	snprintf(sid, size, "%s", json_str(&r, "session") ? json_str(&r, "session") : "");
	http_free(&r);
	snprintf(path, sizeof(path), "/locks/%s?session=%s", n, sid);
	http_on(W.bases[0], "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "the session takes its lock");
	http_free(&r);
}

/* PTTL of lock n and of session sid, asked in Redis' namespace. */
static void session_left_in_redis(const char *n, const char *sid, long long *lock_left,
				  long long *session_left)
{
	netns_enter(W.rns);
	*lock_left = rcmd_int_on(&W.redis, "PTTL %s", n);
	*session_left = rcmd_int_on(&W.redis, "PTTL dlockd_session:{%s}", sid);
	netns_enter(NULL);
}

/* A session's heartbeat renews the session (one script), then, once that
 * is answered, its holdings (one script a slot), each to ttl_ms from when
 * it runs. Answers slow to come back from Redis put the holdings' script
 * d ms after the session's, and a holding renewed to ttl_ms from there
 * outlasted its session by d (found by a probe with Redis stopped between
 * the two). The holdings' renewal is bounded by the session's end in
 * Redis' clock: a holding never ends after its session. */
static void session_heartbeat_slow_answers(void)
{
	int d = 800, ttl = 3000 * slow_factor();
	struct wire_conf slow = { .delay_ms = d };
	const char *n = lockname("sessslow");
	char path[300], sid[64];
	struct http_resp r;
	long long lock_left, session_left, lease;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	session_holding(ttl, n, sid, sizeof(sid));
	if (test_failed()) {
		netns_enter(NULL);
		return;
	}

	wire_set(W.dr[0], WIRE_BA, &slow);	/* Redis' answers, d late */
	snprintf(path, sizeof(path), "/sessions/%s/heartbeat", sid);
	http_on(W.bases[0], "POST", path, NULL, &r);
	netns_enter(NULL);
	session_left_in_redis(n, sid, &lock_left, &session_left);
	lease = json_int(&r, "lease_ms");
	printf("# a session heartbeat, Redis' answers %d ms late (ttl_ms %d): %ld, lease_ms "
	       "%lld; then the session's PTTL %lld, its lock's %lld\n", d, ttl, r.status, lease,
	       session_left, lock_left);
	CHECK_STATUS(r, 200, "the heartbeat");
	http_free(&r);
	CHECK(lock_left > 0 && lock_left <= session_left + 5,
	      "the holding ends with its session, not after (PTTL %lld, the session's %lld)",
	      lock_left, session_left);
	/* the PTTL is read after the answer: later, under valgrind much later */
	CHECK(lease > 0 && lease <= session_left + 5 * slow_factor(),
	      "lease_ms %lld is no more than the session has (%lld)", lease, session_left);
}

TEST(chaos_partition_a_session_heartbeat_with_slow_answers_never_outlives_the_session)
{
	session_heartbeat_slow_answers();
	world_down();
}

/* Two heartbeats of one session: A through a dlockd whose link to Redis
 * is slow both ways, B through another soon after. A's holdings' script
 * runs last, bounded by A's session end, earlier than B's: it must not
 * cut the holdings to it, or they end before the lease B's client was
 * answered, and another owner takes one while B's client counts on it
 * (found by a probe). A session's renewal only lengthens a holding. */
static void session_heartbeat_late_renewal(void)
{
	/* A's calls take 2d each: d = 400 leaves 1.2 s of the 2 s after which
	 * dlockd gives a call up, and its script reaches Redis 1.1 s before
	 * its deadline (d = 800, then 600, left 400 and 800 ms, which a loaded
	 * 2-core CI machine used up twice: A answered 503). A's session script
	 * runs at d, its holdings' at 3d; B is sent at 2d, d from either. */
	int d = 400, ttl = 5000 * slow_factor();
	struct wire_conf slow = { .delay_ms = d };
	const char *n = lockname("sesslate");
	char path[300], sid[64];
	struct http_resp r;
	struct bg late;
	long long lock_left, session_left;
	int64_t a_sent;

	if (timing_too_slow())
		return;
	if (world_up(2, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	session_holding(ttl, n, sid, sizeof(sid));
	if (test_failed()) {
		netns_enter(NULL);
		return;
	}

	wire_set(W.dr[0], WIRE_BOTH, &slow);
	snprintf(path, sizeof(path), "/sessions/%s/heartbeat", sid);
	a_sent = mono_ms();
	bg_start_on(&late, W.bases[0], "POST", path, NULL);	/* A, through the slow one */
	sleep_ms(2 * d);	/* the timing under test: A's session renewed, its holdings not yet */
	http_on(W.bases[1], "POST", path, NULL, &r);	/* B */
	CHECK_STATUS(r, 200, "B, through the other dlockd");
	http_free(&r);
	bg_join(&late);
	netns_enter(NULL);
	session_left_in_redis(n, sid, &lock_left, &session_left);
	printf("# heartbeat A over a %d ms link, B through another dlockd: A %ld after %lld ms; "
	       "then the session's PTTL %lld, its lock's %lld\n", d, late.r.status,
	       (long long)(late.done_ms - a_sent), session_left, lock_left);
	CHECK_STATUS(late.r, 200, "A, through the slow one");
	http_free(&late.r);
	CHECK(lock_left >= session_left - 5 && lock_left <= session_left + 5,
	      "the holding lasts as long as B renewed the session (PTTL %lld, the session's %lld)",
	      lock_left, session_left);
}

TEST(chaos_partition_a_late_session_heartbeat_never_cuts_a_later_ones_holdings)
{
	session_heartbeat_late_renewal();
	world_down();
}

/* From the clients' namespace: a session of ttl ms through dlockd 0, its
 * id into sid. */
static void new_session(int ttl, char *sid, size_t size)
{
	char path[64];
	struct http_resp r;

	snprintf(path, sizeof(path), "/sessions?ttl_ms=%d", ttl);
	http_on(W.bases[0], "POST", path, NULL, &r);
	CHECK_STATUS(r, 201, "a session");
	snprintf(sid, size, "%s", json_str(&r, "session") ? json_str(&r, "session") : "");
	http_free(&r);
}

/* From the clients' namespace: a session of 60 s through dlockd 0, its id
 * into sid, and name b held by another owner for 60 s. */
static void session_and_blocker(const char *b, char *sid, size_t size)
{
	char path[300];
	struct http_resp r;

	new_session(60000, sid, size);
	snprintf(path, sizeof(path), "/locks/%s?owner=other&ttl_ms=60000", b);
	http_on(W.bases[0], "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "another owner holds the blocker");
	http_free(&r);
}

/* The body of a multi-lock of plain locks a and b. */
static void two_locks_body(const char *a, const char *b, char *body, size_t size)
{
	snprintf(body, size, "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s\"}]}", a, b);
}

static long long exists_in_redis(const char *n)
{
	long long v;

	netns_enter(W.rns);
	v = rcmd_int_on(&W.redis, "EXISTS %s", n);
	netns_enter(NULL);
	return v;
}

/* End session sid (from the clients' namespace): a, which it held, is
 * free after. */
static void session_end_frees(const char *sid, const char *a)
{
	char path[96];
	struct http_resp r;

	netns_enter(W.cns[0]);
	snprintf(path, sizeof(path), "/sessions/%s", sid);
	http_on(W.bases[0], "DELETE", path, NULL, &r);
	netns_enter(NULL);
	CHECK_STATUS(r, 200, "the session ends");
	http_free(&r);
	CHECK(exists_in_redis(a) == 0, "after the session's end, %s is free", a);
}

/* Wait (up to 6 s) for the cut_on of the way to Redis to fire; keep it
 * cut hold_ms more, then heal every way and wait for b's answer. Whether
 * it fired. */
static bool cut_fired_then_healed(struct bg *b, int hold_ms)
{
	static const struct wire_conf clear;
	bool fired = false;

	for (int i = 0; i < 300 && !(fired = wire_cut_fired(W.dr[0], WIRE_AB)); i++)
		sleep_ms(20);
	if (fired)
		sleep_ms(hold_ms);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	bg_join(b);
	return fired;
}

/* ----- 7. a multi-lock's take-back that Redis gets late ----- */

/* A multi-lock of a and b for a session, b held by another owner: a is
 * taken, b refused, a released again before the answer, 409 "nothing of
 * this request is held". Here the release of a reaches Redis late: over a
 * slow link (d each way), the direction towards Redis is cut by the
 * release itself (the first packet naming lock_undo) for 1.5 s. Redis
 * refused it as late, dlockd logged "it ends with its lease" and still
 * answered that nothing was held, while a stood for its whole lease,
 * keeping every other client out (found by a probe, over a slow link;
 * also a 503). The take-back is now tried again until Redis takes it:
 * once answered, a is free. The cut used to be timed by the clock (at
 * 5.5 d); a 2-core CI machine once fell behind it and cut b's refusal
 * instead (503), so the wire now cuts on what is sent. */
static void multilock_late_take_back(void)
{
	int d = 100;
	struct wire_conf slow = { .delay_ms = d },
			 cut_at_undo = { .delay_ms = d, .cut_on = "lock_undo" };
	const char *a = lockname("mlback-a"), *b = lockname("mlback-b");
	char body[600], path[300], sid[64];
	struct bg w;
	long long a_held;
	bool fired = false;

	if (timing_too_slow())
		return;
	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	session_and_blocker(b, sid, sizeof(sid));

	wire_set(W.dr[0], WIRE_BA, &slow);
	wire_set(W.dr[0], WIRE_AB, &cut_at_undo);
	two_locks_body(a, b, body, sizeof(body));
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	bg_start_on(&w, W.bases[0], "PUT", path, body);
	netns_enter(NULL);
	/* the session read, a's grant, b's refusal: 2d each; a's release then */
	fired = cut_fired_then_healed(&w, 1500);
	a_held = exists_in_redis(a);
	printf("# a multi-lock refused by b, a's take-back cut on its way for 1.5 s: %ld %s; "
	       "a held after: %lld; late calls: %lld\n", w.r.status, json_str(&w.r, "error"),
	       a_held, late_calls());
	{
		struct wire_stats ws;

		wire_stats(W.dr[0], &ws);
		printf("# wire dlockd-redis: %ld passed, %ld cut, %ld lost\n", ws.passed, ws.cut, ws.lost);
	}
	CHECK(fired, "a's take-back (lock_undo) went towards Redis within 6 s");
	CHECK(w.r.status == 409 && json_str(&w.r, "error") &&
	      !strcmp(json_str(&w.r, "error"), "locked"), "409 locked (b): %ld %s", w.r.status,
	      w.r.body ? w.r.body : "");
	http_free(&w.r);
	CHECK(a_held == 0, "a is not held once the answer says nothing of the request is");
}

TEST(chaos_partition_a_multilock_takes_back_what_it_took_even_when_redis_gets_it_late)
{
	multilock_late_take_back();
	world_down();
}

/* ----- 8. a session's single grant it could not record ----- */

/* PUT /locks/{name}?session=: the session read, the grant, then its
 * record in the session. Here the link towards Redis becomes slower than
 * a call's deadline (1.5 s) just after the grant went: the record reaches
 * Redis late and changes nothing, so the grant is given back -- and that
 * release was late too, sent without waiting for its answer, and the
 * request answered 503 "nothing changed" while the lock stood for the
 * session's whole lease. The take-back is now waited for: a 503 that
 * says nothing changed leaves nothing held; one whose take-back Redis
 * could not be told of says so ("undone": false). */
static void session_grant_unrecorded(void)
{
	int d = 300;
	struct wire_conf slow = { .delay_ms = d }, slower = { .delay_ms = 1800 + d };
	static const struct wire_conf clear;
	const char *n = lockname("sessunrec");
	char path[300], sid[64];
	struct bg w;
	long long held;
	bool says_undone_false;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	new_session(60000, sid, sizeof(sid));
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	snprintf(path, sizeof(path), "/locks/%s?session=%s", n, sid);
	/* the session read at 2d, the grant sent then and run at 3d */
	bg_start_on(&w, W.bases[0], "PUT", path, NULL);
	netns_enter(NULL);
	sleep_ms(3 * d + d / 3);
	wire_set(W.dr[0], WIRE_AB, &slower);
	bg_join(&w);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	sleep_ms(500);
	held = exists_in_redis(n);
	says_undone_false = w.r.json && json_is_false(json_object_get(w.r.json, "undone"));
	printf("# a grant for a session whose record reached Redis late: %ld %s%s; held after: "
	       "%lld; late calls: %lld\n", w.r.status, json_str(&w.r, "error"),
	       says_undone_false ? " (undone: false)" : "", held, late_calls());
	CHECK(w.r.status == 503, "503: the record did not happen: %ld %s", w.r.status,
	      w.r.body ? w.r.body : "");
	CHECK(held == 0 || says_undone_false, "a 503 that says nothing changed leaves the lock "
	      "free (held: %lld): %s", held, w.r.body ? w.r.body : "");
	http_free(&w.r);
}

TEST(chaos_partition_a_session_grant_it_could_not_record_is_taken_back_or_said_to_stand)
{
	session_grant_unrecorded();
	world_down();
}

/* A grant for a session (PUT with session=) is given the session's lease
 * left as its lease, read one call before. A call that reaches Redis late
 * then counts that lease from later: here the way to Redis is d slow, and
 * the holding outlived its session by about d, its lock kept from the
 * others after the session's end (found by a probe). The grant's lease is
 * bounded by the session's end in Redis' clock: it ends with its session,
 * not after. Multi-locks the same (their grants go the same way). A grant
 * that may have waited (wait_ms) is renewed to the session's lease once
 * recorded: that renewal, relative too, outlived the session by d (found
 * by the next probe); it is bounded by the end the record read. */
static void session_grant_late_ends_with_its_session(void)
{
	int d = 800;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	const char *n = lockname("sessbound"), *m = lockname("sessbound-m");
	const char *w = lockname("sessbound-w");
	char path[300], body[600], sid[64];
	struct http_resp r;
	long long lock_left, session_left, multi_left, waited_left;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	new_session(20000 * slow_factor(), sid, sizeof(sid));
	wire_set(W.dr[0], WIRE_AB, &slow);
	snprintf(path, sizeof(path), "/locks/%s?session=%s", n, sid);
	http_on(W.bases[0], "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "the session's grant");
	http_free(&r);
	two_locks_body(m, lockname("sessbound-n"), body, sizeof(body));
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	http_on(W.bases[0], "PUT", path, body, &r);
	CHECK_STATUS(r, 200, "the session's multi-lock");
	http_free(&r);
	snprintf(path, sizeof(path), "/locks/%s?session=%s&wait_ms=%d", w, sid,
		 10000 * slow_factor());
	http_on(W.bases[0], "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "the session's grant that may have waited");
	http_free(&r);
	netns_enter(NULL);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	session_left_in_redis(n, sid, &lock_left, &session_left);
	netns_enter(W.rns);
	multi_left = rcmd_int_on(&W.redis, "PTTL %s", m);
	waited_left = rcmd_int_on(&W.redis, "PTTL %s", w);
	netns_enter(NULL);
	printf("# grants for a session over a way to Redis %d ms slow: the session's PTTL %lld, "
	       "the single grant's %lld, the multi-lock's %lld, the one that may have waited "
	       "%lld\n", d, session_left, lock_left, multi_left, waited_left);
	CHECK(waited_left > 0 && waited_left <= session_left + 5, "a grant that may have waited "
	      "ends with its session, not after (PTTL %lld, the session's %lld)", waited_left,
	      session_left);
	CHECK(lock_left > 0 && lock_left <= session_left + 5, "the single grant ends with its "
	      "session, not after (PTTL %lld, the session's %lld)", lock_left, session_left);
	CHECK(multi_left > 0 && multi_left <= session_left + 5, "the multi-lock's grant ends with "
	      "its session, not after (PTTL %lld, the session's %lld)", multi_left, session_left);
}

TEST(chaos_partition_a_session_grant_redis_runs_late_ends_with_its_session)
{
	session_grant_late_ends_with_its_session();
	world_down();
}

/* A multi-lock that waited for a lock in its way takes it with the
 * session's lease left as the wait began, bounded by the session's end;
 * with the whole set taken, it reads its session and cuts a lock granted
 * longer than the session's lease left to that (a relative lease, sent
 * over a way d slow), bounded by the end that read gave. Either way the
 * lock it waited for ends with its session, not d after. */
static void multilock_waited_lock_ends_with_its_session(void)
{
	int d = 800;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	const char *a = lockname("mlcut-a"), *b = lockname("mlcut-b");
	char path[300], body[600], sid[64];
	struct http_resp r;
	struct bg w;
	long long lock_left, session_left;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	session_and_blocker(b, sid, sizeof(sid));
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s\"}],\"wait_ms\":%d}", a, b,
		 30000 * slow_factor());
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	bg_start_on(&w, W.bases[0], "PUT", path, body);
	netns_enter(NULL);
	sleep_ms(1000);		/* it waits for b */
	wire_set(W.dr[0], WIRE_AB, &slow);
	netns_enter(W.cns[0]);
	snprintf(path, sizeof(path), "/locks/%s?owner=other", b);
	http_on(W.bases[0], "DELETE", path, NULL, &r);
	CHECK_STATUS(r, 200, "the lock in the way released");
	http_free(&r);
	netns_enter(NULL);
	bg_join(&w);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	CHECK(w.r.status == 200, "the multi-lock took the set once b was free: %ld %s",
	      w.r.status, w.r.body ? w.r.body : "");
	session_left_in_redis(b, sid, &lock_left, &session_left);
	printf("# a multi-lock that waited, over a way to Redis %d ms slow: the session's PTTL "
	       "%lld, the lock it waited for %lld\n", d, session_left, lock_left);
	CHECK(lock_left > 0 && lock_left <= session_left + 5, "the lock it waited for ends with "
	      "its session, not after (PTTL %lld, the session's %lld)", lock_left, session_left);
	http_free(&w.r);
}

TEST(chaos_partition_a_multilock_lock_it_waited_for_ends_with_its_session)
{
	multilock_waited_lock_ends_with_its_session();
	world_down();
}

/* ----- 9. a multi-lock's take-back beside the session's other calls ----- */

/* A multi-lock A of {a, b}, b in the way, and a single acquire B of a
 * with session= of the same session, whose grant runs between A's grant
 * and A's take-back: B is answered 200 (a repeat of the session's
 * holding). A's take-back released a, whatever B had been told, and
 * another owner could take it while B's client worked (found by a probe).
 * The take-back undoes A's own grant, only while it is the holding's last
 * change: B's answer stands. */
static void multilock_take_back_spares_a_later_call(void)
{
	int d = 300;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	const char *a = lockname("mlspare-a"), *b = lockname("mlspare-b");
	char body[600], path[300], single[300], sid[64];
	struct bg wa, wb;
	long long held;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	session_and_blocker(b, sid, sizeof(sid));
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	two_locks_body(a, b, body, sizeof(body));
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	snprintf(single, sizeof(single), "/locks/%s?session=%s", a, sid);
	/* A: the session read runs at d, a's grant at 3d, b's refusal at 5d,
	 * the take-back at 7d; B: its session read at 3d, its grant at 5d */
	bg_start_on(&wa, W.bases[0], "PUT", path, body);
	sleep_ms(2 * d);
	bg_start_on(&wb, W.bases[0], "PUT", single, NULL);
	netns_enter(NULL);
	bg_join(&wa);
	bg_join(&wb);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	held = exists_in_redis(a);
	printf("# multi-lock A refused by b: %ld %s; B, a with session= meanwhile: %ld; a held "
	       "after: %lld\n", wa.r.status, json_str(&wa.r, "error"), wb.r.status, held);
	CHECK(wa.r.status == 409, "A: 409 locked (b): %ld %s", wa.r.status,
	      wa.r.body ? wa.r.body : "");
	CHECK(wb.r.status == 200, "B: 200: %ld %s", wb.r.status, wb.r.body ? wb.r.body : "");
	CHECK(wb.r.status != 200 || held == 1, "a, which B was granted, is still held");
	http_free(&wa.r);
	http_free(&wb.r);
}

TEST(chaos_partition_a_multilock_take_back_spares_what_a_later_call_of_the_session_was_granted)
{
	multilock_take_back_spares_a_later_call();
	world_down();
}

/* The holdings the session lists (-1: no answer). */
static long session_listed(const char *sid)
{
	char path[96];
	struct http_resp r;
	json_t *h;
	long n;

	snprintf(path, sizeof(path), "/sessions/%s", sid);
	http_on(W.bases[0], "GET", path, NULL, &r);
	h = r.json ? json_object_get(r.json, "holdings") : NULL;
	n = r.status == 200 && json_is_array(h) ? (long)json_array_size(h) : -1;
	http_free(&r);
	return n;
}

/* Is kind's n held in Redis: its key there (a semaphore's: a permit)? */
static long long kind_held_in_redis(const char *kind, const char *n)
{
	long long v;

	if (strcmp(kind, "semaphore"))
		return exists_in_redis(n);
	netns_enter(W.rns);
	v = rcmd_int_on(&W.redis, "ZCARD {%s}:timeout", n);
	netns_enter(NULL);
	return v;
}

/* From the clients' namespace: semaphore n of one permit, which another
 * owner holds. A multi-lock takes its locks in kind order, semaphores
 * last: one of a set whose other entry is named before it is tried after
 * that one. */
static void blocked_semaphore(const char *n)
{
	char path[300];
	struct http_resp r;

	snprintf(path, sizeof(path), "/semaphores/%s?owner=other&limit=1&ttl_ms=60000", n);
	http_on(W.bases[0], "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "another owner holds the only permit");
	http_free(&r);
}

/* The body of a multi-lock of a (of kind) and semaphore b (one permit). */
static void kind_and_semaphore_body(const char *kind, const char *a, const char *b, char *body,
				    size_t size)
{
	snprintf(body, size, "{\"locks\":[{\"kind\":\"%s\",\"name\":\"%s\"%s},"
		 "{\"kind\":\"semaphore\",\"name\":\"%s\",\"limit\":1}]}", kind, a,
		 strcmp(kind, "semaphore") ? "" : ",\"limit\":1", b);
}

/* A multi-lock of {a of kind, b}, b in the way, and the session's
 * heartbeat between a's grant (recorded in the session at once) and its
 * take-back. The heartbeat's renewal of a numbered a change of the
 * holding, so the take-back's undo read it as a later call's and left a
 * held and listed, while the multi-lock answered that nothing of it was
 * held (a probe). A session's heartbeat is no call that was answered a
 * holding: the take-back undoes a's grant all the same. */
static void multilock_take_back_after_a_heartbeat(const char *kind, const char *sid)
{
	int d = 500;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	char a[200], b[200], body[600], path[300], beat[300];
	struct http_resp r;
	struct bg w;
	long long held;
	long listed;

	snprintf(a, sizeof(a), "%s-%s", lockname("mlbeat-a"), kind);
	snprintf(b, sizeof(b), "%s-%s", lockname("mlbeat-b"), kind);
	netns_enter(W.cns[0]);	/* exists_in_redis leaves it */
	blocked_semaphore(b);	/* tried after a */
	kind_and_semaphore_body(kind, a, b, body, sizeof(body));
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	snprintf(beat, sizeof(beat), "/sessions/%s/heartbeat", sid);
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	/* the multi-lock, through dlockd 0: the session read runs at d, a's
	 * grant at 3d, its record and b's refusal at 5d, the take-back at 7d;
	 * the heartbeat, through dlockd 1 (its way to Redis clear), at 6d */
	bg_start_on(&w, W.bases[0], "PUT", path, body);
	sleep_ms(6 * d);
	http_on(W.bases[1], "POST", beat, NULL, &r);
	bg_join(&w);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	listed = session_listed(sid);
	held = kind_held_in_redis(kind, a);
	printf("# %s: a multi-lock refused by b, the session's heartbeat (%ld, %zu holdings) "
	       "between a's grant and its take-back: %ld %s; a held after: %lld, the session "
	       "lists %ld\n", kind, r.status,
	       json_array_size(r.json ? json_object_get(r.json, "holdings") : NULL), w.r.status,
	       json_str(&w.r, "error"), held, listed);
	CHECK(w.r.status == 409 && json_str(&w.r, "error") &&
	      !strcmp(json_str(&w.r, "error"), "locked"), "%s: 409 locked (b): %ld %s", kind,
	      w.r.status, w.r.body ? w.r.body : "");
	CHECK_STATUS(r, 200, "the heartbeat");
	CHECK(json_array_size(r.json ? json_object_get(r.json, "holdings") : NULL) == 1,
	      "%s: the heartbeat came between a's record and its take-back: it renewed a", kind);
	CHECK(held == 0, "%s: a is not held once the answer says nothing of the request is", kind);
	CHECK(listed == 0, "%s: and the session lists nothing (%ld)", kind, listed);
	http_free(&r);
	http_free(&w.r);
}

TEST(chaos_partition_a_multilock_take_back_after_a_session_heartbeat_leaves_nothing)
{
	static const char *const kinds[] = { "lock", "fair", "read", "write", "semaphore" };
	char sid[64];

	if (timing_too_slow() || world_up(2, 1, NULL))
		goto out;
	netns_enter(W.cns[0]);
	new_session(60000, sid, sizeof(sid));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		multilock_take_back_after_a_heartbeat(kinds[i], sid);
out:
	world_down();
}

/* A multi-lock R1 of {a of kind, b}, b in the way, and, between a's grant
 * and its record in the session, another request R2 of the same session
 * for a, through another dlockd: a PUT with session= (refused 409
 * not_owner: the session does not list a yet) or a multi-lock of {a, c},
 * c in the way (409 locked). R2's repeat of a numbered a change of the
 * holding, so R1's take-back left a as a later call's -- but R2 was not
 * answered 200 either: a stayed held and listed while both answers said
 * nothing was held (a probe, 24 of 24 and 14 of 14 runs). R2 now puts its
 * repeat back, number and all, and R1 takes a back. */
static void take_back_after_a_refused_repeat(const char *kind, const char *sid, bool multi)
{
	int d = 500;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	char a[200], b[200], c[200], body[600], body2[600], path[300], path2[300];
	struct http_resp r;
	struct bg w;
	long long held;
	long listed;

	snprintf(a, sizeof(a), "%s-%s", lockname("mlrep-a"), kind);
	snprintf(b, sizeof(b), "%s-%s", lockname("mlrep-b"), kind);
	snprintf(c, sizeof(c), "%s-%s", lockname("mlrep-c"), kind);
	netns_enter(W.cns[0]);
	blocked_semaphore(b);	/* each tried after a */
	blocked_semaphore(c);
	kind_and_semaphore_body(kind, a, b, body, sizeof(body));
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	if (multi) {
		kind_and_semaphore_body(kind, a, c, body2, sizeof(body2));
		snprintf(path2, sizeof(path2), "/sessions/%s/locks", sid);
	} else {
		snprintf(path2, sizeof(path2), "/%s/%s%s?session=%s%s",
			 !strcmp(kind, "semaphore") ? "semaphores" :
			 !strcmp(kind, "lock") ? "locks" : "rwlocks", a,
			 !strcmp(kind, "write") ? "/write" : "", sid,
			 strcmp(kind, "semaphore") ? "" : "&limit=1");
	}
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	/* R1, through dlockd 0: the session read runs at d, a's grant at 3d,
	 * its record and b's refusal at 5d, the take-back at 7d; R2, through
	 * dlockd 1 (its way to Redis clear), at 4d */
	bg_start_on(&w, W.bases[0], "PUT", path, body);
	sleep_ms(4 * d);
	http_on(W.bases[1], "PUT", path2, multi ? body2 : NULL, &r);
	bg_join(&w);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	listed = session_listed(sid);
	held = kind_held_in_redis(kind, a);
	printf("# %s: R1, a multi-lock refused by b: %ld %s; R2 (%s), between a's grant and its "
	       "record: %ld %s; a held after: %lld, the session lists %ld\n", kind, w.r.status,
	       json_str(&w.r, "error"), multi ? "a multi-lock refused by c" : "PUT with session=",
	       r.status, json_str(&r, "error"), held, listed);
	CHECK(w.r.status == 409 && json_str(&w.r, "error") &&
	      !strcmp(json_str(&w.r, "error"), "locked"), "%s: R1 409 locked (b): %ld %s", kind,
	      w.r.status, w.r.body ? w.r.body : "");
	CHECK(r.status == 409 && json_str(&r, "error") &&
	      !strcmp(json_str(&r, "error"), multi ? "locked" : "not_owner"),
	      "%s: R2 409 %s: %ld %s", kind, multi ? "locked (c)" : "not_owner", r.status,
	      r.body ? r.body : "");
	CHECK(held == 0, "%s: a is not held: no answer said it was", kind);
	CHECK(listed == 0, "%s: and the session lists nothing (%ld)", kind, listed);
	http_free(&r);
	http_free(&w.r);
}

static void take_back_after_refused_repeats(bool multi)
{
	static const char *const kinds[] = { "lock", "write", "semaphore" };
	char sid[64];

	if (timing_too_slow() || world_up(2, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	new_session(60000, sid, sizeof(sid));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && !test_failed(); i++)
		take_back_after_a_refused_repeat(kinds[i], sid, multi);
}

TEST(chaos_partition_a_multilock_take_back_after_a_refused_single_repeat_leaves_nothing)
{
	take_back_after_refused_repeats(false);
	world_down();
}

TEST(chaos_partition_a_multilock_take_back_after_a_refused_multilock_repeat_leaves_nothing)
{
	take_back_after_refused_repeats(true);
	world_down();
}

/* A waiting multi-lock whose session is ended (DELETE) during a pass,
 * before the wait for the lock in the way begins: the session's end was
 * heard, but only a wait already under way stopped for it, and this one
 * waited out its wait_ms before answering (found by a probe). It answers
 * 404 session_not_found once the pass is over. */
static void multilock_session_ended_during_a_pass(void)
{
	int d = 200, wait_ms = 20000 * slow_factor();
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	const char *b = lockname("mlend-z"), *n = lockname("mlend-a");
	char body[800], path[300], sid[64];
	struct http_resp r;
	struct bg w;
	int64_t t0;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	session_and_blocker(b, sid, sizeof(sid));
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s0\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s1\"},{\"kind\":\"lock\",\"name\":\"%s\"}],"
		 "\"wait_ms\":%d}", n, n, b, wait_ms);
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	t0 = mono_ms();
	bg_start_on(&w, W.bases[0], "PUT", path, body);
	sleep_ms(3 * d);	/* the pass is under way: n0's grant */
	snprintf(path, sizeof(path), "/sessions/%s", sid);
	http_on(W.bases[0], "DELETE", path, NULL, &r);
	CHECK_STATUS(r, 200, "the session ends");
	http_free(&r);
	bg_join(&w);
	netns_enter(NULL);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	printf("# a waiting multi-lock whose session ended during its pass: %ld %s after %lld "
	       "ms (wait_ms %d)\n", w.r.status, json_str(&w.r, "error"),
	       (long long)(w.done_ms - t0), wait_ms);
	CHECK(w.r.status == 404, "404 session_not_found: %ld %s", w.r.status,
	      w.r.body ? w.r.body : "");
	CHECK(w.done_ms - t0 < wait_ms / 2, "answered once the pass was over, not at wait_ms "
	      "(%lld ms)", (long long)(w.done_ms - t0));
	http_free(&w.r);
	CHECK(exists_in_redis(lockname("mlend-a0")) == 0 && exists_in_redis(lockname("mlend-a1"))
	      == 0, "nothing of the request is held");
}

TEST(chaos_partition_a_waiting_multilock_hears_its_session_end_during_a_pass)
{
	multilock_session_ended_during_a_pass();
	world_down();
}

/* A session's grant of a (a multi-lock of {a, b}, or PUT /locks/a with
 * session=) runs, and its answer is lost: the way from Redis is cut for
 * 11 s, past dlockd's 10 s wait for an answer ("no reply": it may have
 * run). The take stopped there with 503 and took nothing back: a stood,
 * held by the session's id but not listed in the session, so ending the
 * session did not free it, and a repeat was refused as held outside the
 * session (found by two probes). A take without an answer is taken back
 * before the 503. */
static void unanswered_take(bool multi)
{
	int d = 300;
	struct wire_conf slow = { .delay_ms = d }, cut = { .cut = true };
	static const struct wire_conf clear;
	const char *a = lockname(multi ? "mlnoans-a" : "snoans-a"), *b = lockname("mlnoans-b");
	char body[600], path[300], sid[64];
	struct bg w;
	long long held;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	new_session(60000, sid, sizeof(sid));
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	two_locks_body(a, b, body, sizeof(body));
	if (multi)
		snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	else
		snprintf(path, sizeof(path), "/locks/%s?session=%s", a, sid);
	/* the session read answered at 2d, a's grant run at 3d */
	bg_start_on(&w, W.bases[0], "PUT", path, multi ? body : NULL);
	netns_enter(NULL);
	sleep_ms(3 * d + d / 2);
	wire_set(W.dr[0], WIRE_BA, &cut);
	sleep_ms(11000);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	bg_join(&w);
	sleep_ms(300);
	held = exists_in_redis(a);
	printf("# %s whose grant of a got no answer: %ld %s%s; a held after: %lld\n",
	       multi ? "a multi-lock" : "a session's acquire", w.r.status, json_str(&w.r, "error"),
	       w.r.json && json_is_false(json_object_get(w.r.json, "undone")) ?
	       " (undone: false)" : "", held);
	CHECK(w.r.status == 503, "503: %ld %s", w.r.status, w.r.body ? w.r.body : "");
	CHECK(held == 0 || (w.r.json && json_is_false(json_object_get(w.r.json, "undone"))),
	      "a 503 that says nothing changed leaves a free: %s", w.r.body ? w.r.body : "");
	http_free(&w.r);
	session_end_frees(sid, a);
}

TEST(chaos_partition_a_session_acquire_takes_back_a_grant_whose_answer_was_lost)
{
	unanswered_take(false);
	world_down();
}

TEST(chaos_partition_a_multilock_takes_back_a_take_whose_answer_was_lost)
{
	unanswered_take(true);
	world_down();
}

/* dlockd told to stop (SIGTERM) while a multi-lock of 40 names takes them
 * over a slow link, Redis paused meanwhile: the take-back of what it took
 * was tried again, past the 11 s dlockd gives requests at shutdown, and
 * libmicrohttpd aborted the process ("MHD_stop_daemon() called while we
 * have suspended connections", exit 134; found by a probe). A stopping
 * dlockd does not try a take-back again, and a request still waiting for
 * Redis at the end is left to the exit: dlockd exits 0. */
static void multilock_stopped_during_take_back(void)
{
	int d = 50;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	const char *prefix = lockname("mlterm");
	char body[40 * 260 + 32], path[300], sid[64];
	struct bg w;
	size_t len = 0;
	int rc;

	if (world_up(1, 1, NULL))
		return;
	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"locks\":[");
	for (int i = 0; i < 40; i++)
		len += (size_t)snprintf(body + len, sizeof(body) - len,
					"%s{\"kind\":\"lock\",\"name\":\"%s%02d\"}", i ? "," : "",
					prefix, i);
	snprintf(body + len, sizeof(body) - len, "]}");
	netns_enter(W.cns[0]);
	new_session(120000, sid, sizeof(sid));
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	bg_start_on(&w, W.bases[0], "PUT", path, body);	/* 2d a name: 4 s in all */
	netns_enter(NULL);
	sleep_ms(1500);
	kill(W.redis.pid, SIGSTOP);
	sleep_ms(800);
	rc = dlockd_stop(&W.d[0], 40000);
	bg_join(&w);
	kill(W.redis.pid, SIGCONT);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	printf("# dlockd stopped during a take with Redis paused: exit %d; the request: %ld %s\n",
	       rc, w.r.status, json_str(&w.r, "error") ? json_str(&w.r, "error") : "");
	CHECK(rc == 0, "dlockd exits 0, not %d (see %s)", rc, W.d[0].log);
	http_free(&w.r);
}

TEST(chaos_partition_dlockd_stopped_during_a_multilock_take_back_exits_cleanly)
{
	multilock_stopped_during_take_back();
	world_down();
}

/* ----- 10. the first request of each loop over a slow link ----- */

/* n GETs of a lock's state through dlockd 0, each on a new HTTP
 * connection (any loop may take it), from the clients' namespace; how
 * many were answered 200, the slowest's time into worst. */
static int requests_on_new_connections(int n, double *worst)
{
	char path[300];
	int ok = 0;

	*worst = 0;
	snprintf(path, sizeof(path), "/locks/%s", lockname("first"));
	for (int i = 0; i < n; i++) {
		struct bg w;

		netns_enter(W.cns[0]);
		bg_start_on(&w, W.bases[0], "GET", path, NULL);	/* its own connection */
		netns_enter(NULL);
		bg_join(&w);
		ok += w.r.status == 200;
		if (w.r.ms > *worst)
			*worst = w.r.ms;
		if (w.r.status != 200 || w.r.ms >= 1500)
			printf("# request %d: %ld in %.0f ms %s\n", i, w.r.status, w.r.ms,
			       w.r.body ? w.r.body : "");
		http_free(&w.r);
	}
	return ok;
}

/* dlockd (two loops) started on a fast link to Redis, which then slows
 * to d each way; with close_first Redis then closes dlockd's connections
 * (CLIENT KILL) and the requests start settle_ms later. 12 requests on
 * new connections must each be answered 200 within limit_ms. */
static void slow_link_requests(int d, bool close_first, int settle_ms, double limit_ms)
{
	int n = 12, ok;
	long long closed = 0;
	struct wire_conf slow = { .delay_ms = d };
	static const struct wire_conf clear;
	double worst;

	if (timing_too_slow())
		return;
	if (world_up(1, 1, NULL))
		return;
	sleep_ms(300);	/* the loops connect as they start: done by now */
	wire_set(W.dr[0], WIRE_BOTH, &slow);
	if (close_first) {
		netns_enter(W.rns);
		closed = rcmd_int_on(&W.redis, "CLIENT KILL TYPE normal");
		netns_enter(NULL);
		sleep_ms(settle_ms);	/* the close reaches dlockd, and more */
		CHECK(closed >= 2, "Redis closed the loops' connections: %lld", closed);
	}
	ok = requests_on_new_connections(n, &worst);
	wire_set(W.dr[0], WIRE_BOTH, &clear);
	printf("# %lld connections closed by Redis first; %d requests on new connections over "
	       "a 2 x %d ms link: %d answered 200, the slowest in %.0f ms\n", closed, n, d, ok,
	       worst);
	CHECK(ok == n, "every request answered 200: %d of %d", ok, n);
	CHECK(worst < limit_ms, "each in under %.0f ms (a round trip is %d ms): the slowest in "
	      "%.0f ms", limit_ms, 2 * d, worst);
}

/* A new Redis connection holds its commands until it has measured Redis'
 * clock. Each loop used to connect on its first command, and a
 * connection held its commands for a whole round of TIMEs, up to four
 * when the round trip is long: over a link of 2 x 300 ms, a request that
 * was its loop's first (a new HTTP connection may go to any loop) waited
 * for the connect and four TIMEs, 3 s, and was answered 503 at 2 s. And
 * the first script call of the process sent the library (FUNCTION LOAD)
 * and its own whole source ahead of it: 3 s of TCP slow start on such a
 * link. Every loop now connects as it starts, and the first loads the
 * library. Here dlockd (two loops) starts on a fast link, which then
 * slows down: each of 12 requests, on 12 new HTTP connections, is
 * answered 200 in about one round trip. (The multi-lock take-back test
 * above once failed on CI for this: its request went to the loop not yet
 * connected.) */
TEST(chaos_partition_each_loops_first_request_over_a_slow_link_finds_redis_connected)
{
	slow_link_requests(300, false, 0, 1500);
	world_down();
}

/* The same after Redis closed dlockd's connections (CLIENT KILL: a
 * restart, a failover, an idle timeout), over a link of 2 x 200 ms, the
 * requests starting as soon as the close reached dlockd: a request that
 * finds its loop still reconnecting waits for the connect and the clock.
 * It used to wait for a whole round of TIMEs, four over such a link:
 * 0.4 + 4 x 0.4 s, and 503 at 2 s. A sample whose round trip is at most
 * half of the 1.5 s a call has to reach Redis now lets the held commands
 * go: about three round trips, 1.2 s, at most. */
TEST(chaos_partition_requests_after_redis_closed_the_connections_over_a_slow_link_are_served)
{
	slow_link_requests(200, true, 3 * 200, 1900);
	world_down();
}

/* And once the loops had a moment (3 s) after the close: a loop used to
 * reconnect on its next command only, so the first request each loop
 * took paid for the connect and the clock, three round trips (1.2 s).
 * A lost working connection is now made again by the loop at once, and
 * every request takes about one round trip (0.4 s). */
TEST(chaos_partition_connections_redis_closed_are_made_again_before_the_next_request)
{
	slow_link_requests(200, true, 3000, 700);
	world_down();
}

/* ----- 14. what a 503 says, when one call of several failed ----- */

/* PUT /locks/{name}?session=&wait_ms=: a grant that waited is recorded in
 * the session, then its lease is set to the session's (lock_renew). Here
 * that renewal reaches Redis late (the way to Redis cut by it for 2.5 s):
 * Redis refuses it as late, and the request was answered 503 "redis was
 * too slow ... changed nothing" while the lock stood, granted and listed
 * in the session (found by a probe of what 503s say). The grant stands
 * with the lease it was given, and that is the answer: 200. */
static void session_grant_renewal_late(void)
{
	struct wire_conf cut_at_renew = { .cut_on = "lock_renew" };
	const char *a = lockname("srenew-a");
	char path[300], sid[64];
	struct http_resp r;
	struct bg w;
	bool fired = false, undone_false;
	long long held;
	long listed;

	if (world_up(1, 1, NULL))
		return;
	netns_enter(W.cns[0]);
	new_session(60000, sid, sizeof(sid));
	snprintf(path, sizeof(path), "/locks/%s?owner=other&ttl_ms=60000", a);
	http_on(W.bases[0], "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "another owner holds a");
	http_free(&r);
	snprintf(path, sizeof(path), "/locks/%s?session=%s&wait_ms=20000", a, sid);
	bg_start_on(&w, W.bases[0], "PUT", path, NULL);
	netns_enter(NULL);
	CHECK(WAIT_FOR(waiters_in(0) == 1, 10000), "the session waits");
	wire_set(W.dr[0], WIRE_AB, &cut_at_renew);
	netns_enter(W.cns[0]);
	snprintf(path, sizeof(path), "/locks/%s?owner=other", a);
	http_on(W.bases[0], "DELETE", path, NULL, &r);
	CHECK_STATUS(r, 200, "the other owner lets go");
	http_free(&r);
	netns_enter(NULL);
	fired = cut_fired_then_healed(&w, 2500);
	held = exists_in_redis(a);
	netns_enter(W.cns[0]);
	listed = session_listed(sid);
	netns_enter(NULL);
	undone_false = w.r.json && json_is_false(json_object_get(w.r.json, "undone"));
	printf("# a waited session grant whose renewal reached Redis late: %ld %s; a held: %lld, "
	       "listed in the session: %ld; late calls: %lld\n", w.r.status,
	       w.r.body ? w.r.body : "", held, listed, late_calls());
	CHECK(fired, "the grant's renewal (lock_renew) went towards Redis");
	CHECK(w.r.status != 503 || undone_false || held == 0,
	      "a 503 that says nothing changed leaves nothing held");
	CHECK(w.r.status == 200 && json_int(&w.r, "fencing_token") > 0,
	      "the grant stands, and is answered: %ld %s", w.r.status, w.r.body ? w.r.body : "");
	CHECK(held == 1 && listed == 1, "a held (%lld) and listed in the session (%ld)", held,
	      listed);
	http_free(&w.r);
	session_end_frees(sid, a);
}

TEST(chaos_partition_a_session_grant_whose_renewal_redis_refused_as_late_is_answered_granted)
{
	session_grant_renewal_late();
	world_down();
}

/* POST /sessions counts the session against its token's cap
 * (session_count), then makes it (session_create). Here the make reaches
 * Redis late and changes nothing: the 503 said nothing changed, but the
 * count stayed, and with --max-sessions-per-token 1 the next create was
 * refused 409 too_many_sessions for the count's whole lease (found by a
 * probe). The count is taken back with the 503. */
static void session_create_late(void)
{
	static const char *const flags[] = { "--max-sessions-per-token", "1", NULL };
	struct wire_conf cut_at_create = { .cut_on = "session_create" };
	struct bg w;
	bool fired = false;

	if (world_up(1, 1, flags))
		return;
	wire_set(W.dr[0], WIRE_AB, &cut_at_create);
	netns_enter(W.cns[0]);
	bg_start_on(&w, W.bases[0], "POST", "/sessions?ttl_ms=60000", NULL);
	netns_enter(NULL);
	fired = cut_fired_then_healed(&w, 2500);
	printf("# a session create that reached Redis late: %ld %s\n", w.r.status,
	       w.r.body ? w.r.body : "");
	CHECK(fired, "the create (session_create) went towards Redis");
	CHECK(w.r.status == 503 && !(w.r.json && json_is_false(json_object_get(w.r.json,
										   "undone"))),
	      "503, nothing changed: %ld %s", w.r.status, w.r.body ? w.r.body : "");
	http_free(&w.r);
	netns_enter(W.cns[0]);
	CHECK(WAIT_FOR(status_of(&W.d[0], "POST", "/sessions?ttl_ms=60000") == 201, 5000),
	      "the token may open its one session: the failed create left no count");
	netns_enter(NULL);
}

TEST(chaos_partition_a_session_create_redis_refused_as_late_leaves_no_count)
{
	session_create_late();
	world_down();
}
