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
 * once). A listener thread subscribed to +switch-master makes it ask at
 * once when the sentinels announce a new master (see below). */
#include "redis_target.h"

#include "log.h"
#include "redis_url.h"
#include "util.h"

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
#define HOST_MAX 256

struct redis_target {
	const struct redis_url *url;
	pthread_t thread;
	unsigned *order;		/* the sentinels to ask, by index, in order
					 * (the resolver's own) */

	pthread_mutex_t lock;		/* guards what follows */
	pthread_cond_t wake;		/* want or stop became true */
	char host[HOST_MAX];		/* the master, when known */
	int port;
	bool known;
	unsigned gen;			/* of host:port; grows when the address changes */
	bool want;			/* ask the sentinels (again) */
	bool stop;

	atomic_uint moved_to;		/* gen, readable without the lock */

	pthread_t listener;		/* hears +switch-master (below) */
	atomic_bool listener_stop;
};

bool redis_role_is_master(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	       r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
}

static struct timeval tv_ms(int ms)
{
	return (struct timeval){ .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
}

/* A blocking connection to host:port, authenticated with user (may be
 * NULL) and password (NULL: no AUTH); NULL, with a debug line, if that
 * fails. what names the node for the log. */
static redisContext *open_node(const char *host, int port, const char *user,
			       const char *password, const char *what)
{
	redisContext *c = redisConnectWithTimeout(host, port, tv_ms(CONNECT_TIMEOUT_MS));
	redisReply *r;

	if (!c)
		return NULL;
	if (c->err) {
		log_debug("redis sentinel: %s %s:%d: %s", what, host, port, c->errstr);
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv_ms(COMMAND_TIMEOUT_MS));
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
	redisContext *c = open_node(s->host, s->port, NULL, url->sentinel_password, "sentinel");
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
	redisContext *c = open_node(host, port, url->user, url->password, "master");
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
 * "" if none) is not confirmed again. */
static int resolve(struct redis_target *t, const char *known, char *host, int *port)
{
	const struct redis_url *url = t->url;

	for (unsigned k = 0; k < url->nsentinels; k++) {
		unsigned i = t->order[k];
		char said[HOST_MAX + 8];

		if (ask_sentinel(url, &url->sentinels[i], host, port) < 0)
			continue;
		snprintf(said, sizeof(said), "%s:%d", host, *port);
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

static void *resolver_main(void *arg)
{
	struct redis_target *t = arg;
	int64_t backoff = BACKOFF_MIN_MS;
	bool failing = false;
	char host[HOST_MAX], last[HOST_MAX + 8] = "";
	int port = 0;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		char known[HOST_MAX + 8] = "";
		bool polling = false;
		int rc;

		if (!t->want) {
			/* a master is known: look again after POLL_MS (sooner if
			 * a connection lost it) whether the sentinels moved it */
			wait_ms(t, POLL_MS);
			if (t->stop)
				break;
			polling = !t->want;
		}
		if (polling && t->known)
			snprintf(known, sizeof(known), "%s:%d", t->host, t->port);
		t->want = false;
		pthread_mutex_unlock(&t->lock);
		rc = resolve(t, known, host, &port);
		pthread_mutex_lock(&t->lock);
		if (rc == 0) {
			char now[HOST_MAX + 8];

			snprintf(now, sizeof(now), "%s:%d", host, port);
			if (strcmp(now, last)) {
				/* a new address: connections on the old one move */
				snprintf(t->host, sizeof(t->host), "%s", host);
				t->port = port;
				t->gen++;
				atomic_store(&t->moved_to, t->gen);
			}
			if (failing || strcmp(now, last))
				log_info("redis sentinel: master '%s' is %s", t->url->master, now);
			t->known = true;
			memcpy(last, now, sizeof(last));
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

/* ----- +switch-master -----
 *
 * A second thread stays subscribed to +switch-master on one sentinel (the
 * URL's, in turn, while none answers) and, when it names our master, has
 * the resolver ask at once instead of at its next poll: after a failover
 * the old master goes on taking writes until Sentinel turns it into a
 * replica, and every grant it makes meanwhile is lost, so the sooner the
 * connections move, the fewer. The poll stays: a message can be lost
 * (pub/sub is at-most-once) or the sentinel subscribed to can be down. */

#define LISTEN_TIMEOUT_MS 500	/* how often the listener looks at stop */

/* +switch-master's payload: "<master> <old ip> <old port> <new ip> <new
 * port>": is it about master? */
static bool about(const redisReply *payload, const char *master)
{
	size_t n = strlen(master);

	return payload->type == REDIS_REPLY_STRING && payload->len > n &&
	       !memcmp(payload->str, master, n) && payload->str[n] == ' ';
}

/* Listen on sentinel s until its connection fails or stop. */
static void listen_on(struct redis_target *t, const struct redis_host *s)
{
	redisContext *c = open_node(s->host, s->port, NULL, t->url->sentinel_password, "sentinel");
	redisReply *r;

	if (!c)
		return;
	r = redisCommand(c, "SUBSCRIBE +switch-master");
	if (r)
		freeReplyObject(r);
	redisSetTimeout(c, tv_ms(LISTEN_TIMEOUT_MS));
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
		r = reply;
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		    r->element[0]->type == REDIS_REPLY_STRING &&
		    !strcmp(r->element[0]->str, "message") && about(r->element[2], t->url->master)) {
			log_info("redis sentinel: +switch-master for '%s' from %s:%d", t->url->master,
				 s->host, s->port);
			pthread_mutex_lock(&t->lock);
			t->want = true;
			pthread_cond_signal(&t->wake);
			pthread_mutex_unlock(&t->lock);
		}
		freeReplyObject(r);
	}
	redisFree(c);
}

static void *listener_main(void *arg)
{
	struct redis_target *t = arg;
	unsigned i = 0;

	while (!atomic_load(&t->listener_stop)) {
		listen_on(t, &t->url->sentinels[i++ % t->url->nsentinels]);
		for (int k = 0; k < 10 && !atomic_load(&t->listener_stop); k++)
			usleep(50 * 1000);	/* 0.5 s before the next sentinel */
	}
	return NULL;
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
	if (pthread_create(&t->listener, NULL, listener_main, t)) {
		log_error("cannot start the sentinel listener thread");
		redis_target_stop_thread(t);
		return -1;
	}
	url->target = t;
	return 0;
}

void redis_target_stop(struct redis_url *url)
{
	struct redis_target *t = url->target;

	if (!t)
		return;
	atomic_store(&t->listener_stop, true);
	pthread_join(t->listener, NULL);	/* within LISTEN_TIMEOUT_MS, or a connect's */
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
	free(t->order);
	free(t);
}
