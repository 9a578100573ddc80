/* redis_node.c -- the pipelined, non-blocking connection to one Redis
 * node (redis_node.h) that attaches itself to an event loop, any number
 * per loop: a single Redis's (behind redis_conn.c), or each of a
 * cluster's nodes (the router's, redis_cluster.c).
 *
 * A connection takes commands from every request its loop serves and
 * writes them in one go before the loop sleeps (a deferred task queued by
 * the first command of a turn), so that Redis reads and answers many per
 * system call; replies come back in send order and go to their callbacks
 * from the loop's callback for the socket, which the connection watches
 * itself (for writing until connected and while output is queued, for
 * reading once connected). It keeps one loop timer, set to its next
 * give-up (below).
 *
 * Why not hiredis' async API (redisAsyncContext with an adapter, which
 * this otherwise resembles): hiredis 0.14.1, Debian 12's, has no command
 * timeout in its async API at all, and dlockd needs its own rules for
 * when to give up on a command (below), a backoff on reconnecting, and a
 * probe of Redis' clock that holds the first commands back (see
 * "Deadlines in Redis' clock"). So the non-blocking context is driven by
 * hand, with redisAppendCommandArgv, redisBufferWrite, redisBufferRead
 * and redisGetReplyFromReader. With a TLS URL the socket is the TCP one
 * to Redis and carries a GnuTLS session run here, on the loop's thread
 * (redis_tls_io.h): each event on the socket is a step of its handshake
 * until the server is verified (commands wait in the output buffer,
 * unsent), then redis_tls_io_write and _read stand in for
 * redisBufferWrite and redisBufferRead, and the commands queued while a
 * batch is in flight go together once it is answered (conn_corked).
 *
 * A command not answered within COMMAND_TIMEOUT_MS of being sent makes
 * the connection overdue: it takes no new command (each is told
 * DLOCKD_UNSENT at once: it never reaches Redis, and its caller answers
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
 * or its connection is). The next command reconnects, but no sooner than
 * a backoff (50 ms doubling to 1 s) so that a dead Redis costs a request a
 * clock read, not a connect(). A connection that worked and is lost
 * (Redis restarted, failed over, or closed it) is also made again by the
 * node itself, at once and then at the end of each backoff, for
 * RESTORE_MS (if it was used in the last RESTORE_MS): the calls after
 * Redis is back find it connected and its clock measured, instead of the
 * first of each loop paying for the connect and the TIMEs (three round
 * trips; over a slow link, most of a call's 2 s). Set-up (AUTH, SELECT,
 * TIME) is pipelined ahead of the first commands, which are held until
 * TIME has told how far Redis' clock is from ours. Callbacks never run
 * inside redis_node_send(): a command that fails at once is told so from
 * a deferred task of the loop. */
#include "service/redis/redis_node.h"

#include "service/base/list.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/metrics.h"
#include "service/redis/redis_dial.h"
#include "service/redis/redis_target.h"
#include "service/redis/redis_tls_io.h"
#include "service/redis/redis_url.h"
#include "service/base/util.h"

#include <errno.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#define COMMAND_TIMEOUT_MS 2000
/* A command sent gets "no reply" only after this long (see above). */
#define REPLY_WAIT_MS 10000
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000
/* After a working connection is lost, reconnect without waiting for a
 * command for this long (see above): a cluster node that left the map
 * keeps its (unused) connection, and is not tried for ever. */
#define RESTORE_MS 60000
/* A connection "worked" once Redis answered its TIME (a Redis at
 * maxclients answers it with an error and closes: that one did not), and
 * it is stable once it has worked this long. A lost connection that
 * worked is retried at once, unless it was not stable and neither was
 * the one lost before it: then it backs off like a failed connect (a
 * CLIENT KILL loop), so nothing reconnects in a tight loop, and it is
 * logged once. */
#define STABLE_MS 1000
#define RESTORE_BACKOFF_MS 200

/* A command must have run this long after it was sent, or not at all
 * (see "Deadlines in Redis' clock" below); the rest of REPLY_WAIT_MS is
 * for its reply to arrive. */
#define DEADLINE_MS (COMMAND_TIMEOUT_MS - 500)

/* The times above, as the pipelined connections use them. Never changed
 * by dlockd; the unit test (which includes this file) shortens them. */
static struct redis_node_timing {
	int64_t command_timeout_ms;	/* COMMAND_TIMEOUT_MS */
	int64_t reply_wait_ms;		/* REPLY_WAIT_MS */
	int64_t deadline_ms;		/* DEADLINE_MS */
	int64_t backoff_min_ms;		/* BACKOFF_MIN_MS */
	int64_t backoff_max_ms;		/* BACKOFF_MAX_MS */
	int64_t restore_ms;		/* RESTORE_MS */
	int64_t stable_ms;		/* STABLE_MS */
	int64_t restore_backoff_ms;	/* RESTORE_BACKOFF_MS */
} timing = {
	.command_timeout_ms = COMMAND_TIMEOUT_MS,
	.reply_wait_ms = REPLY_WAIT_MS,
	.deadline_ms = DEADLINE_MS,
	.backoff_min_ms = BACKOFF_MIN_MS,
	.backoff_max_ms = BACKOFF_MAX_MS,
	.restore_ms = RESTORE_MS,
	.stable_ms = STABLE_MS,
	.restore_backoff_ms = RESTORE_BACKOFF_MS,
};

