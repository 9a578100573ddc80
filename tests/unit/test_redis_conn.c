/* test_redis_conn.c -- the pipelined connection to one node (redis_node.c,
 * to which redis_conn.h's front passes a single Redis's calls) on a real
 * event loop, against a fake Redis written here (a unix socket in a temporary
 * directory, watched by the same loop: it parses the commands, answers
 * TIME, PING and ECHO, or stays silent). What it proves: commands queued
 * in one turn leave in one write and their replies reach the callbacks in
 * order; a command past its timeout makes the connection overdue (new
 * commands fail at once, those sent get "no reply" only after the reply
 * wait, then the connection is dropped); every callback is called exactly
 * once when the connection drops or is freed, and never from inside
 * redis_node_send(); reconnecting backs off (50 ms, doubling) after failed
 * connects and is immediate after a working connection dropped, which the
 * node makes again by itself, without a command, for a while; two
 * connections on one loop do not disturb each other. The timeouts are
 * shortened through the file's timing struct. */
#include "unit.h"

#include <hiredis/hiredis.h>

/* Every redisBufferWrite() that has something to write is one write(2) of
 * the whole output buffer (hiredis 0.14): count them. */
static int buffer_writes;

static int count_buffer_write(redisContext *c, int *done)
{
	if (sdslen(c->obuf) > 0)
		buffer_writes++;
	return redisBufferWrite(c, done);
}

#define redisBufferWrite count_buffer_write
#include "service/redis/redis_node.c"
#undef redisBufferWrite

#include "service/base/loop.h"

#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ----- A fake Redis on the test's loop ----- */

#define FAKE_MAX_CMDS 256

struct fake {
	struct loop *loop;
	char path[108];
	int lfd;
	int cfd;		/* the client accepted last; -1: none */
	int accepts;
	int eofs;		/* the client closed its connection */
	bool silent;		/* read commands, answer none */
	bool hang_up;		/* close every connection as soon as accepted */
	bool full;		/* answer a connection's first read as a Redis
				 * at maxclients does (an error), then close it */
	char in[1 << 16];
	size_t inlen;
	int ncmds;		/* commands received (on any connection) */
	char cmds[FAKE_MAX_CMDS][64];	/* their words, space-separated, cut short */
	int reads;		/* reads that completed at least one command */
};

static void fake_write(struct fake *f, const char *s, size_t n)
{
	assert_int_equal(write(f->cfd, s, n), (ssize_t)n);
}

