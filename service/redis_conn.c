/* redis_conn.c -- hiredis connections: a blocking connection
 * for the subscriber, and one pipelined, non-blocking connection per event
 * loop thread.
 *
 * A loop's connection takes commands from every request the loop serves
 * and writes them in one go when the loop asks (redis_conn_flush), so that
 * Redis reads and answers many per system call; replies come back in send
 * order and go to their callbacks from redis_conn_on_readable().
 *
 * A command not answered within COMMAND_TIMEOUT_MS of being sent makes
 * the connection overdue: it takes no new command (each is told "no
 * reply", NULL, at once: it never reaches Redis, and its caller answers
 * 503). The commands already sent keep waiting for their replies, each
 * until REPLY_WAIT_MS after its own send: a stalled Redis that resumes
 * runs them (or, past their deadline (below), refuses them) and answers,
 * and the caller hears what really happened. Redis may also have run a
 * command in time and be late only with its reply (another client's slow
 * command in the same event-loop turn): a 503 then would have taken
 * effect. Only a command with no reply after REPLY_WAIT_MS is told "no
 * reply"; its late reply, should one come, is dropped; once every command
 * has been told, the connection is closed. (Answering every command when
 * the oldest timed out let a stalled Redis run calls already answered
 * 503; answering at 2 s let a slow neighbour's command hide a call that
 * had run.) Any I/O error drops the connection at once (Redis is gone,
 * or its connection is). The next command reconnects, but no sooner than a backoff (50 ms
 * doubling to 1 s) so that a dead Redis costs a request a clock read, not
 * a connect(). Set-up (AUTH, SELECT, TIME) is pipelined ahead of the first
 * commands, which are held until TIME has told how far Redis' clock is
 * from ours. Callbacks never run inside redis_conn_send(). */
#include "redis_conn.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 1000
#define COMMAND_TIMEOUT_MS 2000
/* A command sent gets "no reply" only after this long (see above). */
#define REPLY_WAIT_MS 10000
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

/* A command must have run this long after it was sent, or not at all
 * (see "Deadlines in Redis' clock" below); the rest of REPLY_WAIT_MS is
 * for its reply to arrive. */
#define DEADLINE_MS (COMMAND_TIMEOUT_MS - 500)

static struct redis_url conf_url;

/* ----- Error replies ----- */

static const char why_noperm[] =
	"redis refused the command: no permission (NOPERM); dlockd's redis user needs "
	"EVAL, EVALSHA, SCRIPT, TIME, PING, SUBSCRIBE, the commands and keys of the "
	"lock scripts, and their channels (allchannels or &*)";

static const struct {
	const char *code;	/* the error's first word */
	const char *why;
} unavailable[] = {
	{ "BUSY", "redis is busy running a script (SCRIPT KILL stops it); retry shortly" },
	{ "LOADING", "redis is loading its data into memory; retry shortly" },
	{ "MASTERDOWN", "redis is a replica that lost its master; retry shortly" },
	{ "READONLY", "redis is a read-only replica; point dlockd's --redis at the master" },
	{ "OOM", "redis is out of memory (maxmemory reached); retry later" },
	{ "NOPERM", why_noperm },
	{ "NOAUTH", "redis refused the command: authentication required (NOAUTH); give the "
		    "password in --redis" },
	{ "WRONGPASS", "redis refused dlockd's user or password (WRONGPASS)" },
	{ "TRYAGAIN", "redis cluster is moving the lock's slot (TRYAGAIN); retry shortly" },
	{ "CLUSTERDOWN", "redis cluster is down (CLUSTERDOWN); retry shortly" },
	{ "MOVED", "redis is a cluster node that does not serve this lock (MOVED); dlockd "
		   "needs a non-cluster redis" },
	{ "ASK", "redis is a cluster node that does not serve this lock (ASK); dlockd "
		 "needs a non-cluster redis" },
	{ "MISCONF", "redis refuses writes: it cannot save to disk (MISCONF); retry later" },
	{ "NOREPLICAS", "redis refuses writes: not enough replicas (NOREPLICAS); retry later" },
	{ "NOSCRIPT", "redis lost the lock script (NOSCRIPT); retry shortly" },
	{ "DLOCKD_LATE", "redis was too slow: the call reached it after dlockd gave up and "
			 "changed nothing; retry shortly" },
	{ "DLOCKD_SETUP", "redis refused dlockd's connection set-up (AUTH, or SELECT of the "
			  "database in --redis); dlockd's log has redis' words" },
};