/* A command sent (or held) and not yet answered. */
struct pending {
	redis_reply_fn fn;
	void *ctx;
	int64_t give_up_ms;	/* monotonic */
	int64_t sent_us;	/* monotonic, when appended (the round trip's
				 * start); 0: never sent */
	bool answered;		/* told "no reply" (REPLY_WAIT_MS after its send);
				 * a late reply is dropped */
	bool no_master;		/* failed unsent as no master was known (a
				 * sentinel URL): told DLOCKD_NOMASTER */
	bool refused;		/* failed unsent after a refused set-up: told
				 * its error (the connection's refused) */
	struct list_node link;	/* in held, sent or failed */
	struct held_cmd *held;	/* still to be sent (see below); NULL once sent */
};

/* A command waiting for its connection's clock offset, copied. */
struct held_cmd {
	int argc;
	int64_t deadline_from;	/* 0: no deadline argument (see append) */
	const char *argv[REDIS_CONN_MAX_ARGS];
	size_t lens[REDIS_CONN_MAX_ARGS];
	char data[];
};

struct redis_node {
	struct loop *loop;
	const struct redis_url *url;	/* the caller's */
	char *node_host;		/* a cluster node's connection: its address,
					 * instead of the URL's */
	int node_port;
	redisContext *ctx;		/* non-blocking; NULL while down */
	struct redis_tls_io *tls;	/* a TLS URL's session on ctx's socket, run
					 * here (redis_tls_io.h); NULL: plaintext */
	unsigned watching;		/* LOOP_* ctx's socket is watched for; 0: not */
	bool connected;			/* the socket's connect() completed */
	int64_t connected_ms;		/* monotonic: when it did */
	int64_t ready_ms;		/* monotonic: when ready became true */
	bool ready;			/* TIME answered: the connection works */
	int mnode;			/* its node's row in dlockd_redis_up, -1: none */
	bool up_counted;		/* counted ready there */
	bool broken;			/* drop it once the current callbacks return */
	bool overdue;			/* a command went unanswered past its give-up:
					 * send nothing more, close once all are told */
	bool closing;			/* redis_node_free() runs: fail every send */
	bool told_down;			/* "cannot connect" was logged at warn since
					 * the last stable connection was lost */
	bool lost_quick;		/* the last connection lost had worked, but
					 * for less than STABLE_MS */
	bool told_time;			/* "TIME failed" was logged at warn since
					 * TIME last answered */
	bool not_master;		/* a sentinel URL's node answered ROLE or a
					 * command as a replica: drop the connection
					 * once the current callbacks return */
	bool no_master;			/* a sentinel URL's last connect found no
					 * master known */
	char refused[160];		/* the error the last connection's set-up
					 * was refused with, as its held commands
					 * heard it; told to the commands failed
					 * until the next try; "": none */
	bool moving;			/* the sentinels named another master: send
					 * nothing more, close once all are answered */
	unsigned gen;			/* a sentinel URL: redis_target's generation
					 * of the address connected to; 0: none */
	struct list_node held;		/* struct pending, not sent until the
					 * offset is known */
	struct list_node sent;		/* awaiting replies, in send order */
	unsigned sent_n;		/* how many: sent's length */
	unsigned unflushed;		/* of them, appended since the output
					 * buffer was last written out whole */
	struct pending *due;		/* the first of sent not yet told "no reply"
					 * (those before it were: a prefix, as
					 * give_up_ms grows along sent); NULL: none */
	struct list_node failed;	/* to be told why by fail_task */
	unsigned connects;		/* connect attempts so far: tells a new
					 * context from the one a callback ran on */
	int64_t next_try_ms;		/* monotonic; no reconnect before this */
	int64_t backoff_ms;
	int64_t restore_until_ms;	/* monotonic: a working connection was
					 * lost; until then the timer reconnects */
	int64_t used_ms;		/* monotonic: the last caller's command
					 * (or redis_node_open) */

	/* Redis' clock minus now_ms(), a lower bound (see below) */
	int64_t offset_ms;
	bool timed;			/* offset_ms is measured on this connection */
	bool probing;			/* a TIME is in flight */
	int probes;			/* samples in the current round */
	int64_t round_best;		/* largest sample of the round */
	int64_t round_best_rtt;		/* ... and its round trip */
	int64_t next_probe_ms;		/* monotonic: measure again after this */

	struct loop_timer timer;	/* the next give-up (conn_run) */
	struct loop_task flush_task;	/* write what is queued, set the watch */
	struct loop_task fail_task;	/* tell the failed commands */
};

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
 * PROBE_RETRY_MS. A new connection holds its commands, in order, until
 * it has a sample whose round trip is at most half of DEADLINE_MS (or
 * its first round has ended): each of them then has at least that half
 * to reach Redis, where waiting for the round to end would cost every
 * one of them up to three more round trips (3 x 600 ms over a link of
 * 2 x 300 ms, past COMMAND_TIMEOUT_MS). The round goes on behind them;
 * its end, and later rounds, set the value. The offset belongs to the
 * connection: a new one (perhaps to another Redis, after a failover)
 * measures it anew. */
#define PROBE_GOOD_RTT_MS 50
#define PROBE_MAX 4
#define PROBE_EVERY_MS 60000
#define PROBE_RETRY_MS 1000

/* The first command of a list of them (held, sent, failed), the first
 * taken out of it, the command sent after p: or NULL. */
#define pending_first(l) list_entry_or_null(list_first(l), struct pending, link)
#define pending_pop(l) list_entry_or_null(list_pop(l), struct pending, link)
#define sent_after(c, p) list_entry_or_null(list_next(&(c)->sent, &(p)->link), struct pending, link)