static void fake_answer(struct fake *f, int argc, char **argv, const size_t *lens)
{
	char buf[256];
	int n;

	if (!strcasecmp(argv[0], "TIME")) {
		struct timespec ts;
		char s[32], us[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(s, sizeof(s), "%lld", (long long)ts.tv_sec);
		snprintf(us, sizeof(us), "%ld", ts.tv_nsec / 1000);
		n = snprintf(buf, sizeof(buf), "*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen(s), s,
			     strlen(us), us);
		fake_write(f, buf, (size_t)n);
	} else if (!strcasecmp(argv[0], "PING")) {
		fake_write(f, "+PONG\r\n", 7);
	} else if (!strcasecmp(argv[0], "ECHO") && argc >= 2) {
		n = snprintf(buf, sizeof(buf), "$%zu\r\n", lens[1]);
		fake_write(f, buf, (size_t)n);
		fake_write(f, argv[1], lens[1]);
		fake_write(f, "\r\n", 2);
	} else {
		fake_write(f, "+OK\r\n", 5);
	}
}

/* One command from in[at..], a RESP array of bulk strings; its length, or
 * 0 when it is not all there yet. argv points into in (NUL-terminated
 * in place: the CR after each argument). */
static size_t fake_parse(struct fake *f, size_t at, int *argc, char **argv, size_t *lens)
{
	char *p = f->in + at, *end = f->in + f->inlen, *nl;
	long n;

	if (p >= end || !(nl = memchr(p, '\n', (size_t)(end - p))))
		return 0;
	assert_int_equal(*p, '*');
	n = strtol(p + 1, NULL, 10);
	assert_true(n >= 1 && n <= 32);
	p = nl + 1;
	for (long i = 0; i < n; i++) {
		long len;

		if (p >= end || !(nl = memchr(p, '\n', (size_t)(end - p))))
			return 0;
		assert_int_equal(*p, '$');
		len = strtol(p + 1, NULL, 10);
		p = nl + 1;
		if (end - p < len + 2)
			return 0;
		argv[i] = p;
		lens[i] = (size_t)len;
		p += len + 2;
	}
	for (long i = 0; i < n; i++)
		argv[i][lens[i]] = '\0';
	*argc = (int)n;
	return (size_t)(p - (f->in + at));
}

static void fake_close_client(struct fake *f)
{
	if (f->cfd < 0)
		return;
	loop_unwatch(f->loop, f->cfd);
	close(f->cfd);
	f->cfd = -1;
}

static void fake_on_client(struct loop *l, int fd, unsigned events, void *data)
{
	struct fake *f = data;
	size_t at = 0, used;
	char *argv[32];
	size_t lens[32];
	int argc, got = 0;
	ssize_t n;

	(void)l;
	(void)events;
	assert_true(f->inlen < sizeof(f->in));
	n = read(fd, f->in + f->inlen, sizeof(f->in) - f->inlen);
	if (n <= 0) {
		if (n == 0 || errno != EAGAIN) {
			f->eofs++;
			fake_close_client(f);
		}
		return;
	}
	f->inlen += (size_t)n;
	if (f->full) {
		/* as Redis at maxclients: the client reads an error (the
		 * reply to its first command), then the close */
		static const char e[] = "-ERR max number of clients reached\r\n";

		fake_write(f, e, sizeof(e) - 1);
		fake_close_client(f);
		return;
	}
	while ((used = fake_parse(f, at, &argc, argv, lens)) > 0) {
		if (f->ncmds < FAKE_MAX_CMDS) {
			char *cmd = f->cmds[f->ncmds];

			cmd[0] = '\0';
			for (int i = 0; i < argc; i++)
				snprintf(cmd + strlen(cmd), sizeof(f->cmds[0]) - strlen(cmd), "%s%.20s",
					 i ? " " : "", argv[i]);
		}
		f->ncmds++;
		got++;
		if (!f->silent)
			fake_answer(f, argc, argv, lens);
		at += used;
	}
	memmove(f->in, f->in + at, f->inlen - at);
	f->inlen -= at;
	if (got)
		f->reads++;
}

static void fake_on_listen(struct loop *l, int fd, unsigned events, void *data)
{
	struct fake *f = data;
	int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	(void)events;
	if (cfd < 0)
		return;
	f->accepts++;
	if (f->hang_up) {
		close(cfd);
		return;
	}
	fake_close_client(f);
	f->cfd = cfd;
	f->inlen = 0;
	assert_int_equal(loop_watch(l, cfd, LOOP_READ, fake_on_client, f), 0);
}

static void fake_start(struct fake *f, struct loop *l, const char *dir, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(f, 0, sizeof(*f));
	f->loop = l;
	f->cfd = -1;
	snprintf(f->path, sizeof(f->path), "%s/%s", dir, name);
	strcpy(sa.sun_path, f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(loop_watch(l, f->lfd, LOOP_READ, fake_on_listen, f), 0);
}

static void fake_stop(struct fake *f)
{
	fake_close_client(f);
	loop_unwatch(f->loop, f->lfd);
	close(f->lfd);
	unlink(f->path);
}

/* ----- Callbacks that record what they were told ----- */

struct rec {
	int calls;
	bool null;		/* the last call was "no reply" (it was sent) */
	bool unsent;		/* ... was DLOCKD_UNSENT (it never was) */
	char str[64];		/* the last reply's string */
	int64_t at_ms;		/* when it was called last */
	int seq;		/* the order of the calls, over all recs */
	struct redis_node *resend_on;	/* when set: send again from the callback */
	struct rec *resend_rec;
};

static int seq;
static bool in_send;

static void on_reply(void *ctx, redisReply *r)
{
	struct rec *x = ctx;

	if (in_send)
		fail_msg("a callback ran inside redis_node_send()");
	x->calls++;
	x->null = !r;
	x->unsent = r && r->type == REDIS_REPLY_ERROR && !strcmp(r->str, "DLOCKD_UNSENT");
	x->str[0] = '\0';
	if (r && r->str)
		snprintf(x->str, sizeof(x->str), "%s", r->str);
	x->at_ms = now_ms();
	x->seq = ++seq;
	if (x->resend_on) {
		struct redis_node *c = x->resend_on;

		x->resend_on = NULL;
		in_send = true;
		redis_node_send(c, 1, (const char *[]){ "PING" }, NULL, 0, on_reply,
				x->resend_rec);
		in_send = false;
	}
}

static void send_cmd(struct redis_node *c, const char *cmd, const char *arg, struct rec *x)
{
	in_send = true;
	redis_node_send(c, arg ? 2 : 1, (const char *[]){ cmd, arg }, NULL, 0, on_reply, x);
	in_send = false;
}

/* ----- Fixture ----- */

#define WAIT_MS 5000	/* generous: a loaded machine is slow, never this slow */

/* Turn the loop until cond holds (failing after ms). */
#define TURN_UNTIL(l, cond, ms)                                                     \
	do {                                                                        \
		int64_t until_ = now_ms() + (ms);                                   \
		while (!(cond) && now_ms() < until_)                                \
			loop_turn((l), 10);                                         \
		if (!(cond))                                                        \
			fail_msg("line %d: still not %s after %d ms", __LINE__,     \
				 #cond, (int)(ms));                                 \
	} while (0)

/* Turn the loop for ms. */
static void turn_for(struct loop *l, int64_t ms)
{
	int64_t until = now_ms() + ms;

	while (now_ms() < until)
		loop_turn(l, 5);
}

struct fixture {
	char dir[64];
	struct loop *loop;
	struct fake a, b;
	struct redis_url url_a, url_b;
};

static const struct redis_node_timing default_timing = {
	.command_timeout_ms = COMMAND_TIMEOUT_MS,
	.reply_wait_ms = REPLY_WAIT_MS,
	.deadline_ms = DEADLINE_MS,
	.backoff_min_ms = BACKOFF_MIN_MS,
	.backoff_max_ms = BACKOFF_MAX_MS,
	.restore_ms = RESTORE_MS,
	.stable_ms = STABLE_MS,
	.restore_backoff_ms = RESTORE_BACKOFF_MS,
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_redis_conn.XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	fx->loop = loop_new();
	if (!fx->loop)
		return -1;
	fake_start(&fx->a, fx->loop, fx->dir, "a.sock");
	fake_start(&fx->b, fx->loop, fx->dir, "b.sock");
	fx->url_a = (struct redis_url){ .unix_path = fx->a.path };
	fx->url_b = (struct redis_url){ .unix_path = fx->b.path };
	timing = default_timing;
	seq = 0;
	buffer_writes = 0;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	fake_stop(&fx->a);
	fake_stop(&fx->b);
	loop_free(fx->loop);
	rmdir(fx->dir);
	free(fx);
	timing = default_timing;
	return 0;
}

/* Timeouts short enough for a test: overdue after 100 ms, "no reply"
 * after 400 ms. */
static void short_timing(void)
{
	timing.command_timeout_ms = 100;
	timing.reply_wait_ms = 400;
	timing.deadline_ms = 50;
}

/* A connection to f that has answered a PING (set-up and TIME done). */
static struct redis_node *connected(struct fixture *fx, const struct redis_url *url)
{
	struct redis_node *c = redis_node_new(fx->loop, url);
	struct rec ping = { 0 };

	send_cmd(c, "PING", NULL, &ping);
	TURN_UNTIL(fx->loop, ping.calls == 1, WAIT_MS);
	assert_false(ping.null);
	assert_string_equal(ping.str, "PONG");
	assert_true(redis_node_idle(c));
	return c;
}

/* ----- Tests ----- */

/* Commands queued in one turn leave in one write; the replies come back
 * to their callbacks in send order, never from inside the send. */
static void test_redis_conn__one_write_per_turn_replies_in_order(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c = connected(fx, &fx->url_a);
	struct rec r[5] = { 0 };
	const char *words[5] = { "one", "two", "three", "four", "five" };
	int before = fx->a.ncmds, reads = fx->a.reads, k;

	buffer_writes = 0;
	for (int i = 0; i < 5; i++)
		send_cmd(c, "ECHO", words[i], &r[i]);
	for (int i = 0; i < 5; i++)
		assert_int_equal(r[i].calls, 0);
	assert_false(redis_node_idle(c));
	TURN_UNTIL(fx->loop, r[4].calls == 1, WAIT_MS);
	assert_int_equal(buffer_writes, 1);
	assert_int_equal(fx->a.reads - reads, 1);
	k = before;
	for (int i = 0; i < 5; i++) {
		assert_int_equal(r[i].calls, 1);
		assert_false(r[i].null);
		assert_string_equal(r[i].str, words[i]);
		while (k < fx->a.ncmds && !strcmp(fx->a.cmds[k], "TIME"))
			k++;	/* a clock probe may ride along (after a slow one) */
		assert_true(k < fx->a.ncmds);
		assert_string_equal(fx->a.cmds[k++] + 5, words[i]);
		if (i)
			assert_true(r[i].seq > r[i - 1].seq);
	}
	assert_int_equal(k, fx->a.ncmds);
	assert_true(redis_node_idle(c));

	/* a second turn's commands make a second write, not more */
	buffer_writes = 0;
	send_cmd(c, "ECHO", "six", &r[0]);
	send_cmd(c, "ECHO", "seven", &r[1]);
	TURN_UNTIL(fx->loop, r[1].calls == 2, WAIT_MS);
	assert_int_equal(buffer_writes, 1);
	assert_string_equal(r[0].str, "six");
	assert_string_equal(r[1].str, "seven");
	redis_node_free(c);
}

/* Past its timeout a command makes the connection overdue: a new command
 * is told "no reply" at once (before the loop sleeps, never reaching
 * Redis); the one sent is told only after the reply wait; then the
 * connection is closed. */
static void test_redis_conn__overdue(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	struct rec sent = { 0 }, later = { 0 };
	int64_t t0;
	int before;

	short_timing();
	c = connected(fx, &fx->url_a);
	fx->a.silent = true;
	before = fx->a.ncmds;
	t0 = now_ms();
	send_cmd(c, "ECHO", "sent", &sent);
	TURN_UNTIL(fx->loop, c->overdue, WAIT_MS);
	assert_true(now_ms() - t0 >= 100);
	assert_int_equal(sent.calls, 0);

	send_cmd(c, "ECHO", "later", &later);
	assert_int_equal(later.calls, 0);	/* not inside the send */
	loop_turn(fx->loop, 0);
	assert_int_equal(later.calls, 1);
	assert_true(later.unsent);	/* never sent: it says so */
	assert_int_equal(sent.calls, 0);	/* still waiting for its reply */
	assert_non_null(c->ctx);

	TURN_UNTIL(fx->loop, sent.calls == 1, WAIT_MS);
	assert_true(sent.null);
	assert_true(sent.at_ms - t0 >= 400);
	TURN_UNTIL(fx->loop, fx->a.eofs == 1, WAIT_MS);
	/* it worked: the node makes it again by itself (its set-up and
	 * TIME, which the silent Redis leaves unanswered) */
	TURN_UNTIL(fx->loop, fx->a.accepts == 2, WAIT_MS);
	assert_string_equal(fx->a.cmds[before], "ECHO sent");
	for (int i = before + 1; i < fx->a.ncmds; i++)	/* "later" never reached Redis */
		assert_string_equal(fx->a.cmds[i], "TIME");
	turn_for(fx->loop, 50);
	assert_int_equal(sent.calls, 1);
	assert_int_equal(later.calls, 1);
	assert_true(redis_node_idle(c));
	redis_node_free(c);
	assert_int_equal(sent.calls, 1);
}

/* A reply that comes before the reply wait is over ends the overdue
 * state: the command hears what really happened. */
static void test_redis_conn__late_reply_within_the_wait_is_delivered(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	struct rec slow = { 0 }, next = { 0 };

	short_timing();
	c = connected(fx, &fx->url_a);
	fx->a.silent = true;
	send_cmd(c, "ECHO", "slow", &slow);
	TURN_UNTIL(fx->loop, c->overdue, WAIT_MS);
	fake_write(&fx->a, "$4\r\nslow\r\n", 10);	/* Redis resumes */
	fx->a.silent = false;
	TURN_UNTIL(fx->loop, slow.calls == 1, WAIT_MS);
	assert_false(slow.null);
	assert_string_equal(slow.str, "slow");
	assert_false(c->overdue);
	send_cmd(c, "ECHO", "next", &next);
	TURN_UNTIL(fx->loop, next.calls == 1, WAIT_MS);
	assert_string_equal(next.str, "next");
	assert_int_equal(fx->a.accepts, 1);
	redis_node_free(c);
}

/* When the connection drops, every command waiting is told exactly once:
 * "no reply" if it was sent (it may have run), DLOCKD_UNSENT if it was
 * held for the clock probe; so is every one still waiting when the
 * connection is freed, even one its callback sends meanwhile. */
static void test_redis_conn__every_callback_once_on_drop(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	struct rec r[3] = { 0 }, held[2] = { 0 }, f[2] = { 0 }, resent = { 0 };

	/* sent, and Redis hangs up */
	c = connected(fx, &fx->url_a);
	fx->a.silent = true;
	for (int i = 0; i < 3; i++)
		send_cmd(c, "ECHO", "x", &r[i]);
	TURN_UNTIL(fx->loop, fx->a.ncmds >= 5, WAIT_MS);	/* TIME, PING, 3 x ECHO */
	fake_close_client(&fx->a);
	TURN_UNTIL(fx->loop, r[2].calls == 1, WAIT_MS);
	turn_for(fx->loop, 50);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].calls, 1);
		assert_true(r[i].null);
	}
	assert_true(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
	assert_true(redis_node_idle(c));
	redis_node_free(c);

	/* held until TIME answers, which it never does */
	c = redis_node_new(fx->loop, &fx->url_b);
	fx->b.silent = true;
	send_cmd(c, "ECHO", "h1", &held[0]);
	send_cmd(c, "ECHO", "h2", &held[1]);
	TURN_UNTIL(fx->loop, fx->b.ncmds == 1, WAIT_MS);
	assert_string_equal(fx->b.cmds[0], "TIME");
	fake_close_client(&fx->b);
	TURN_UNTIL(fx->loop, held[1].calls == 1, WAIT_MS);
	turn_for(fx->loop, 50);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(held[i].calls, 1);
		assert_true(held[i].unsent);
	}
	assert_int_equal(fx->b.ncmds, 1);	/* the held ones were never sent */
	redis_node_free(c);

	/* freed while one is held */
	memset(held, 0, sizeof(held));
	c = redis_node_new(fx->loop, &fx->url_b);
	send_cmd(c, "ECHO", "h3", &held[0]);
	TURN_UNTIL(fx->loop, fx->b.ncmds == 2, WAIT_MS);	/* its TIME */
	assert_int_equal(held[0].calls, 0);
	redis_node_free(c);
	assert_int_equal(held[0].calls, 1);
	assert_true(held[0].unsent);

	/* freed with commands in flight; a callback sends again meanwhile */
	fx->a.silent = false;
	c = connected(fx, &fx->url_a);
	fx->a.silent = true;
	f[0].resend_on = c;
	f[0].resend_rec = &resent;
	send_cmd(c, "ECHO", "f1", &f[0]);
	send_cmd(c, "ECHO", "f2", &f[1]);
	loop_turn(fx->loop, 0);
	redis_node_free(c);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(f[i].calls, 1);
		assert_true(f[i].null);
	}
	assert_int_equal(resent.calls, 1);
	assert_true(resent.unsent);	/* sent while freed: never sent */
	turn_for(fx->loop, 50);		/* nothing of c is left on the loop */
	assert_int_equal(f[0].calls + f[1].calls + resent.calls, 3);
}

