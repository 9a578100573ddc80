/* redis_target.c -- the resolver of a redis-sentinel:// URL: a thread of
 * its own that asks the sentinels where the master is and publishes the
 * answer for the connections, as Redis' guidelines for Sentinel clients
 * say (https://redis.io/docs/latest/develop/reference/sentinel-clients/):
 *
 *  1. ask the sentinels in the URL's order, each with a short timeout,
 *     `SENTINEL get-master-addr-by-name <master>`; the first that answers
 *     with an address goes to the front of the list for next time;
 *  2. connect to that address and confirm with `ROLE` that it is a master
 *     (a sentinel may not have seen a failover yet); if not, ask the next
 *     sentinel;
 *  3. publish the address with a new generation number, under `lock`.
 *
 * Every connection (the loops' pipelined ones, the subscriber's) reads
 * the current address when it (re)connects (redis_target_get), and
 * confirms with ROLE itself before it sends anything else. One that is
 * refused or lost, or finds a replica (ROLE, a READONLY error), calls
 * redis_target_lost() with the generation it used: the address is
 * forgotten and the resolver asks again, so that every reconnect after a
 * loss uses a fresh answer of the sentinels. While no address is known,
 * connections fail their commands at once (a 503), never wait here.
 *
 * The sentinel calls block (hiredis' blocking API, short timeouts), so
 * they run on this thread and never on an event loop. When no sentinel
 * gives a master that ROLE confirms, the resolver asks again after a
 * backoff (100 ms doubling to 1 s).
 *
 * While a master is known it asks again every POLL_MS: after a failover
 * the old master may go on accepting writes until Sentinel gets round to
 * turning it into a replica (seconds), so the sentinels' word, not the
 * old master's, decides. A new address gets a new generation; each
 * connection on an older one sees redis_target_moved() and reconnects
 * (the loops' once their calls in flight are answered, the subscriber at
 * once). A listener thread per sentinel hears the failover events: at
 * the start of a failover every connection leaves the old master at once
 * and the resolver waits for the promotion instead of asking (see
 * "Failover events" below). */
#include "service/redis/redis_target.h"

#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/redis/redis_dial.h"
#include "service/redis/redis_url.h"
#include "service/base/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 500
#define COMMAND_TIMEOUT_MS 1000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000
#define POLL_MS 1000
#define PAUSE_MS 15000		/* a failover's start pauses resolving at most so long */
#define SHUN_MS 30000		/* the old master is passed over at most so long */
#define HOST_MAX 256
#define ADDR_MAX (HOST_MAX + 8)	/* "host:port" */

struct listener {
	struct redis_target *t;
	unsigned sentinel;		/* its index in the URL */
	pthread_t thread;
	bool started;
};

struct redis_target {
	const struct redis_url *url;
	pthread_t thread;
	unsigned *order;		/* the sentinels to ask, by index, in order
					 * (the resolver's own) */

	pthread_mutex_t lock;		/* guards what follows */
	pthread_cond_t wake;		/* want, stop or an event */
	char host[HOST_MAX];		/* the master, when known */
	int port;
	bool known;
	unsigned gen;			/* of host:port; grows when the address changes */
	char last[ADDR_MAX];		/* the address published last, "" after a
					 * failover's start (its next one is new) */
	bool want;			/* ask the sentinels (again) */
	bool stop;
	/* a failover heard of (below) */
	unsigned events;		/* grows with each event acted on: a
					 * resolve begun before is not published */
	bool paused;			/* started: no resolving until paused_until */
	int64_t paused_until;		/* now_ms() clock */
	char promoted[ADDR_MAX];	/* a promoted replica to confirm, or "" */
	char shun[ADDR_MAX];		/* the old master, passed over ... */
	int64_t shun_until;		/* ... until then (0: none) */

	atomic_uint moved_to;		/* gen, readable without the lock */
	atomic_bool failing_over;	/* paused, for the 503's words */

	struct listener *listeners;	/* one per sentinel (below) */
	atomic_bool listener_stop;
};