/* No reconnect before the backoff, which doubles up to BACKOFF_MAX_MS;
 * up to RESTORE_BACKOFF_MS while the node reconnects by itself and its
 * tries find no Redis at all (refused or not answered: no connection
 * made), so that Redis back after an outage is found within that, and a
 * call in the backoff meanwhile gets its 503 at once. A try that did
 * connect and was refused (at maxclients) keeps to the long backoff: it
 * costs Redis work. */
static void back_off(struct redis_node *c)
{
	int64_t now = now_ms();
	int64_t most = now < c->restore_until_ms && !c->connected ? timing.restore_backoff_ms
								   : timing.backoff_max_ms;

	if (c->backoff_ms > most)
		c->backoff_ms = most;
	c->next_try_ms = now + c->backoff_ms;
	c->backoff_ms = c->backoff_ms * 2 > most ? most : c->backoff_ms * 2;
}

/* Move the commands of sent that still wait for an answer to failed, and
 * free those already told "no reply". Unless written (the connection
 * connected, and its TLS session if any was verified), nothing left the
 * output buffer: those are told they were not sent. */
static void fail_sent(struct redis_node *c, bool written)
{
	struct pending *p;

	c->due = NULL;
	c->sent_n = c->unflushed = 0;
	while ((p = pending_pop(&c->sent))) {
		if (p->answered) {
			free(p);
			continue;
		}
		if (!written)
			p->sent_us = 0;
		list_append(&c->failed, &p->link);
	}
}

/* Could what was queued on the connection have reached Redis? */
static bool conn_written(const struct redis_node *c)
{
	return c->ctx && c->connected && (!c->tls || redis_tls_io_ready(c->tls));
}

/* Stop watching the socket and close it. */
static void conn_close(struct redis_node *c)
{
	if (c->watching)
		loop_unwatch(c->loop, c->ctx->fd);	/* before redisFree closes it */
	c->watching = 0;
	redis_tls_io_free(c->tls);	/* close_notify: before its socket closes */
	c->tls = NULL;
	redisFree(c->ctx);
	c->ctx = NULL;
}

/* dlockd_redis_up: the connection is ready, or no longer. */
static void count_up(struct redis_node *c, bool up)
{
	if (up == c->up_counted)
		return;
	c->up_counted = up;
	metrics_redis_node_ready(c->mnode, up ? 1 : -1);
}

static void conn_schedule(struct redis_node *c);

/* Close the connection; what waits on it fails before the loop sleeps. */
static void conn_drop(struct redis_node *c, const char *why)
{
	bool stable, at_once, written;

	if (!c->ctx)
		return;
	stable = c->ready && now_ms() - c->ready_ms >= timing.stable_ms;
	at_once = stable || (c->ready && !c->lost_quick);
	if (c->ready)
		c->lost_quick = !stable;
	if (stable) {
		log_warn("redis connection lost: %s", why);
		c->told_down = false;	/* the next trouble is news */
	} else {
		/* a connection that never worked (or worked only a moment)
		 * was not lost: say where it went, once until one is stable
		 * (then at debug, every retry) */
		char where[300];

		if (c->url->unix_path)
			snprintf(where, sizeof(where), "unix://%s", c->url->unix_path);
		else if (c->node_host || c->url->host)
			snprintf(where, sizeof(where), "%s:%d",
				 c->node_host ? c->node_host : c->url->host,
				 c->node_host ? c->node_port : c->url->port);
		else
			snprintf(where, sizeof(where), "the master the sentinels named");
		if (c->told_down)
			log_debug("redis: cannot connect to %s: %s; retrying", where, why);
		else if (c->ready)
			log_warn("redis connection lost %lld ms after it was made (to %s): %s; "
				 "retrying, with a backoff if the next is lost as soon",
				 (long long)(now_ms() - c->ready_ms), where, why);
		else
			log_warn("redis: cannot connect to %s: %s; retrying until it answers",
				 where, why);
		c->told_down = true;
	}
	metrics_reconnect(MCONN_COMMAND);
	count_up(c, false);
	written = conn_written(c);
	conn_close(c);
	if (c->gen)
		redis_target_lost(c->url->target, c->gen);	/* ask the sentinels again */
	c->gen = 0;
	fail_sent(c, written);
	list_splice(&c->failed, &c->held);
	/* made again by itself for RESTORE_MS after its last use: an idle
	 * dlockd whose Redis closes idle connections (its timeout) stops */
	if (c->ready)
		c->restore_until_ms = c->used_ms + timing.restore_ms;
	if (at_once) {
		/* it worked: try again at once, whether a command comes or not */
		c->next_try_ms = now_ms();
		c->backoff_ms = timing.backoff_min_ms;
	} else {
		back_off(c);
	}
	c->connected = c->ready = c->broken = c->overdue = c->not_master = c->moving = false;
	c->timed = c->probing = false;
	if (!list_empty(&c->failed))
		loop_defer(c->loop, &c->fail_task);
	conn_schedule(c);
}

/* The node is to reconnect by itself (a working connection was lost), at
 * next_try_ms. */
static bool restoring(const struct redis_node *c)
{
	return !c->ctx && !c->closing && c->next_try_ms < c->restore_until_ms;
}

/* Hand r (NULL: no reply) to p's caller, counting a failure by reason. */
static void tell(struct pending *p, redisReply *r)
{
	int why = redis_fault_reason(r);

	if (why >= 0)
		metrics_redis_error((unsigned)why);
	p->fn(p->ctx, r);
}

/* The connection is now meant for the node at addr. */
static void count_node(struct redis_node *c, const char *addr)
{
	int node = addr ? metrics_redis_node(addr) : -1;

	if (node == c->mnode)
		return;
	count_up(c, false);
	metrics_redis_node_conns(c->mnode, -1);
	metrics_redis_node_conns(node, 1);
	c->mnode = node;
}