/* After failed connects the next try waits 50 ms, then twice as long each
 * time up to the cap; commands meanwhile fail at once without a connect. */
static void test_redis_conn__reconnect_backs_off(void **state)
{
	struct fixture *fx = *state;
	struct redis_url nowhere = { .unix_path = (char *)"/nonexistent/dlockd-test.sock" };
	struct redis_node *c;
	int64_t before[8], after[8];	/* around the send that tried to connect */
	int n = 0, sends = 0, told = 0;
	unsigned seen;
	struct rec r = { 0 };

	timing.backoff_max_ms = 400;	/* the cap, reached sooner */
	c = redis_node_new(fx->loop, &nowhere);
	seen = c->connects;
	for (int64_t until = now_ms() + 10000; n < 7 && now_ms() < until;) {
		int64_t t = now_ms();

		send_cmd(c, "PING", NULL, &r);
		sends++;
		if (c->connects != seen) {
			assert_int_equal(c->connects, seen + 1);
			seen = c->connects;
			before[n] = t;
			after[n++] = now_ms();
		}
		loop_turn(fx->loop, 2);
		assert_int_equal(r.calls, sends);	/* each told, in its turn */
		assert_true(r.unsent);
	}
	told = r.calls;
	assert_int_equal(n, 7);
	for (int i = 1; i < n; i++) {
		int64_t want = i < 4 ? 50 << (i - 1) : 400;	/* 50 100 200 400 400 400 */
		/* the most the tries can have been apart (the clock was read
		 * inside the sends) */
		int64_t gap = after[i] - before[i - 1];

		if (gap < want)
			fail_msg("try %d came %lld ms after the one before, not >= %lld", i,
				 (long long)gap, (long long)want);
	}
	assert_true(told > n);		/* most commands never tried to connect */
	redis_node_free(c);
}