const char *redis_error_unavailable(const char *err)
{
	/* a command inside a script refused by the ACL: Redis 7.0 says "can't
	 * run this command", "can't access at least one of the keys" or "can't
	 * publish to the channel mentioned in the command"; 7.2 and later say
	 * "ERR ACL failure in script: ..." */
	static const char *const script_noperm[] = {
		"ERR The user executing the script can't ",
		"ERR ACL failure in script: ",
	};

	for (size_t i = 0; i < ARRAY_SIZE(script_noperm); i++)
		if (!strncmp(err, script_noperm[i], strlen(script_noperm[i])))
			return why_noperm;
	for (size_t i = 0; i < ARRAY_SIZE(unavailable); i++) {
		size_t n = strlen(unavailable[i].code);

		if (!strncmp(err, unavailable[i].code, n) && (err[n] == ' ' || err[n] == '\0'))
			return unavailable[i].why;
	}
	return NULL;
}

/* ----- Opening a connection ----- */

static struct timeval tv_ms(int ms)
{
	return (struct timeval){ .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
}

/* The commands a new connection runs before any other: AUTH and SELECT,
 * as the URL asks. Returns how many; db keeps SELECT's argument. */
struct setup_cmd {
	int argc;
	const char *argv[3];
};

static int setup_cmds(struct setup_cmd cmds[2], char db[16])
{
	int n = 0;

	if (conf_url.password) {
		struct setup_cmd *a = &cmds[n++];

		a->argc = 0;
		a->argv[a->argc++] = "AUTH";
		if (conf_url.user)
			a->argv[a->argc++] = conf_url.user;
		a->argv[a->argc++] = conf_url.password;
	}
	if (conf_url.db) {
		snprintf(db, 16, "%d", conf_url.db);
		cmds[n++] = (struct setup_cmd){ 2, { "SELECT", db } };
	}
	return n;
}

/* Run a set-up command; 0 when it answered OK. */
static int setup_command(redisContext *c, int argc, const char **argv)
{
	redisReply *r = redisCommandArgv(c, argc, argv, NULL);
	int ok = r && r->type != REDIS_REPLY_ERROR;

	if (r && !ok)
		log_warn("redis %s failed: %s", argv[0], r->str);
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

redisContext *redis_conn_open(void)
{
	struct setup_cmd cmds[2];
	char db[16];
	redisContext *c;
	int n;

	if (conf_url.unix_path)
		c = redisConnectUnixWithTimeout(conf_url.unix_path, tv_ms(CONNECT_TIMEOUT_MS));
	else
		c = redisConnectWithTimeout(conf_url.host, conf_url.port, tv_ms(CONNECT_TIMEOUT_MS));
	if (!c)
		return NULL;
	if (c->err) {
		log_debug("redis connect failed: %s", c->errstr);
		goto fail;
	}
	redisSetTimeout(c, tv_ms(COMMAND_TIMEOUT_MS));
	if (!conf_url.unix_path)
		redisEnableKeepAlive(c);
	n = setup_cmds(cmds, db);
	for (int i = 0; i < n; i++)
		if (setup_command(c, cmds[i].argc, cmds[i].argv))
			goto fail;
	return c;
fail:
	redisFree(c);
	return NULL;
}

int redis_conn_setup(const char *url)
{
	char why[256];

	if (redis_url_parse(url, &conf_url, why, sizeof(why)) < 0) {
		log_error("%s", why);
		return -1;
	}
	return 0;
}

void redis_conn_cleanup(void)
{
	redis_url_release(&conf_url);
}

/* ----- The loop's pipelined connection ----- */

/* A command sent (or held) and not yet answered. */
struct pending {
	redis_reply_fn fn;
	void *ctx;
	int64_t give_up_ms;	/* monotonic */
	bool answered;		/* told "no reply" (REPLY_WAIT_MS after its send);
				 * a late reply is dropped */
	struct pending *next;
	struct held_cmd *held;	/* still to be sent (see below); NULL once sent */
};

/* A command waiting for its connection's clock offset, copied. */
struct held_cmd {
	int argc;
	bool deadline;
	const char *argv[REDIS_CONN_MAX_ARGS];
	size_t lens[REDIS_CONN_MAX_ARGS];
	char data[];
};

struct pending_list {
	struct pending *head, *tail;
};

struct thread_conn {
	redisContext *ctx;		/* non-blocking; NULL while down */
	bool connected;			/* the socket's connect() completed */
	bool ready;			/* set-up answered: the connection works */
	bool broken;			/* drop it once the current callbacks return */
	bool overdue;			/* a command went unanswered past its give-up:
					 * send nothing more, close once all are told */
	struct pending_list held;	/* not sent until the offset is known */
	struct pending_list sent;	/* awaiting replies, in send order */
	struct pending *due;		/* the first of sent not yet told "no reply"
					 * (those before it were: a prefix, as
					 * give_up_ms grows along sent); NULL: none */
	struct pending_list failed;	/* to be told "no reply" by redis_conn_run */
	unsigned generation;		/* bumped by every new connection */
	int64_t next_try_ms;		/* monotonic; no reconnect before this */
	int64_t backoff_ms;

	/* Redis' clock minus now_ms(), a lower bound (see below) */
	int64_t offset_ms;
	bool timed;			/* offset_ms is measured on this connection */
	bool probing;			/* a TIME is in flight */
	int probes;			/* samples in the current round */
	int64_t round_best;		/* largest sample of the round */
	int64_t round_best_rtt;		/* ... and its round trip */
	int64_t next_probe_ms;		/* monotonic: measure again after this */
};

static __thread struct thread_conn *tc;

/* ----- Deadlines in Redis' clock -----
 *
 * A call with a deadline carries the time, in Redis' clock, past which it
 * must do nothing: lua/lib/common.lua compares it with Redis' TIME and
 * answers DLOCKD_LATE, having changed nothing. dlockd gives up on a call
 * REPLY_WAIT_MS after sending it at the latest and answers 503, and a 503
 * must never take effect; so the deadline must fall, in Redis' clock,
 * well before that moment whatever happened earlier -- DEADLINE_MS after
 * the send, leaving the rest for the reply of a call that did run to come
 * back.
 *
 * That needs Redis' clock minus ours. Each connection learns it from
 * TIME: Redis read its clock at some instant between our send and the
 * reply's arrival, so TIME's answer minus our clock when the reply
 * ARRIVED is never above the true difference -- a lower bound, short by
 * at most the round trip. With it a deadline can only come earlier than
 * meant, never later. (The midpoint of the round trip, used before, is
 * off by half of any stall while TIME was in flight, up to a second too
 * LATE, and a call answered 503 still ran.) Our clock is the monotonic
 * one, which no step of the local clock moves; Redis' is its wall clock,
 * which only a step on Redis' host could move.
 *
 * A long round trip makes the bound loose and deadlines early by as much,
 * beyond DEADLINE_MS every call would be refused as late; so a sample
 * whose round trip exceeded PROBE_GOOD_RTT_MS is followed at once by
 * another TIME, and the largest sample of the round is kept. A round ends
 * with a quick sample, or after PROBE_MAX; then the next comes after
 * PROBE_EVERY_MS (the two clocks drift) or, if no sample was quick, after
 * PROBE_RETRY_MS. Until a connection's first round has ended, commands
 * are held, in order, and sent when it has; later rounds keep the old
 * value until they end. The offset belongs to the connection: a new one
 * (perhaps to another Redis, after a failover) measures it anew. */
#define PROBE_GOOD_RTT_MS 50
#define PROBE_MAX 4
#define PROBE_EVERY_MS 60000
#define PROBE_RETRY_MS 1000

static void list_push(struct pending_list *l, struct pending *p)
{
	p->next = NULL;
	if (l->tail)
		l->tail->next = p;
	else
		l->head = p;
	l->tail = p;
}

static struct pending *list_pop(struct pending_list *l)
{
	struct pending *p = l->head;

	if (p) {
		l->head = p->next;
		if (!l->head)
			l->tail = NULL;
	}
	return p;
}

static void list_append(struct pending_list *to, struct pending_list *from)
{
	if (!from->head)
		return;
	if (to->tail)
		to->tail->next = from->head;
	else
		to->head = from->head;
	to->tail = from->tail;
	from->head = from->tail = NULL;
}

void redis_conn_thread_init(void)
{
	tc = xcalloc(1, sizeof(*tc));
	tc->backoff_ms = BACKOFF_MIN_MS;
}

/* No reconnect before the backoff, which doubles up to BACKOFF_MAX_MS. */
static void back_off(void)
{
	tc->next_try_ms = now_ms() + tc->backoff_ms;
	tc->backoff_ms = tc->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : tc->backoff_ms * 2;
}

/* Move the commands of sent that still wait for an answer to failed, and
 * free those already told "no reply". */
static void fail_sent(void)
{
	struct pending *p;

	tc->due = NULL;
	while ((p = list_pop(&tc->sent))) {
		if (p->answered)
			free(p);
		else
			list_push(&tc->failed, p);
	}
}

/* Close the connection; what waits on it fails on the next run. */
static void conn_drop(const char *why)
{
	if (!tc->ctx)
		return;
	log_warn("redis connection lost: %s", why);
	redisFree(tc->ctx);
	tc->ctx = NULL;
	fail_sent();
	list_append(&tc->failed, &tc->held);
	if (tc->ready) {
		tc->next_try_ms = now_ms();	/* it worked: try again at once */
		tc->backoff_ms = BACKOFF_MIN_MS;
	} else {
		back_off();
	}
	tc->connected = tc->ready = tc->broken = tc->overdue = false;
	tc->timed = tc->probing = false;
}

static struct pending *pending_new(redis_reply_fn fn, void *ctx)
{
	struct pending *p = xcalloc(1, sizeof(*p));

	p->fn = fn;
	p->ctx = ctx;
	p->give_up_ms = now_ms() + COMMAND_TIMEOUT_MS;
	return p;
}

/* Append p's command to the connection, with its deadline argument last
 * if asked, and await the reply; or fail p if the connection is down. */
static void append(struct pending *p, int argc, const char **argv, const size_t *lens,
		   bool deadline)
{
	const char *av[REDIS_CONN_MAX_ARGS + 1];
	size_t lv[REDIS_CONN_MAX_ARGS + 1];
	char by[24];

	if (!tc->ctx) {
		list_push(&tc->failed, p);
		return;
	}
	for (int i = 0; i < argc; i++) {
		av[i] = argv[i];
		lv[i] = lens ? lens[i] : strlen(argv[i]);
	}
	if (deadline) {
		/* past it, in Redis' clock, dlockd has answered (or will
		 * answer) 503: the command must do nothing */
		snprintf(by, sizeof(by), "%lld",
			 (long long)(p->give_up_ms - (COMMAND_TIMEOUT_MS - DEADLINE_MS) +
				     tc->offset_ms));
		av[argc] = by;
		lv[argc++] = strlen(by);
	}
	if (redisAppendCommandArgv(tc->ctx, argc, av, lv) != REDIS_OK) {
		conn_drop(tc->ctx->errstr);
		list_push(&tc->failed, p);
		return;
	}
	list_push(&tc->sent, p);
	if (!tc->due)
		tc->due = p;
}

/* A command of the connection's own (set-up, TIME): never held. */
static void send_raw(int argc, const char **argv, redis_reply_fn fn, void *ctx)
{
	append(pending_new(fn, ctx), argc, argv, NULL, false);
}

/* Keep a copy of the command in p until the offset is known. */
static void hold(struct pending *p, int argc, const char **argv, const size_t *lens,
		 bool deadline)
{
	size_t size = 0;
	struct held_cmd *h;
	char *at;

	for (int i = 0; i < argc; i++)
		size += lens ? lens[i] : strlen(argv[i]);
	h = xmalloc(sizeof(*h) + size + 1);
	h->argc = argc;
	h->deadline = deadline;
	at = h->data;
	for (int i = 0; i < argc; i++) {
		h->lens[i] = lens ? lens[i] : strlen(argv[i]);
		memcpy(at, argv[i], h->lens[i]);
		h->argv[i] = at;
		at += h->lens[i];
	}
	p->held = h;
	list_push(&tc->held, p);
}

/* Send what was held, in order, now that the offset is known. */
static void release_held(void)
{
	struct pending *p;

	while ((p = list_pop(&tc->held))) {
		struct held_cmd *h = p->held;

		p->held = NULL;
		append(p, h->argc, h->argv, h->lens, h->deadline);
		free(h);
	}
}

/* Answer every held command with r, an error reply (its callbacks run
 * here; what they send is held anew). */
static void fail_held(redisReply *r)
{
	struct pending_list l = tc->held;
	struct pending *p;

	tc->held.head = tc->held.tail = NULL;
	while ((p = list_pop(&l))) {
		free(p->held);
		p->fn(p->ctx, r);
		free(p);
		if (!tc->ctx) {
			list_append(&tc->failed, &l);	/* a callback's send dropped it */
			return;
		}
	}
}

/* Set-up replies: an error means the connection is no use. */
static void on_setup(void *ctx, redisReply *r)
{
	(void)ctx;
	if (r && r->type == REDIS_REPLY_ERROR && !tc->broken) {
		log_warn("redis set-up (AUTH or SELECT) failed: %s", r->str);
		tc->broken = true;
		if (redis_error_unavailable(r->str)) {
			fail_held(r);	/* they hear why (WRONGPASS...), not "unreachable" */
		} else {
			/* e.g. SELECT's "ERR DB index is out of range": an error of
			 * the set-up, not of the commands held behind it (a 503,
			 * not a failing script's 500) */
			redisReply setup = *r;

			setup.str = (char *)"DLOCKD_SETUP";
			setup.len = strlen(setup.str);
			fail_held(&setup);
		}
	}
}

static void on_time(void *ctx, redisReply *r);

/* Ask Redis for its clock (one TIME in flight at most). */
static void probe(void)
{
	tc->probing = true;
	send_raw(1, (const char *[]){ "TIME" }, on_time, (void *)(intptr_t)now_ms());
}

/* A TIME sample: Redis' clock minus ours at the reply's arrival. */
static void on_time(void *ctx, redisReply *r)
{
	int64_t sent = (int64_t)(intptr_t)ctx, now = now_ms(), sample, rtt = now - sent;

	tc->probing = false;
	if (!r || tc->broken)
		return;		/* the connection is gone; a new one measures anew */
	if (!tc->ready) {
		tc->ready = true;
		tc->backoff_ms = BACKOFF_MIN_MS;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		/* Redis cannot serve now (BUSY, LOADING, an ACL...): what waits
		 * for the offset gets that answer, the next command asks again */
		log_warn("redis TIME failed: %s", r->str);
		fail_held(r);
		tc->next_probe_ms = now + PROBE_RETRY_MS;
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING) {
		log_warn("redis TIME gave an unexpected reply");
		tc->broken = true;
		return;
	}
	sample = strtoll(r->element[0]->str, NULL, 10) * 1000 +
		 strtoll(r->element[1]->str, NULL, 10) / 1000 - now;
	if (tc->probes == 0 || sample > tc->round_best) {
		tc->round_best = sample;
		tc->round_best_rtt = rtt;
	}
	if (rtt > PROBE_GOOD_RTT_MS && ++tc->probes < PROBE_MAX) {
		probe();	/* a stall loosened the bound: measure again */
		return;
	}
	tc->probes = 0;
	tc->offset_ms = tc->round_best;
	tc->next_probe_ms = now + (tc->round_best_rtt > PROBE_GOOD_RTT_MS ? PROBE_RETRY_MS
									  : PROBE_EVERY_MS);
	if (!tc->timed) {
		tc->timed = true;
		release_held();
	}
}

/* Start a non-blocking connect with the set-up commands queued on it. */
static void conn_open_async(void)
{
	struct setup_cmd cmds[2];
	char db[16];
	int n;

	tc->ctx = conf_url.unix_path ? redisConnectUnixNonBlock(conf_url.unix_path)
				     : redisConnectNonBlock(conf_url.host, conf_url.port);
	tc->generation++;
	if (!tc->ctx || tc->ctx->err) {
		log_debug("redis connect failed: %s", tc->ctx ? tc->ctx->errstr : "out of memory");
		if (tc->ctx)
			redisFree(tc->ctx);
		tc->ctx = NULL;
		back_off();
		return;
	}
	if (!conf_url.unix_path)
		redisEnableKeepAlive(tc->ctx);
	n = setup_cmds(cmds, db);
	for (int i = 0; i < n; i++)
		send_raw(cmds[i].argc, cmds[i].argv, on_setup, NULL);
	tc->timed = false;
	tc->probes = 0;
	probe();
}

void redis_conn_send(int argc, const char **argv, const size_t *lens, bool deadline,
		     redis_reply_fn fn, void *ctx)
{
	struct pending *p;

	if (argc > REDIS_CONN_MAX_ARGS)
		abort();
	if (!tc->ctx && now_ms() >= tc->next_try_ms)
		conn_open_async();
	p = pending_new(fn, ctx);
	if (tc->ctx && tc->overdue) {
		list_push(&tc->failed, p);	/* never sent: told at once */
		return;
	}
	if (tc->ctx && !tc->timed) {
		hold(p, argc, argv, lens, deadline);
		if (!tc->probing)
			probe();	/* the last TIME was refused: ask again */
		return;
	}
	if (tc->ctx && !tc->probing && now_ms() >= tc->next_probe_ms)
		probe();
	append(p, argc, argv, lens, deadline);
}

int redis_conn_fd(unsigned *events, unsigned *generation)
{
	*events = 0;
	*generation = tc->generation;
	if (!tc->ctx)
		return -1;
	if (tc->connected)
		*events |= REDIS_CONN_READ;
	if (!tc->connected || sdslen(tc->ctx->obuf) > 0)
		*events |= REDIS_CONN_WRITE;
	return tc->ctx->fd;
}

void redis_conn_flush(void)
{
	int done = 0;

	if (tc->ctx && tc->connected && sdslen(tc->ctx->obuf) > 0 &&
	    redisBufferWrite(tc->ctx, &done) != REDIS_OK)
		conn_drop(tc->ctx->errstr);
}

void redis_conn_on_writable(void)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (!tc->ctx)
		return;
	if (!tc->connected) {
		/* the non-blocking connect() is over: did it work? */
		if (getsockopt(tc->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
			conn_drop(err ? strerror(err) : "connect failed");
			return;
		}
		tc->connected = true;
	}
	redis_conn_flush();
}

void redis_conn_on_readable(void)
{
	redisReply *r;

	if (!tc->ctx || !tc->connected)
		return;
	if (redisBufferRead(tc->ctx) != REDIS_OK) {
		conn_drop(tc->ctx->errstr[0] ? tc->ctx->errstr : "closed");
		return;
	}
	for (;;) {
		void *reply = NULL;
		struct pending *p;

		if (redisGetReplyFromReader(tc->ctx, &reply) != REDIS_OK) {
			conn_drop(tc->ctx->errstr);
			return;
		}
		if (!reply)
			break;
		r = reply;
		p = list_pop(&tc->sent);
		if (!p) {
			freeReplyObject(r);
			conn_drop("a reply nobody asked for");
			return;
		}
		tc->overdue = false;	/* Redis answers again */
		if (tc->due == p)
			tc->due = p->next;
		if (!p->answered)
			p->fn(p->ctx, r);
		freeReplyObject(r);
		free(p);
		if (!tc->ctx)
			return;		/* a callback's command could not be sent */
		if (tc->broken) {
			conn_drop("set-up refused");
			return;
		}
	}
}

bool redis_conn_run(int64_t now)
{
	struct pending *p;
	bool ran = false;

	/* the oldest command unanswered past its give-up: send no more */
	if (tc->due && now >= tc->due->give_up_ms)
		tc->overdue = true;
	/* commands with no reply after REPLY_WAIT_MS are told one by one, in
	 * send order (give_up_ms grows along the list); what they send
	 * meanwhile is failed at once, as the connection is overdue */
	while ((p = tc->due) && now >= p->give_up_ms + REPLY_WAIT_MS - COMMAND_TIMEOUT_MS) {
		tc->due = p->next;
		p->answered = true;
		p->fn(p->ctx, NULL);
		ran = true;
	}
	if (tc->ctx && tc->overdue && !tc->due) {
		char why[64];

		snprintf(why, sizeof(why), "no reply within %d ms", REPLY_WAIT_MS);
		conn_drop(why);
	}
	/* held past their time (the clock is still being measured) */
	while (tc->held.head && now >= tc->held.head->give_up_ms)
		list_push(&tc->failed, list_pop(&tc->held));
	while ((p = list_pop(&tc->failed))) {
		free(p->held);
		p->fn(p->ctx, NULL);
		free(p);
		ran = true;
	}
	return ran;
}

int64_t redis_conn_timeout_ms(int64_t now)
{
	int64_t at;

	if (tc->failed.head)
		return 0;
	if (!tc->due && !tc->held.head)
		return -1;
	at = !tc->due ? INT64_MAX
	     : tc->overdue ? tc->due->give_up_ms + REPLY_WAIT_MS - COMMAND_TIMEOUT_MS
	     : tc->due->give_up_ms;
	if (tc->held.head && tc->held.head->give_up_ms < at)
		at = tc->held.head->give_up_ms;
	return at > now ? at - now : 0;
}

bool redis_conn_idle(void)
{
	return !tc->sent.head && !tc->held.head && !tc->failed.head;
}

void redis_conn_thread_exit(void)
{
	if (!tc)
		return;
	if (tc->ctx) {
		redisFree(tc->ctx);
		tc->ctx = NULL;
	}
	fail_sent();
	list_append(&tc->failed, &tc->held);
	redis_conn_run(now_ms());
	free(tc);
	tc = NULL;
}