static struct pending *pending_new(redis_reply_fn fn, void *ctx)
{
	struct pending *p = xcalloc(1, sizeof(*p));

	p->fn = fn;
	p->ctx = ctx;
	p->give_up_ms = now_ms() + timing.command_timeout_ms;
	return p;
}

/* Tell every failed command why. One that was sent hears "no reply"
 * (NULL): Redis may have run it. One never sent hears an error reply that
 * never came from Redis (redis_reply_made_up), so that its 503 says why
 * and that nothing changed: DLOCKD_NOMASTER if no master was known, or
 * DLOCKD_FAILOVER while the sentinels fail over; if it failed in the
 * backoff after a refused set-up, that refusal (WRONGPASS, DLOCKD_SETUP);
 * else DLOCKD_UNSENT. */
static void tell_failed(struct redis_node *c)
{
	struct pending *p;

	while ((p = pending_pop(&c->failed))) {
		redisReply r = { .type = REDIS_REPLY_ERROR };
		const char *why = NULL;

		if (p->no_master)
			why = c->url->target && redis_target_failing_over(c->url->target)
				      ? "DLOCKD_FAILOVER" : "DLOCKD_NOMASTER";
		else if (p->refused && c->refused[0])
			why = c->refused;
		r.str = (char *)why;
		r.len = why ? strlen(why) : 0;
		free(p->held);
		tell(p, why ? &r : p->sent_us ? NULL : redis_reply_unsent());
		free(p);
	}
}

/* Fail p: it is told why (tell_failed) before the loop sleeps. */
static void fail_later(struct redis_node *c, struct pending *p)
{
	list_append(&c->failed, &p->link);
	loop_defer(c->loop, &c->fail_task);
}

/* Append p's command to the connection, with its deadline argument last
 * if deadline_from (now_ms() clock) is set: DEADLINE_MS after it, in
 * Redis' clock. Then await the reply; or fail p if the connection is
 * down. The first command of a turn queues the write. */
/* The command of the argc arguments av (lv bytes each) in RESP, as
 * redisFormatCommandArgv writes it, at out (room: resp_room's); returns
 * the end. hiredis builds it with an sdscatfmt and a growth per argument:
 * a fifth of dlockd's CPU in an uncontended lock cycle went there. */
static char *resp_format(char *out, int argc, const char *const *av, const size_t *lv)
{
	*out++ = '*';
	out = put_decimal(out, argc);
	*out++ = '\r';
	*out++ = '\n';
	for (int i = 0; i < argc; i++) {
		*out++ = '$';
		out = put_decimal(out, (long long)lv[i]);
		*out++ = '\r';
		*out++ = '\n';
		memcpy(out, av[i], lv[i]);
		out += lv[i];
		*out++ = '\r';
		*out++ = '\n';
	}
	return out;
}

static size_t resp_room(int argc, const size_t *lv)
{
	size_t room = 1 + DECIMAL_MAX + 2;

	for (int i = 0; i < argc; i++)
		room += 1 + DECIMAL_MAX + 2 + lv[i] + 2;
	return room;
}

static void append(struct redis_node *c, struct pending *p, int argc, const char **argv,
		   const size_t *lens, int64_t deadline_from)
{
	const char *av[REDIS_CONN_MAX_ARGS + 1];
	size_t lv[REDIS_CONN_MAX_ARGS + 1];
	char by[DECIMAL_MAX], small[1024], *cmd;
	size_t room;
	int rc;

	if (!c->ctx) {
		p->no_master = c->no_master;
		p->refused = c->refused[0] != '\0';
		fail_later(c, p);
		return;
	}
	for (int i = 0; i < argc; i++) {
		av[i] = argv[i];
		lv[i] = lens ? lens[i] : strlen(argv[i]);
	}
	if (deadline_from) {
		/* past it, in Redis' clock, dlockd has answered (or will
		 * answer) 503: the command must do nothing */
		av[argc] = by;
		lv[argc++] = (size_t)(put_decimal(by, deadline_from + timing.deadline_ms +
						  c->offset_ms) - by);
	}
	room = resp_room(argc, lv);
	cmd = room <= sizeof(small) ? small : xmalloc(room);
	rc = redisAppendFormattedCommand(c->ctx, cmd,
					 (size_t)(resp_format(cmd, argc, av, lv) - cmd));
	if (cmd != small)
		free(cmd);
	if (rc != REDIS_OK) {
		conn_drop(c, c->ctx->errstr);
		fail_later(c, p);
		return;
	}
	p->sent_us = now_us();
	list_append(&c->sent, &p->link);
	c->sent_n++;
	c->unflushed++;
	if (!c->due)
		c->due = p;
	loop_defer(c->loop, &c->flush_task);
}

/* A command of the connection's own (set-up, TIME): never held. */
static void send_raw(struct redis_node *c, int argc, const char **argv, redis_reply_fn fn,
		     void *ctx)
{
	append(c, pending_new(fn, ctx), argc, argv, NULL, false);
}

/* Keep a copy of the command in p until the offset is known. */
static void hold(struct redis_node *c, struct pending *p, int argc, const char **argv,
		 const size_t *lens, int64_t deadline_from)
{
	size_t size = 0;
	struct held_cmd *h;
	char *at;

	for (int i = 0; i < argc; i++)
		size += lens ? lens[i] : strlen(argv[i]);
	h = xmalloc(sizeof(*h) + size + 1);
	h->argc = argc;
	h->deadline_from = deadline_from;
	at = h->data;
	for (int i = 0; i < argc; i++) {
		h->lens[i] = lens ? lens[i] : strlen(argv[i]);
		memcpy(at, argv[i], h->lens[i]);
		h->argv[i] = at;
		at += h->lens[i];
	}
	p->held = h;
	list_append(&c->held, &p->link);
}