/* A connection that never worked (Redis hung up before answering the
 * set-up) backs off too; one that worked and dropped is replaced at once
 * (by the node itself, or the next command, whichever comes first), and
 * the backoff starts again from its minimum. The
 * backoff is lengthened here so that "no connect yet" cannot race it. */
static void test_redis_conn__reconnects_at_once_after_a_working_connection(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	struct rec x = { 0 }, y = { 0 }, z = { 0 }, w = { 0 };
	unsigned connects;
	int before;

	timing.backoff_min_ms = 300;
	timing.backoff_max_ms = 4000;
	timing.stable_ms = 0;	/* a connection that worked is stable at once */

	/* accepted, then hung up on before TIME's answer: not working */
	fx->a.hang_up = true;
	c = redis_node_new(fx->loop, &fx->url_a);
	send_cmd(c, "PING", NULL, &x);
	TURN_UNTIL(fx->loop, x.calls == 1, WAIT_MS);
	assert_true(x.unsent);	/* held behind the TIME, never sent */
	assert_int_equal(fx->a.accepts, 1);
	connects = c->connects;
	send_cmd(c, "PING", NULL, &y);
	assert_int_equal(c->connects, connects);	/* backing off: no connect */
	TURN_UNTIL(fx->loop, y.calls == 1, WAIT_MS);
	assert_true(y.unsent);
	assert_int_equal(c->backoff_ms, 600);

	/* after the backoff it connects, and this time it works */
	fx->a.hang_up = false;
	turn_for(fx->loop, 350);
	send_cmd(c, "PING", NULL, &z);
	TURN_UNTIL(fx->loop, z.calls == 1, WAIT_MS);
	assert_false(z.null);
	assert_int_equal(fx->a.accepts, 2);

	/* working, then dropped: reconnected at once */
	memset(&x, 0, sizeof(x));
	fx->a.silent = true;
	before = fx->a.ncmds;
	send_cmd(c, "PING", NULL, &x);
	TURN_UNTIL(fx->loop, fx->a.ncmds > before, WAIT_MS);
	fake_close_client(&fx->a);
	TURN_UNTIL(fx->loop, x.calls == 1, WAIT_MS);
	assert_true(x.null);
	fx->a.silent = false;
	send_cmd(c, "ECHO", "again", &w);
	TURN_UNTIL(fx->loop, w.calls == 1, WAIT_MS);
	assert_false(w.null);
	assert_string_equal(w.str, "again");
	assert_int_equal(fx->a.accepts, 3);
	assert_int_equal(c->backoff_ms, 300);
	redis_node_free(c);
}