bool redis_role_is_master(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	       r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
}

/* A blocking connection to host:port (TLS as url says), authenticated
 * with user (may be NULL) and password (NULL: no AUTH); NULL, with a
 * debug line, if that fails. what names the node for the log. */
static redisContext *open_node(const struct redis_url *url, const char *host, int port,
			       const char *user, const char *password, const char *what)
{
	redisContext *c = redis_connect_tcp(url, host, port, CONNECT_TIMEOUT_MS, true);
	redisReply *r;

	if (!c)
		return NULL;
	if (c->err) {
		log_debug("redis sentinel: %s %s:%d: %s", what, host, port, c->errstr);
		redisFree(c);
		return NULL;
	}
	redis_set_timeout_ms(c, COMMAND_TIMEOUT_MS);
	if (!password)
		return c;
	r = user ? redisCommand(c, "AUTH %s %s", user, password)
		 : redisCommand(c, "AUTH %s", password);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		log_warn("redis sentinel: AUTH on %s %s:%d failed: %s", what, host, port,
			 r ? r->str : c->errstr);
		if (r)
			freeReplyObject(r);
		redisFree(c);
		return NULL;
	}
	freeReplyObject(r);
	return c;
}

/* Ask sentinel s for the master's address; 0 and host/port if it gave one. */
static int ask_sentinel(const struct redis_url *url, const struct redis_host *s, char *host,
			int *port)
{
	redisContext *c = open_node(url, s->host, s->port, NULL, url->sentinel_password, "sentinel");
	redisReply *r;
	int rc = -1;

	if (!c)
		return -1;
	r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", url->master);
	if (!r) {
		log_debug("redis sentinel: sentinel %s:%d: %s", s->host, s->port, c->errstr);
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		   r->element[0]->type == REDIS_REPLY_STRING &&
		   r->element[1]->type == REDIS_REPLY_STRING &&
		   r->element[0]->len < HOST_MAX) {
		memcpy(host, r->element[0]->str, r->element[0]->len + 1);
		*port = atoi(r->element[1]->str);
		rc = *port > 0 && *port < 65536 ? 0 : -1;
	} else if (r->type == REDIS_REPLY_ERROR) {
		log_warn("redis sentinel: sentinel %s:%d refused: %s", s->host, s->port, r->str);
	} else {
		log_debug("redis sentinel: sentinel %s:%d knows no master '%s'", s->host,
			  s->port, url->master);
	}
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return rc;
}

/* ROLE on host:port says master. */
static bool confirm_master(const struct redis_url *url, const char *host, int port)
{
	redisContext *c = open_node(url, host, port, url->user, url->password, "master");
	redisReply *r;
	bool ok;

	if (!c)
		return false;
	r = redisCommand(c, "ROLE");
	ok = redis_role_is_master(r);
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return ok;
}

/* Steps 1 and 2 of the top of the file: 0 and the confirmed master in
 * host/port, or -1. An answer equal to known (the address published now,
 * "" if none) is not confirmed again; one equal to shun (the master a
 * failover is leaving, "" if none) is passed over. */
static int resolve(struct redis_target *t, const char *known, const char *shun, char *host,
		   int *port)
{
	const struct redis_url *url = t->url;

	for (unsigned k = 0; k < url->nsentinels; k++) {
		unsigned i = t->order[k];
		char said[ADDR_MAX];

		if (ask_sentinel(url, &url->sentinels[i], host, port) < 0)
			continue;
		snprintf(said, sizeof(said), "%s:%d", host, *port);
		if (!strcmp(said, shun)) {
			log_debug("redis sentinel: sentinel %s:%d still names %s, the master "
				  "a failover is leaving", url->sentinels[i].host,
				  url->sentinels[i].port, said);
			continue;
		}
		if (strcmp(said, known) && !confirm_master(url, host, *port)) {
			log_debug("redis sentinel: %s:%d (from sentinel %s:%d) is not a master "
				  "(yet)", host, *port, url->sentinels[i].host,
				  url->sentinels[i].port);
			continue;
		}
		/* the sentinel that answered is asked first next time */
		memmove(t->order + 1, t->order, k * sizeof(*t->order));
		t->order[0] = i;
		return 0;
	}
	return -1;
}