/* Send what was held, in order, now that the offset is known. */
static void release_held(struct redis_node *c)
{
	struct pending *p;

	while ((p = pending_pop(&c->held))) {
		struct held_cmd *h = p->held;

		p->held = NULL;
		append(c, p, h->argc, h->argv, h->lens, h->deadline_from);
		free(h);
	}
}

/* Answer every held command with r, an error reply (its callbacks run
 * here; what they send is held anew). */
static void fail_held(struct redis_node *c, redisReply *r)
{
	struct list_node l;
	unsigned connects = c->connects;
	struct pending *p;

	list_init(&l);
	list_splice(&l, &c->held);
	while ((p = pending_pop(&l))) {
		free(p->held);
		tell(p, r);
		free(p);
		if (!c->ctx || c->connects != connects) {
			/* a callback's send dropped it */
			list_splice(&c->failed, &l);
			if (!list_empty(&c->failed))
				loop_defer(c->loop, &c->fail_task);
			return;
		}
	}
}

/* Answer the held commands with r, Redis' refusal of the connection's
 * set-up or TIME: nothing of theirs ran. An error a 503 row names is
 * passed as it is (they hear why: WRONGPASS, BUSY...); any other (SELECT's
 * "ERR DB index is out of range", "ERR max number of clients reached") as
 * DLOCKD_SETUP: a 503 that says the set-up was refused, not a failing
 * script's 500. The commands failed in the backoff after it hear the same,
 * but a 503 row's error only with known_too. */
static void fail_held_refused(struct redis_node *c, redisReply *r, bool known_too)
{
	redisReply setup = *r;

	if (redis_error_unavailable(r->str)) {
		if (known_too)
			snprintf(c->refused, sizeof(c->refused), "%s", r->str);
		fail_held(c, r);
		return;
	}
	setup.str = (char *)"DLOCKD_SETUP";
	setup.len = strlen(setup.str);
	snprintf(c->refused, sizeof(c->refused), "%s", setup.str);
	fail_held(c, &setup);
}

/* What TIME's callback needs: the connection, and when TIME was sent
 * (freed by the callback, which every command gets exactly once). */
struct probe_ctx {
	struct redis_node *conn;
	int64_t sent_ms;
};

/* Set-up replies: an error means the connection is no use. Not sent
 * (redis_reply_made_up: the connection went first) is as no answer, here
 * and in the node's other own callbacks. */
static void on_setup(void *ctx, redisReply *r)
{
	struct redis_node *c = ctx;

	if (r && r->type == REDIS_REPLY_ERROR && !c->broken && !redis_reply_made_up(r)) {
		if (c->told_down)
			log_debug("redis set-up (AUTH or SELECT) failed: %s", r->str);
		else
			log_warn("redis set-up (AUTH or SELECT) failed: %s (logged once until a "
				 "connection lasts)", r->str);
		c->told_down = true;	/* the drop that follows is no news */
		c->broken = true;
		fail_held_refused(c, r, true);
	}
}

static void on_time(void *ctx, redisReply *r);

/* Ask Redis for its clock (one TIME in flight at most). */
static void probe(struct redis_node *c)
{
	struct probe_ctx *o = xmalloc(sizeof(*o));

	o->conn = c;
	o->sent_ms = now_ms();
	c->probing = true;
	send_raw(c, 1, (const char *[]){ "TIME" }, on_time, o);
}

/* A TIME sample: Redis' clock minus ours at the reply's arrival. */
static void on_time(void *ctx, redisReply *r)
{
	struct probe_ctx *o = ctx;
	struct redis_node *c = o->conn;
	int64_t sent = o->sent_ms, now = now_ms(), sample, rtt;

	free(o);
	/* a TIME queued before the connect completed went out then: how
	 * loose the sample can be counts from there */
	rtt = now - (sent > c->connected_ms ? sent : c->connected_ms);
	c->probing = false;
	if (!r || c->broken || redis_reply_made_up(r))
		return;		/* the connection is gone; a new one measures anew */
	count_up(c, r->type != REDIS_REPLY_ERROR);
	if (r->type == REDIS_REPLY_ERROR) {
		/* Redis cannot serve now (BUSY, LOADING, an ACL...): what waits
		 * for the offset gets that answer, the next command asks again */
		if (c->told_time)
			log_debug("redis TIME failed: %s", r->str);
		else
			log_warn("redis TIME failed: %s (logged once until it answers)", r->str);
		c->told_time = true;
		/* BUSY, LOADING: this connection may serve soon; "ERR max
		 * number of clients reached": Redis closes it */
		fail_held_refused(c, r, false);
		c->next_probe_ms = now + PROBE_RETRY_MS;
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING) {
		if (c->told_time)
			log_debug("redis TIME gave an unexpected reply");
		else
			log_warn("redis TIME gave an unexpected reply (logged once until it "
				 "answers)");
		c->told_time = true;
		count_up(c, false);
		c->broken = true;
		return;
	}
	c->told_time = false;
	if (!c->ready) {
		/* it works (a Redis at maxclients answers TIME with an error,
		 * then closes: that one did not) */
		c->ready = true;
		c->ready_ms = now;
	}
	sample = strtoll(r->element[0]->str, NULL, 10) * 1000 +
		 strtoll(r->element[1]->str, NULL, 10) / 1000 - now;
	if (c->probes == 0 || sample > c->round_best) {
		c->round_best = sample;
		c->round_best_rtt = rtt;
	}
	if (!c->timed && rtt <= timing.deadline_ms / 2) {
		/* good enough to send: deadlines early by at most rtt */
		c->offset_ms = c->round_best;
		c->timed = true;
		release_held(c);
	}
	if (rtt > PROBE_GOOD_RTT_MS && ++c->probes < PROBE_MAX) {
		probe(c);	/* a stall loosened the bound: measure again */
		return;
	}
	c->probes = 0;
	c->offset_ms = c->round_best;
	c->next_probe_ms = now + (c->round_best_rtt > PROBE_GOOD_RTT_MS ? PROBE_RETRY_MS
									: PROBE_EVERY_MS);
	if (!c->timed) {
		c->timed = true;
		release_held(c);
	}
}