/* A working connection that is lost is made again by the node itself,
 * with no command to send, and measures Redis' clock: the next call finds
 * it ready. While Redis will not serve, the tries come at the backoff's
 * pace, and they stop when the restore window ends; a command then
 * reconnects, as before. One unused for longer than the window is not
 * made again by itself. */
static void test_redis_conn__a_lost_working_connection_is_restored_without_a_command(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	struct rec x = { 0 };
	int tries, accepts;

	timing.backoff_min_ms = 50;
	timing.backoff_max_ms = 200;
	timing.restore_ms = 1500;
	timing.stable_ms = 0;	/* every working connection is stable */
	c = connected(fx, &fx->url_a);
	assert_int_equal(fx->a.accepts, 1);
	fake_close_client(&fx->a);
	TURN_UNTIL(fx->loop, fx->a.accepts == 2 && c->ready, WAIT_MS);
	assert_true(c->timed);
	assert_true(redis_node_idle(c));

	/* lost again; now Redis hangs up on every connection: tries at 0,
	 * 50, 150, 350, 550, 750 and 950 ms, not one per turn */
	fx->a.hang_up = true;
	fake_close_client(&fx->a);
	turn_for(fx->loop, 1000);
	tries = fx->a.accepts - 2;
	if (tries < 3 || tries > 9)
		fail_msg("%d tries in the first second, not 3 to 9", tries);
	/* the window (1.5 s) ends: no more tries */
	turn_for(fx->loop, 1000);
	accepts = fx->a.accepts;
	turn_for(fx->loop, 600);
	assert_int_equal(fx->a.accepts, accepts);
	assert_false(c->ready);

	/* a command still reconnects once the backoff is over */
	fx->a.hang_up = false;
	send_cmd(c, "ECHO", "back", &x);
	TURN_UNTIL(fx->loop, x.calls == 1, WAIT_MS);
	assert_false(x.null);
	assert_string_equal(x.str, "back");
	assert_int_equal(fx->a.accepts, accepts + 1);

	/* unused for longer than the window (Redis' idle timeout closes it):
	 * not made again until a command comes */
	turn_for(fx->loop, 1600);
	fake_close_client(&fx->a);
	turn_for(fx->loop, 500);
	assert_int_equal(fx->a.accepts, accepts + 1);
	redis_node_free(c);
}

