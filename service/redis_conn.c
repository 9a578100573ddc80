/* redis_conn.c -- hiredis connections: URL parsing, a blocking connection
 * for the subscriber, and one pipelined, non-blocking connection per event
 * loop thread.
 *
 * A loop's connection takes commands from every request the loop serves
 * and writes them in one go when the loop asks (redis_conn_flush), so that
 * Redis reads and answers many per system call; replies come back in send
 * order and go to their callbacks from redis_conn_on_readable(). A command
 * not answered within COMMAND_TIMEOUT_MS, or any I/O error, drops the
 * connection: every command still waiting is told "no reply" (NULL), and
 * the next command reconnects, but no sooner than a backoff (50 ms doubling
 * to 1 s) so that a dead Redis costs a request a clock read, not a
 * connect(). Set-up (AUTH, SELECT, TIME) is pipelined ahead of the first
 * commands. Callbacks never run inside redis_conn_send(). */
#include "redis_conn.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CONNECT_TIMEOUT_MS 1000
#define COMMAND_TIMEOUT_MS 2000
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

/* A command must have run this long after it was sent, or not at all
 * (redis_conn_deadline_ms); the rest of COMMAND_TIMEOUT_MS is for its
 * reply to arrive. */
#define DEADLINE_MS (COMMAND_TIMEOUT_MS - 500)

static struct redis_url conf_url;

/* ----- URL parsing ----- */

static char *dup_range(const char *a, const char *b)
{
	char *s = xmalloc((size_t)(b - a) + 1);

	memcpy(s, a, (size_t)(b - a));
	s[b - a] = '\0';
	return s;
}

static int parse_num(const char *a, const char *b, int min, int max, int *out)
{
	long v = 0;

	if (a == b || b - a > 9)
		return -1;
	for (const char *p = a; p < b; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

int redis_url_parse(const char *s, struct redis_url *u)
{
	const char *p, *at, *slash, *colon, *end;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
	if (!strncmp(s, "unix://", 7)) {
		if (s[7] != '/' || s[8] == '\0')
			return -1;
		u->unix_path = xstrdup(s + 7);
		return 0;
	}
	if (strncmp(s, "redis://", 8))
		return -1;
	p = s + 8;
	end = p + strlen(p);
	slash = strchr(p, '/');
	if (!slash)
		slash = end;
	at = memchr(p, '@', (size_t)(slash - p));
	if (at) {
		colon = memchr(p, ':', (size_t)(at - p));
		if (!colon)
			goto fail;	/* "user@" alone is ambiguous; require user:password@ */
		if (colon > p)
			u->user = dup_range(p, colon);
		u->password = dup_range(colon + 1, at);
		p = at + 1;
	}
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(slash - p));

		if (!close)
			goto fail;
		u->host = dup_range(p + 1, close);
		colon = close + 1 < slash && close[1] == ':' ? close + 1 : NULL;
		if (!colon && close + 1 != slash)
			goto fail;
	} else {
		colon = memchr(p, ':', (size_t)(slash - p));
		u->host = dup_range(p, colon ? colon : slash);
	}
	if (!u->host[0])
		goto fail;
	if (colon && parse_num(colon + 1, slash, 1, 65535, &u->port) < 0)
		goto fail;
	if (slash < end && slash + 1 < end && parse_num(slash + 1, end, 0, 1000000, &u->db) < 0)
		goto fail;
	return 0;
fail:
	redis_url_release(u);
	return -1;
}

void redis_url_release(struct redis_url *u)
{
	free(u->host);
	free(u->unix_path);
	free(u->user);
	free(u->password);
	memset(u, 0, sizeof(*u));
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
	return redis_url_parse(url, &conf_url);
}

void redis_conn_cleanup(void)
{
	redis_url_release(&conf_url);
}

/* ----- The loop's pipelined connection ----- */

/* A command sent and not yet answered. */
struct pending {
	redis_reply_fn fn;
	void *ctx;
	int64_t give_up_ms;	/* monotonic */
	struct pending *next;
};

struct pending_list {
	struct pending *head, *tail;
};

struct thread_conn {
	redisContext *ctx;		/* non-blocking; NULL while down */
	bool connected;			/* the socket's connect() completed */
	bool ready;			/* set-up answered: the connection works */
	bool broken;			/* drop it once the current callbacks return */
	struct pending_list sent;	/* awaiting replies, in send order */
	struct pending_list failed;	/* to be told "no reply" by redis_conn_run */
	int64_t next_try_ms;		/* monotonic; no reconnect before this */
	int64_t backoff_ms;
};

static __thread struct thread_conn *tc;

/* Redis' clock minus ours (ms), from the last TIME answer of any loop. */
static int64_t clock_offset_ms;

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

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