/* A sentinel URL's node answered ROLE: anything but a master is no use
 * (the sentinels' answer was stale, or a failover demoted it). */
static void on_role_checked(void *ctx, redisReply *r)
{
	struct redis_node *c = ctx;

	if (r && !c->broken && !redis_reply_made_up(r) && !redis_role_is_master(r)) {
		log_warn("redis node is not the master (ROLE); asking the sentinels again");
		c->not_master = true;
	}
}

/* Start a non-blocking connect with the set-up commands queued on it: to
 * the URL's address, or a sentinel URL's current master (none known: the
 * commands fail at once, with a backoff before the next try). */
static void conn_open_async(struct redis_node *c)
{
	const struct redis_url *url = c->url;
	struct redis_setup_cmd cmds[2];
	char db[16], host[256], addr[300];
	const char *at = host;	/* where it connects: host:port */
	int n, port;

	if (url->target) {
		c->gen = redis_target_get(url->target, host, sizeof(host), &port);
		c->no_master = !c->gen;
		if (c->gen) {
			snprintf(addr, sizeof(addr), "%s:%d", host, port);
			count_node(c, addr);
		}
		if (c->no_master) {
			/* asking costs a mutex, not a connect: no growing
			 * backoff, so that calls find a new master soon */
			c->next_try_ms = now_ms() + timing.backoff_min_ms;
			return;
		}
		c->ctx = redis_connect_tcp(url, host, port, REDIS_CONNECT_TIMEOUT_MS, false);
	} else if (c->node_host) {
		snprintf(addr, sizeof(addr), "%s:%d", c->node_host, c->node_port);
		count_node(c, addr);
		at = c->node_host;
		port = c->node_port;
		c->ctx = redis_connect_tcp(url, at, port, REDIS_CONNECT_TIMEOUT_MS, false);
	} else {
		if (url->unix_path)
			snprintf(addr, sizeof(addr), "%s", url->unix_path);
		else
			snprintf(addr, sizeof(addr), "%s:%d", url->host ? url->host : "", url->port);
		count_node(c, addr);
		at = url->host;
		port = url->port;
		c->ctx = redis_connect_url(url, REDIS_CONNECT_TIMEOUT_MS, false);
	}
	c->connects++;
	c->refused[0] = '\0';	/* this try's set-up may be taken */
	if (c->ctx && !c->ctx->err && url->tls)	/* NULL: c->ctx->err says why */
		c->tls = redis_tls_io_new(c->ctx, at, port,
					  REDIS_CONNECT_TIMEOUT_MS + REDIS_TLS_HANDSHAKE_MS);
	if (!c->ctx || c->ctx->err) {
		log_debug("redis connect failed: %s", c->ctx ? c->ctx->errstr : "out of memory");
		if (c->ctx)
			redisFree(c->ctx);
		c->ctx = NULL;
		if (c->gen)
			redis_target_lost(url->target, c->gen);
		c->gen = 0;
		back_off(c);
		return;
	}
	if (!url->unix_path)
		redisEnableKeepAlive(c->ctx);
	n = redis_setup_cmds(url, cmds, db);
	for (int i = 0; i < n; i++)
		send_raw(c, cmds[i].argc, cmds[i].argv, on_setup, c);
	if (c->gen)
		send_raw(c, 1, (const char *[]){ "ROLE" }, on_role_checked, c);
	c->timed = false;
	c->probes = 0;
	probe(c);
}

void redis_node_open(struct redis_node *c)
{
	LOOP_ASSERT_THREAD(c->loop);
	c->used_ms = now_ms();
	if (!c->ctx && !c->closing && now_ms() >= c->next_try_ms)
		conn_open_async(c);
}

void redis_node_send(struct redis_node *c, int argc, const char **argv, const size_t *lens,
		     int64_t deadline_from, redis_reply_fn fn, void *ctx)
{
	struct pending *p;

	LOOP_ASSERT_THREAD(c->loop);
	if (argc > REDIS_CONN_MAX_ARGS)
		abort();
	c->used_ms = now_ms();
	p = pending_new(fn, ctx);
	if (c->closing) {
		list_append(&c->failed, &p->link);	/* redis_node_free() tells it */
		return;
	}
	if (c->gen && !c->moving && redis_target_moved(c->url->target, c->gen)) {
		/* a sentinel URL's master moved: an idle connection goes now,
		 * a busy one once its calls are answered (on_readable) */
		c->moving = true;
		if (redis_node_idle(c))
			conn_drop(c, "the sentinels named another master");
	}
	if (!c->ctx && now_ms() >= c->next_try_ms)
		conn_open_async(c);
	if (c->ctx && (c->overdue || c->moving)) {
		fail_later(c, p);	/* never sent: told at once */
		return;
	}
	if (c->ctx && !c->timed) {
		hold(c, p, argc, argv, lens, deadline_from);
		if (!c->probing)
			probe(c);	/* the last TIME was refused: ask again */
	} else {
		if (c->ctx && !c->probing && now_ms() >= c->next_probe_ms)
			probe(c);
		append(c, p, argc, argv, lens, deadline_from);
	}
	conn_schedule(c);
}