/* Redis gone (nothing listens) after a used connection was lost: while
 * the node reconnects by itself its tries come every RESTORE_BACKOFF_MS
 * (200 ms) at most, where the backoff grows to 1 s otherwise; so Redis
 * back after an outage is found within that, not up to a second later
 * (calls meanwhile got 503 at once while Redis served: a probe saw 126). */
static void test_redis_conn__redis_back_after_an_outage_is_found_soon(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	int64_t t0;

	timing.stable_ms = 0;
	c = connected(fx, &fx->url_a);
	fake_stop(&fx->a);		/* its client too: the connection is lost */
	turn_for(fx->loop, 2000);	/* the tries' backoff would be 1 s by now */
	assert_false(c->ready);
	fake_start(&fx->a, fx->loop, fx->dir, "a.sock");
	t0 = now_ms();
	TURN_UNTIL(fx->loop, c->ready, WAIT_MS);
	if (now_ms() - t0 > 200 + 150)
		fail_msg("Redis back was found after %lld ms, not within 200 ms",
			 (long long)(now_ms() - t0));
	redis_node_free(c);
}

/* Redis closes idle connections (its timeout): a node last used at t0
 * is made again by itself until t0 + the window, not for a window after
 * each loss (a probe saw an idle dlockd reconnect every 3 s for good). */