static void wait_ms(struct redis_target *t, int64_t ms)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&t->wake, &t->lock, &until);
}

/* Split "host:port" (the last colon) into host and *port; 0, or -1. */
static int split_addr(const char *addr, char *host, int *port)
{
	const char *colon = strrchr(addr, ':');

	if (!colon || colon == addr || (size_t)(colon - addr) >= HOST_MAX)
		return -1;
	memcpy(host, addr, colon - addr);
	host[colon - addr] = '\0';
	*port = atoi(colon + 1);
	return *port > 0 && *port < 65536 ? 0 : -1;
}

/* Under lock: publish host:port as the master; a new address gets a new
 * generation, and connections on the old one move. */
static void publish(struct redis_target *t, const char *host, int port, bool failing)
{
	char now[ADDR_MAX];

	snprintf(now, sizeof(now), "%s:%d", host, port);
	if (strcmp(now, t->last)) {
		snprintf(t->host, sizeof(t->host), "%s", host);
		t->port = port;
		t->gen++;
		atomic_store(&t->moved_to, t->gen);
	}
	if (failing || strcmp(now, t->last))
		log_info("redis sentinel: master '%s' is %s", t->url->master, now);
	t->known = true;
	memcpy(t->last, now, sizeof(t->last));
}

/* Under lock: end a pause (the failover ended, or was given up on). */
static void unpause(struct redis_target *t)
{
	t->paused = false;
	t->promoted[0] = '\0';
	atomic_store(&t->failing_over, false);
}

/* Under lock, while paused: confirm the promoted replica heard of, if
 * any, and publish it; or end the pause at its cap. true if it did
 * either, false if the resolver should wait (until *wait_for). */
static bool paused_step(struct redis_target *t, int64_t *wait_for)
{
	char addr[ADDR_MAX], host[HOST_MAX];
	unsigned events = t->events;
	int64_t now = now_ms();
	int port;
	bool ok;

	if (t->promoted[0]) {
		memcpy(addr, t->promoted, sizeof(addr));
		t->promoted[0] = '\0';
		if (split_addr(addr, host, &port) < 0)
			return true;
		pthread_mutex_unlock(&t->lock);
		ok = confirm_master(t->url, host, port);
		pthread_mutex_lock(&t->lock);
		if (t->events != events)
			return true;	/* another event meanwhile: look again */
		if (ok) {
			unpause(t);
			publish(t, host, port, true);
		} else {
			log_info("redis sentinel: the promoted %s does not answer ROLE as "
				 "master; waiting for the failover to end", addr);
		}
		return true;
	}
	if (now >= t->paused_until) {
		log_warn("redis sentinel: no promotion of '%s' heard %d ms after its failover "
			 "began; asking the sentinels", t->url->master, PAUSE_MS);
		unpause(t);
		t->want = true;
		return true;
	}
	*wait_for = t->paused_until - now;
	return false;
}