/* ----- Driving it from the loop ----- */

/* Give up on commands past their time (see the top of the file) and tell
 * failed commands. */
static void conn_run(struct redis_node *c, int64_t now)
{
	struct pending *p;

	if (restoring(c) && now >= c->next_try_ms)
		conn_open_async(c);
	/* a TLS session not verified in time: as the tunnels' was */
	if (c->tls && now >= redis_tls_io_deadline(c->tls)) {
		redis_tls_io_late(c->tls, c->ctx, c->connected);
		conn_drop(c, c->ctx->errstr);
	}
	/* the oldest command unanswered past its give-up: send no more */
	if (c->due && now >= c->due->give_up_ms)
		c->overdue = true;
	/* commands with no reply after REPLY_WAIT_MS are told one by one, in
	 * send order (give_up_ms grows along the list); what they send
	 * meanwhile is failed at once, as the connection is overdue */
	while ((p = c->due) &&
	       now >= p->give_up_ms + timing.reply_wait_ms - timing.command_timeout_ms) {
		c->due = sent_after(c, p);
		p->answered = true;
		tell(p, NULL);
	}
	if (c->ctx && c->overdue && !c->due) {
		char why[64];

		snprintf(why, sizeof(why), "no reply within %lld ms",
			 (long long)timing.reply_wait_ms);
		conn_drop(c, why);
	}
	/* held past their time (the clock is still being measured) */
	while ((p = pending_first(&c->held)) && now >= p->give_up_ms) {
		list_remove(&p->link);
		list_append(&c->failed, &p->link);
	}
	tell_failed(c);
}

/* Set the timer to when conn_run has something to do next. */
static void conn_schedule(struct redis_node *c)
{
	struct pending *first_held = pending_first(&c->held);
	int64_t tls_by = c->tls ? redis_tls_io_deadline(c->tls) : INT64_MAX, at;
	int64_t reopen_at = restoring(c) ? c->next_try_ms : INT64_MAX;

	if (!c->due && !first_held && tls_by == INT64_MAX && reopen_at == INT64_MAX) {
		loop_timer_stop(c->loop, &c->timer);
		return;
	}
	at = !c->due ? INT64_MAX
	     : c->overdue ? c->due->give_up_ms + timing.reply_wait_ms - timing.command_timeout_ms
	     : c->due->give_up_ms;
	if (first_held && first_held->give_up_ms < at)
		at = first_held->give_up_ms;
	if (tls_by < at)
		at = tls_by;
	if (reopen_at < at)
		at = reopen_at;
	if (!loop_timer_armed(&c->timer) || c->timer.node.at_ms != at)
		loop_timer_set(c->loop, &c->timer, at);
}

static void on_timer(struct loop *l, struct loop_timer *t)
{
	struct redis_node *c = container_of(t, struct redis_node, timer);

	(void)l;
	conn_run(c, now_ms());
	conn_schedule(c);
}

static void on_failed(struct loop *l, void *data)
{
	struct redis_node *c = data;

	(void)l;
	tell_failed(c);
	conn_schedule(c);
}

static void on_io(struct loop *l, int fd, unsigned events, void *data);

/* Commands can go: connected, and with TLS, the server verified. */
static bool conn_usable(const struct redis_node *c)
{
	return c->ctx && c->connected && (!c->tls || redis_tls_io_ready(c->tls));
}

/* As redisBufferWrite and redisBufferRead, over the TLS session if any. */
static int conn_write(struct redis_node *c)
{
	int done = 0, rc = c->tls ? redis_tls_io_write(c->tls, c->ctx, &done)
				  : redisBufferWrite(c->ctx, &done);

	if (rc == REDIS_OK && done)
		c->unflushed = 0;
	return rc;
}

/* Over TLS, commands queued while a batch written whole is unanswered
 * wait for its replies, and go in the next record with the others
 * queued meanwhile. Redis' TLS reads one record per turn of its event
 * loop (SSL_read), where over plaintext one read() takes all that
 * arrived: a record per loop turn of dlockd's made Redis run a turn, a
 * read and a reply per record, and dlockd a wake per reply. A command
 * waits one round trip at most, only while others are in flight; the
 * replies are what lifts it (on_io flushes after every read). Only a
 * batch written whole counts: sent_n > unflushed means a reply due to
 * one of them is still to come (those partly written may be answered
 * already, and make the difference smaller, never larger). A record
 * partly sent is finished whatever is in flight. */
static bool conn_corked(const struct redis_node *c)
{
	return c->tls && c->sent_n > c->unflushed && !redis_tls_io_wants_write(c->tls);
}

static int conn_read(struct redis_node *c)
{
	return c->tls ? redis_tls_io_read(c->tls, c->ctx) : redisBufferRead(c->ctx);
}

/* Write what is queued (over TLS, unless conn_corked), as far as the
 * socket takes it, and watch the socket for what the connection now
 * waits for: writable until connected and while output is left to write
 * now (or a TLS handshake or record waits for it), readable once
 * connected. Runs before the loop sleeps, after every callback that
 * could queue a command. */