static void test_redis_conn__idle_closes_stop_a_window_after_the_last_use(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	int64_t t0, until;
	int at_window_end = -1;

	timing.stable_ms = 0;
	timing.restore_ms = 1000;
	c = connected(fx, &fx->url_a);	/* used now */
	t0 = now_ms();
	for (until = t0 + 2500; now_ms() < until;) {
		if (c->ready && fx->a.cfd >= 0 && now_ms() - c->ready_ms >= 200)
			fake_close_client(&fx->a);	/* idle for 200 ms: closed */
		loop_turn(fx->loop, 5);
		if (now_ms() - t0 >= 1100 && at_window_end < 0)
			at_window_end = fx->a.accepts;
	}
	if (at_window_end < 3)
		fail_msg("made again %d times within the window, not 2 or more",
			 at_window_end - 1);
	assert_int_equal(fx->a.accepts, at_window_end);	/* none after it */
	redis_node_free(c);
}

/* A connection lost before it was stable is not made again at once: a
 * Redis at maxclients accepts, answers an error and closes, and a
 * CLIENT KILL loop closes each connection as soon as it works. Either
 * way the tries keep to the backoff's pace (50, 100, 200, 400, 400 ms):
 * about six in 1.2 s, where an immediate retry made thousands. */
static void test_redis_conn__no_tight_reconnect_loop(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *c;
	int64_t until;
	int tries;

	timing.backoff_max_ms = 400;
	timing.stable_ms = 100;
	c = connected(fx, &fx->url_a);
	turn_for(fx->loop, 150);		/* stable */

	/* Redis full: every try is answered an error and closed */
	fx->a.full = true;
	fake_close_client(&fx->a);
	turn_for(fx->loop, 1200);
	tries = fx->a.accepts - 1;
	if (tries < 3 || tries > 8)
		fail_msg("%d tries in 1.2 s with Redis full, not 3 to 8", tries);
	assert_false(c->ready);

	/* Redis serves again, but each connection is killed once it works */
	fx->a.full = false;
	turn_for(fx->loop, 450);		/* the backoff's end: one works */
	assert_true(c->ready);
	tries = fx->a.accepts;
	for (until = now_ms() + 1200; now_ms() < until;) {
		if (c->ready && fx->a.cfd >= 0)
			fake_close_client(&fx->a);
		loop_turn(fx->loop, 5);
	}
	tries = fx->a.accepts - tries;
	if (tries < 2 || tries > 8)
		fail_msg("%d connections in 1.2 s with each killed once it worked, not 2 to 8",
			 tries);
	redis_node_free(c);
}