static void *resolver_main(void *arg)
{
	struct redis_target *t = arg;
	int64_t backoff = BACKOFF_MIN_MS;
	bool failing = false;
	char host[HOST_MAX];
	int port = 0;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		char known[ADDR_MAX] = "", shun[ADDR_MAX] = "";
		bool polling = false;
		unsigned events;
		int64_t wait_for;
		int rc;

		if (t->shun_until && now_ms() >= t->shun_until) {
			t->shun[0] = '\0';
			t->shun_until = 0;
		}
		if (t->paused) {
			if (!paused_step(t, &wait_for))
				wait_ms(t, wait_for);	/* or an event */
			if (t->known) {
				failing = false;
				backoff = BACKOFF_MIN_MS;
			}
			continue;
		}
		if (!t->want) {
			/* a master is known: look again after POLL_MS (sooner if
			 * a connection lost it) whether the sentinels moved it */
			wait_ms(t, POLL_MS);
			if (t->stop)
				break;
			if (t->paused)
				continue;
			polling = !t->want;
		}
		if (polling && t->known)
			snprintf(known, sizeof(known), "%s:%d", t->host, t->port);
		memcpy(shun, t->shun, sizeof(shun));
		events = t->events;
		t->want = false;
		pthread_mutex_unlock(&t->lock);
		rc = resolve(t, known, shun, host, &port);
		pthread_mutex_lock(&t->lock);
		if (t->events != events) {
			/* a failover event came meanwhile: this answer may be
			 * the master it is leaving */
			if (!t->paused)
				t->want = true;
			continue;
		}
		if (rc == 0) {
			publish(t, host, port, failing);
			failing = false;
			backoff = BACKOFF_MIN_MS;
			continue;
		}
		if (polling)
			continue;	/* sentinels away: keep the master we know */
		if (!failing)
			log_warn("redis sentinel: no sentinel of --redis names a master '%s' that "
				 "answers ROLE as master; asking again every %d ms at most",
				 t->url->master, BACKOFF_MAX_MS);
		failing = true;
		t->want = true;
		wait_ms(t, backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* ----- Failover events -----
 *
 * One listener thread per sentinel stays subscribed there (reconnecting
 * every 0.5 s while it does not answer) to the events of a failover, and
 * acts on those about our master:
 *
 *  - +failover-state-select-slave (the leader sentinel starts a failover:
 *    "master <name> <ip> <port>"): forget the address and bump the
 *    generation, so that every connection leaves the old master before a
 *    replica is promoted: after SENTINEL FAILOVER the old master goes on
 *    taking writes for seconds, and a replica not yet moved still
 *    acknowledges them (WAIT), yet every one is lost. Then pause: calls
 *    get a fast 503 and the resolver does not ask the sentinels (which
 *    name the old master until the end) until one of the following, or
 *    PAUSE_MS. The old master is passed over (shun) for SHUN_MS: some
 *    sentinels name it, and it answers ROLE as master, for seconds after
 *    the failover ended.
 *  - +promoted-slave ("slave <ip>:<port> <ip> <port> @ <name> <ip>
 *    <port>"): confirm the promoted replica with ROLE and publish it (if
 *    the start was not heard, this starts the failover first).
 *  - +failover-end, +switch-master ("<name> <old ip> <old port> <new ip>
 *    <new port>"): end the pause and ask the sentinels at once.
 *  - -failover-abort-*: the old master stays: end the pause, pass over
 *    nothing, ask at once.
 *
 * The poll stays: a message can be lost (pub/sub is at-most-once) or the
 * sentinels unreachable. */

#define LISTEN_TIMEOUT_MS 500	/* how often a listener looks at stop */

/* Under lock: a failover of our master, at old (host:port), starts. */
static void failover_start(struct redis_target *t, const char *old)
{
	int64_t now = now_ms();

	t->paused = true;
	t->paused_until = now + PAUSE_MS;
	t->promoted[0] = '\0';
	snprintf(t->shun, sizeof(t->shun), "%s", old);
	t->shun_until = now + SHUN_MS;
	t->known = false;
	t->last[0] = '\0';
	t->gen++;
	atomic_store(&t->moved_to, t->gen);	/* connections leave it now */
	atomic_store(&t->failing_over, true);
}

/* Act on event on channel (payload split into words, n of them) heard from
 * sentinel s, if it is about our master. */
static void on_event(struct redis_target *t, const char *channel, char **w, int n,
		     const struct redis_host *s)
{
	const char *master = t->url->master;
	bool is_master = n == 4 && !strcmp(w[0], "master") && !strcmp(w[1], master);
	char old[ADDR_MAX];

	pthread_mutex_lock(&t->lock);
	if (!strcmp(channel, "+failover-state-select-slave") && is_master) {
		snprintf(old, sizeof(old), "%s:%s", w[2], w[3]);
		if (!t->paused) {
			log_info("redis sentinel: failover of '%s' (at %s) begun (sentinel %s:%d): "
				 "leaving it", master, old, s->host, s->port);
			failover_start(t, old);
		}
	} else if (!strcmp(channel, "+promoted-slave") && n == 8 && !strcmp(w[0], "slave") &&
		   !strcmp(w[4], "@") && !strcmp(w[5], master)) {
		snprintf(old, sizeof(old), "%s:%s", w[6], w[7]);
		if (!t->paused && strcmp(t->shun, old))	/* its start unheard */
			failover_start(t, old);
		if (t->paused) {
			log_info("redis sentinel: %s:%s promoted to master '%s' (sentinel %s:%d)",
				 w[2], w[3], master, s->host, s->port);
			snprintf(t->promoted, sizeof(t->promoted), "%s:%s", w[2], w[3]);
		}
	} else if (!strcmp(channel, "+switch-master") && n == 5 && !strcmp(w[0], master)) {
		log_info("redis sentinel: +switch-master for '%s' from %s:%d", master, s->host,
			 s->port);
		snprintf(old, sizeof(old), "%s:%s", w[3], w[4]);
		if (!strcmp(t->shun, old))	/* a failover back to it */
			t->shun[0] = '\0';
		unpause(t);
		t->want = true;
	} else if (!strcmp(channel, "+failover-end") && is_master) {
		log_info("redis sentinel: failover of '%s' ended (sentinel %s:%d)", master,
			 s->host, s->port);
		if (t->paused) {
			unpause(t);
			t->want = true;
		}
	} else if (!strncmp(channel, "-failover-abort-", 16) && is_master) {
		log_warn("redis sentinel: failover of '%s' given up (%s, sentinel %s:%d)", master,
			 channel, s->host, s->port);
		unpause(t);
		t->shun[0] = '\0';
		t->shun_until = 0;
		t->want = true;
	} else {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	t->events++;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
}

/* A pub/sub message r ("message" or "pmessage"): split its payload into
 * words and hand it to on_event. */
static void on_sentinel_event(struct redis_target *t, const redisReply *r, const struct redis_host *s)
{
	const redisReply *channel, *payload;
	char buf[1024], *w[9], *save = NULL;
	int n = 0;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return;
	if (!strcmp(r->element[0]->str, "message") && r->elements == 3) {
		channel = r->element[1];
		payload = r->element[2];
	} else if (!strcmp(r->element[0]->str, "pmessage") && r->elements == 4) {
		channel = r->element[2];
		payload = r->element[3];
	} else {
		return;	/* a (p)subscribe confirmation */
	}
	if (channel->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING ||
	    payload->len >= sizeof(buf))
		return;
	memcpy(buf, payload->str, payload->len + 1);
	for (char *tok = strtok_r(buf, " ", &save); tok && n < (int)ARRAY_SIZE(w);
	     tok = strtok_r(NULL, " ", &save))
		w[n++] = tok;
	if (n < (int)ARRAY_SIZE(w))
		on_event(t, channel->str, w, n, s);
}

/* Listen on sentinel s until its connection fails or stop. */
static void listen_on(struct redis_target *t, const struct redis_host *s)
{
	redisContext *c = open_node(t->url, s->host, s->port, NULL, t->url->sentinel_password,
				   "sentinel");

	if (!c)
		return;
	redisAppendCommand(c, "SUBSCRIBE +failover-state-select-slave +promoted-slave "
			      "+failover-end +switch-master");
	redisAppendCommand(c, "PSUBSCRIBE -failover-abort-*");
	redis_set_timeout_ms(c, LISTEN_TIMEOUT_MS);
	while (!atomic_load(&t->listener_stop)) {
		void *reply = NULL;

		if (redisGetReply(c, &reply) != REDIS_OK) {
			if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				c->err = 0;	/* a timeout: look at stop, listen on */
				c->errstr[0] = '\0';
				continue;
			}
			break;
		}
		if (((redisReply *)reply)->type == REDIS_REPLY_ERROR) {
			log_warn("redis sentinel: sentinel %s:%d refused to subscribe: %s",
				 s->host, s->port, ((redisReply *)reply)->str);
			freeReplyObject(reply);
			break;
		}
		on_sentinel_event(t, reply, s);
		freeReplyObject(reply);
	}
	if (!atomic_load(&t->listener_stop))
		metrics_reconnect(MCONN_SENTINEL);
	redisFree(c);
}

static void *listener_main(void *arg)
{
	struct listener *l = arg;
	struct redis_target *t = l->t;

	while (!atomic_load(&t->listener_stop)) {
		listen_on(t, &t->url->sentinels[l->sentinel]);
		for (int k = 0; k < 10 && !atomic_load(&t->listener_stop); k++)
			usleep(50 * 1000);	/* 0.5 s before it tries again */
	}
	return NULL;
}

bool redis_target_failing_over(struct redis_target *t)
{
	return atomic_load(&t->failing_over);
}

bool redis_target_moved(struct redis_target *t, unsigned gen)
{
	unsigned now = atomic_load(&t->moved_to);

	return now && now != gen;
}

unsigned redis_target_get(struct redis_target *t, char *host, size_t len, int *port)
{
	unsigned gen = 0;

	pthread_mutex_lock(&t->lock);
	if (t->known) {
		snprintf(host, len, "%s", t->host);
		*port = t->port;
		gen = t->gen;
	}
	pthread_mutex_unlock(&t->lock);
	return gen;
}

void redis_target_lost(struct redis_target *t, unsigned gen)
{
	pthread_mutex_lock(&t->lock);
	if (t->known && gen == t->gen) {
		t->known = false;
		t->want = true;
		pthread_cond_signal(&t->wake);
	}
	pthread_mutex_unlock(&t->lock);
}

static void redis_target_stop_thread(struct redis_target *t);

/* Stop the listeners that started. */
static void redis_target_stop_listeners(struct redis_target *t)
{
	atomic_store(&t->listener_stop, true);
	for (unsigned i = 0; i < t->url->nsentinels; i++)
		if (t->listeners[i].started)	/* within LISTEN_TIMEOUT_MS, or a connect's */
			pthread_join(t->listeners[i].thread, NULL);
}

int redis_target_start(struct redis_url *url)
{
	struct redis_target *t = xcalloc(1, sizeof(*t));
	pthread_condattr_t ca;

	t->url = url;
	t->order = xcalloc(url->nsentinels, sizeof(*t->order));
	for (unsigned i = 0; i < url->nsentinels; i++)
		t->order[i] = i;
	t->want = true;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t->thread, NULL, resolver_main, t)) {
		log_error("cannot start the sentinel resolver thread");
		pthread_cond_destroy(&t->wake);
		pthread_mutex_destroy(&t->lock);
		free(t->order);
		free(t);
		return -1;
	}
	t->listeners = xcalloc(url->nsentinels, sizeof(*t->listeners));
	for (unsigned i = 0; i < url->nsentinels; i++) {
		struct listener *l = &t->listeners[i];

		l->t = t;
		l->sentinel = i;
		if (pthread_create(&l->thread, NULL, listener_main, l)) {
			log_error("cannot start a sentinel listener thread");
			redis_target_stop_listeners(t);
			redis_target_stop_thread(t);
			return -1;
		}
		l->started = true;
	}
	url->target = t;
	return 0;
}

void redis_target_stop(struct redis_url *url)
{
	struct redis_target *t = url->target;

	if (!t)
		return;
	redis_target_stop_listeners(t);
	redis_target_stop_thread(t);
	url->target = NULL;
}

/* Stop the resolver thread and free t. */
static void redis_target_stop_thread(struct redis_target *t)
{
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);	/* at most one sentinel call's timeouts */
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t->listeners);
	free(t->order);
	free(t);
}