/* Close the connection; what waits on it fails on the next run. */
static void conn_drop(const char *why)
{
	if (!tc->ctx)
		return;
	log_warn("redis connection lost: %s", why);
	redisFree(tc->ctx);
	tc->ctx = NULL;
	list_append(&tc->failed, &tc->sent);
	if (tc->ready) {
		tc->next_try_ms = now_ms();	/* it worked: try again at once */
		tc->backoff_ms = BACKOFF_MIN_MS;
	} else {
		back_off();
	}
	tc->connected = tc->ready = tc->broken = false;
}

static void send_raw(int argc, const char **argv, const size_t *lens, redis_reply_fn fn,
		     void *ctx)
{
	struct pending *p = xmalloc(sizeof(*p));

	p->fn = fn;
	p->ctx = ctx;
	p->give_up_ms = now_ms() + COMMAND_TIMEOUT_MS;
	if (tc->ctx && redisAppendCommandArgv(tc->ctx, argc, argv, lens) != REDIS_OK) {
		conn_drop(tc->ctx->errstr);
		list_push(&tc->failed, p);
		return;
	}
	list_push(tc->ctx ? &tc->sent : &tc->failed, p);
}

/* Set-up replies: an error means the connection is no use. */
static void on_setup(void *ctx, redisReply *r)
{
	(void)ctx;
	if (r && r->type == REDIS_REPLY_ERROR) {
		log_warn("redis set-up (AUTH or SELECT) failed: %s", r->str);
		tc->broken = true;
	}
}

/* Learn how far Redis' clock is from ours (to a round trip), so that
 * deadlines can be given in Redis' clock even when Redis runs elsewhere. */
static void on_time(void *ctx, redisReply *r)
{
	int64_t sent = (int64_t)(intptr_t)ctx, now = wall_ms();

	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING) {
		if (r)
			tc->broken = true;
		return;
	}
	__atomic_store_n(&clock_offset_ms,
			 strtoll(r->element[0]->str, NULL, 10) * 1000 +
			 strtoll(r->element[1]->str, NULL, 10) / 1000 - (sent + now) / 2,
			 __ATOMIC_RELAXED);
	if (!tc->broken) {
		tc->ready = true;
		tc->backoff_ms = BACKOFF_MIN_MS;
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
		send_raw(cmds[i].argc, cmds[i].argv, NULL, on_setup, NULL);
	send_raw(1, (const char *[]){ "TIME" }, NULL, on_time, (void *)(intptr_t)wall_ms());
}

void redis_conn_send(int argc, const char **argv, const size_t *lens, bool deadline,
		     redis_reply_fn fn, void *ctx)
{
	const char *av[REDIS_CONN_MAX_ARGS + 1];
	size_t lv[REDIS_CONN_MAX_ARGS + 1];
	char by[24];

	if (argc > REDIS_CONN_MAX_ARGS)
		abort();
	if (!tc->ctx && now_ms() >= tc->next_try_ms)
		conn_open_async();
	for (int i = 0; i < argc; i++) {
		av[i] = argv[i];
		lv[i] = lens ? lens[i] : strlen(argv[i]);
	}
	if (deadline) {
		/* past it, dlockd has answered 503: the command must do nothing */
		snprintf(by, sizeof(by), "%lld",
			 (long long)(wall_ms() + __atomic_load_n(&clock_offset_ms, __ATOMIC_RELAXED) +
				     DEADLINE_MS));
		av[argc] = by;
		lv[argc++] = strlen(by);
	}
	send_raw(argc, av, lv, fn, ctx);
}

int redis_conn_fd(unsigned *events)
{
	*events = 0;
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

	if (tc->sent.head && now >= tc->sent.head->give_up_ms) {
		char why[64];

		snprintf(why, sizeof(why), "no reply within %d ms", COMMAND_TIMEOUT_MS);
		conn_drop(why);
	}
	while ((p = list_pop(&tc->failed))) {
		p->fn(p->ctx, NULL);
		free(p);
		ran = true;
	}
	return ran;
}

int64_t redis_conn_timeout_ms(int64_t now)
{
	if (tc->failed.head)
		return 0;
	if (!tc->sent.head)
		return -1;
	return tc->sent.head->give_up_ms > now ? tc->sent.head->give_up_ms - now : 0;
}

bool redis_conn_idle(void)
{
	return !tc->sent.head && !tc->failed.head;
}

void redis_conn_thread_exit(void)
{
	if (!tc)
		return;
	if (tc->ctx) {
		redisFree(tc->ctx);
		tc->ctx = NULL;
	}
	list_append(&tc->failed, &tc->sent);
	redis_conn_run(now_ms());
	free(tc);
	tc = NULL;
}