/* Two connections on one loop: one going overdue and dropped changes
 * nothing for the other, and their commands go to their own Redis. */
static void test_redis_conn__two_connections_are_independent(void **state)
{
	struct fixture *fx = *state;
	struct redis_node *a, *b;
	struct rec ra = { 0 }, ra2 = { 0 }, rb[4] = { 0 };

	short_timing();
	a = connected(fx, &fx->url_a);
	b = connected(fx, &fx->url_b);
	fx->a.silent = true;

	send_cmd(a, "ECHO", "to-a", &ra);
	send_cmd(b, "ECHO", "to-b", &rb[0]);
	TURN_UNTIL(fx->loop, rb[0].calls == 1, WAIT_MS);
	assert_string_equal(rb[0].str, "to-b");
	assert_string_equal(fx->a.cmds[fx->a.ncmds - 1], "ECHO to-a");
	assert_string_equal(fx->b.cmds[fx->b.ncmds - 1], "ECHO to-b");

	TURN_UNTIL(fx->loop, a->overdue, WAIT_MS);
	assert_false(b->overdue);
	send_cmd(a, "ECHO", "a-again", &ra2);
	send_cmd(b, "ECHO", "b-again", &rb[1]);
	TURN_UNTIL(fx->loop, rb[1].calls == 1 && ra2.calls == 1, WAIT_MS);
	assert_true(ra2.unsent);	/* a is overdue: not sent */
	assert_false(rb[1].null);
	assert_string_equal(rb[1].str, "b-again");

	TURN_UNTIL(fx->loop, ra.calls == 1, WAIT_MS);
	assert_true(ra.null);
	TURN_UNTIL(fx->loop, fx->a.eofs == 1, WAIT_MS);	/* a's dropped */
	assert_non_null(b->ctx);
	send_cmd(b, "ECHO", "b-after", &rb[2]);
	TURN_UNTIL(fx->loop, rb[2].calls == 1, WAIT_MS);
	assert_string_equal(rb[2].str, "b-after");

	/* freeing a leaves b watched and working */
	redis_node_free(a);
	send_cmd(b, "ECHO", "b-last", &rb[3]);
	TURN_UNTIL(fx->loop, rb[3].calls == 1, WAIT_MS);
	assert_string_equal(rb[3].str, "b-last");
	assert_int_equal(fx->b.accepts, 1);
	assert_int_equal(ra.calls + ra2.calls, 2);
	redis_node_free(b);
}

/* resp_format writes what hiredis' redisFormatCommandArgv does, for
 * empty, binary and long arguments alike. */
static void test_redis_conn__resp_format_is_hiredis(void **state)
{
	static char big[3000];
	const char *av[] = { "EVALSHA", "", "a\0b\r\nc", big, "-12" };
	const size_t lv[] = { 7, 0, 7, sizeof(big), 3 };
	char *want, *out;
	long long wlen;

	(void)state;
	memset(big, 'x', sizeof(big));
	for (int argc = 1; argc <= (int)ARRAY_SIZE(av); argc++) {
		wlen = redisFormatCommandArgv(&want, argc, av, lv);
		assert_true(wlen > 0);
		out = xmalloc(resp_room(argc, lv));
		assert_int_equal(resp_format(out, argc, av, lv) - out, wlen);
		assert_memory_equal(out, want, (size_t)wlen);
		free(out);
		redisFreeCommand(want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_conn__resp_format_is_hiredis),
		cmocka_unit_test_setup_teardown(test_redis_conn__one_write_per_turn_replies_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__overdue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__late_reply_within_the_wait_is_delivered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__every_callback_once_on_drop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__reconnect_backs_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__reconnects_at_once_after_a_working_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__a_lost_working_connection_is_restored_without_a_command, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__no_tight_reconnect_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__idle_closes_stop_a_window_after_the_last_use, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__redis_back_after_an_outage_is_found_soon, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redis_conn__two_connections_are_independent, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);	/* as dlockd does: writes to a closed socket fail */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