static void conn_flush(struct loop *l, void *data)
{
	struct redis_node *c = data;
	unsigned want;
	bool usable = conn_usable(c) && !conn_corked(c);

	(void)l;
	if (usable && sdslen(c->ctx->obuf) > 0 && conn_write(c) != REDIS_OK)
		conn_drop(c, c->ctx->errstr);
	if (c->ctx) {
		want = (c->connected ? LOOP_READ : 0) |
		       (!c->connected || (usable && sdslen(c->ctx->obuf) > 0) ||
				(c->tls && redis_tls_io_wants_write(c->tls))
			? LOOP_WRITE : 0);
		if (want != c->watching) {
			if (loop_watch(c->loop, c->ctx->fd, want, on_io, c) == 0)
				c->watching = want;
			else
				conn_drop(c, "cannot watch its socket");
		}
	}
	conn_schedule(c);
}

/* The socket reported writable: finish connecting; conn_flush writes. */
static void on_writable(struct redis_node *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (!c->ctx || c->connected)
		return;
	/* the non-blocking connect() is over: did it work? */
	if (getsockopt(c->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		conn_drop(c, err ? strerror(err) : "connect failed");
		return;
	}
	c->connected = true;
	c->connected_ms = now_ms();
}

/* The socket is readable: read and hand out the replies. */
static void on_readable(struct redis_node *c)
{
	unsigned connects = c->connects;
	redisReply *r;

	if (!conn_usable(c))
		return;
	if (conn_read(c) != REDIS_OK) {
		conn_drop(c, c->ctx->errstr[0] ? c->ctx->errstr : "closed");
		return;
	}
	for (;;) {
		void *reply = NULL;
		struct pending *p;

		if (redisGetReplyFromReader(c->ctx, &reply) != REDIS_OK) {
			conn_drop(c, c->ctx->errstr);
			return;
		}
		if (!reply)
			break;
		r = reply;
		p = pending_first(&c->sent);
		if (!p) {
			freeReplyObject(r);
			conn_drop(c, "a reply nobody asked for");
			return;
		}
		c->overdue = false;	/* Redis answers again */
		if (c->due == p)
			c->due = sent_after(c, p);
		list_remove(&p->link);
		c->sent_n--;
		if (c->gen && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "READONLY ", 9))
			c->not_master = true;	/* demoted under us */
		if (!p->answered) {
			metrics_redis_round_trip(now_us() - p->sent_us);
			tell(p, r);
		}
		freeReplyObject(r);
		free(p);
		if (!c->ctx || c->connects != connects)
			return;		/* a callback's command could not be sent */
		if (c->broken) {
			conn_drop(c, "set-up refused");
			return;
		}
		if (c->not_master) {
			conn_drop(c, "not the master");
			return;
		}
		if (c->moving && list_empty(&c->sent)) {
			conn_drop(c, "the sentinels named another master");
			return;
		}
	}
}

static void on_io(struct loop *l, int fd, unsigned events, void *data)
{
	struct redis_node *c = data;

	(void)fd;
	if (events & LOOP_WRITE || (events & LOOP_ERROR && !c->connected))
		on_writable(c);
	if (c->tls && c->connected && !redis_tls_io_ready(c->tls)) {
		/* a step of the handshake, whichever way it waited */
		if (redis_tls_io_handshake(c->tls, c->ctx) < 0)
			conn_drop(c, c->ctx->errstr);
	} else if (events & (LOOP_READ | LOOP_ERROR)) {
		on_readable(c);
	}
	conn_schedule(c);
	loop_defer(l, &c->flush_task);	/* write what the callbacks queued, rewatch */
}

/* ----- Life cycle ----- */

struct redis_node *redis_node_new(struct loop *l, const struct redis_url *url)
{
	struct redis_node *c = xcalloc(1, sizeof(*c));

	c->loop = l;
	c->url = url;
	c->mnode = -1;
	c->backoff_ms = timing.backoff_min_ms;
	list_init(&c->held);
	list_init(&c->sent);
	list_init(&c->failed);
	loop_timer_init(&c->timer, on_timer);
	loop_task_init(&c->flush_task, conn_flush, c);
	loop_task_init(&c->fail_task, on_failed, c);
	return c;
}

struct redis_node *redis_node_new_at(struct loop *l, const struct redis_url *url,
				     const char *host, int port)
{
	struct redis_node *c = redis_node_new(l, url);

	c->node_host = xstrdup(host);
	c->node_port = port;
	return c;
}

unsigned redis_node_generation(const struct redis_node *c)
{
	return c->connects;
}

/* One of the node's own commands (set-up, TIME, ROLE), not a caller's. */
static bool pending_own(const struct pending *p)
{
	return p->fn == on_setup || p->fn == on_time || p->fn == on_role_checked;
}

bool redis_node_idle(const struct redis_node *c)
{
	const struct list_node *n;

	if (!list_empty(&c->held) || !list_empty(&c->failed))
		return false;
	/* a connection being made again by itself (or measuring the clock)
	 * holds nothing up: stopping does not wait for its set-up */
	for (n = list_first(&c->sent); n; n = list_next(&c->sent, n))
		if (!pending_own(list_entry(n, struct pending, link)))
			return false;
	return true;
}

void redis_node_free(struct redis_node *c)
{
	bool written;

	if (!c)
		return;
	written = conn_written(c);
	c->closing = true;
	count_node(c, NULL);
	if (c->ctx)
		conn_close(c);
	fail_sent(c, written);
	list_splice(&c->failed, &c->held);
	tell_failed(c);
	loop_timer_stop(c->loop, &c->timer);
	loop_cancel(c->loop, &c->flush_task);
	loop_cancel(c->loop, &c->fail_task);
	free(c->node_host);
	free(c);
}
