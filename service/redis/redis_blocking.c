/* redis_blocking.c -- blocking connections to Redis (redis_blocking.h):
 * the subscriber's, and the short-lived ones on which main.c's questions
 * at start are asked (a cluster? sharded pub/sub?). Each is dialled with
 * redis_dial.c and set up here (command timeout, keepalive, AUTH, SELECT)
 * before the caller gets it; with a sentinel URL it goes to the master the
 * resolver knows (redis_target.h), confirmed with ROLE, and one that
 * fails is reported to the resolver. */
#include "service/redis/redis_blocking.h"

#include "service/base/log.h"
#include "service/base/util.h"
#include "service/redis/redis_dial.h"
#include "service/redis/redis_target.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* A blocking call's timeout, as a pipelined call's (redis_node.c). */
#define COMMAND_TIMEOUT_MS 2000

/* A refused set-up is logged at warn at most this often: the subscriber
 * tries again every second while Redis refuses it (a wrong password). */
#define SETUP_WARN_EVERY_MS 60000

/* Run a set-up command; 0 when it answered OK. */
static int setup_command(redisContext *c, int argc, const char **argv)
{
	static _Atomic int64_t warned_ms = INT64_MIN / 2;
	redisReply *r = redisCommandArgv(c, argc, argv, NULL);
	int ok = r && r->type != REDIS_REPLY_ERROR;

	if (r && !ok) {
		int64_t now = now_ms(), last = atomic_load(&warned_ms);

		if (now - last >= SETUP_WARN_EVERY_MS &&
		    atomic_compare_exchange_strong(&warned_ms, &last, now))
			log_warn("redis %s failed: %s (logged once a minute while it fails)",
				 argv[0], r->str);
		else
			log_debug("redis %s failed: %s", argv[0], r->str);
	}
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* Set up a blocking connection just made: command timeout, keepalive,
 * AUTH and SELECT; -1 (logged at debug) if it failed. */
static int blocking_setup(redisContext *c, const struct redis_url *url)
{
	struct redis_setup_cmd cmds[2];
	char db[16];
	int n;

	if (c->err) {
		log_debug("redis connect failed: %s", c->errstr);
		return -1;
	}
	redis_set_timeout_ms(c, COMMAND_TIMEOUT_MS);
	if (!url->unix_path && !url->tls)	/* a tunnel's TCP socket has it */
		redisEnableKeepAlive(c);
	n = redis_setup_cmds(url, cmds, db);
	for (int i = 0; i < n; i++)
		if (setup_command(c, cmds[i].argc, cmds[i].argv))
			return -1;
	return 0;
}

redisContext *redis_open_blocking_at(const struct redis_url *url, const char *host, int port)
{
	redisContext *c = redis_connect_tcp(url, host, port, REDIS_CONNECT_TIMEOUT_MS, true);

	if (c && blocking_setup(c, url) < 0) {
		redisFree(c);
		c = NULL;
	}
	return c;
}

bool redis_has_sharded_pubsub(const struct redis_url *url)
{
	/* every seed in turn: the first may be down (a cluster's seeds are
	 * the nodes of one cluster, so the first that answers speaks for all) */
	for (unsigned i = 0; i < (url->nseeds ? url->nseeds : 1); i++) {
		redisContext *c = url->nseeds ? redis_open_blocking_at(url, url->seeds[i].host,
									url->seeds[i].port)
					      : redis_open_blocking(url, NULL);
		redisReply *r = c ? redisCommand(c, "PUBSUB SHARDNUMSUB") : NULL;
		bool answered = r && r->type != REDIS_REPLY_ERROR;
		bool yes = r && r->type == REDIS_REPLY_ARRAY;

		if (r)
			freeReplyObject(r);
		if (c)
			redisFree(c);
		if (answered || (r && !yes))
			return yes;
	}
	/* no node answered: a cluster found at start is Redis 7 as a rule */
	log_warn("redis: no node answered PUBSUB SHARDNUMSUB at start; taking sharded pub/sub "
		 "(give --redis-pubsub to choose)");
	return true;
}

bool redis_answers(const struct redis_url *url)
{
	for (unsigned i = 0; i < (url->nseeds ? url->nseeds : 1); i++) {
		redisContext *c = url->nseeds ? redis_open_blocking_at(url, url->seeds[i].host,
									url->seeds[i].port)
					      : redis_open_blocking(url, NULL);
		redisReply *r = c ? redisCommand(c, "PING") : NULL;
		bool pong = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");

		if (r)
			freeReplyObject(r);
		if (c)
			redisFree(c);
		if (pong)
			return true;
	}
	return false;
}

/* A cluster's seed that redis_open_blocking() tries next: the one after
 * the last that failed. */
static atomic_uint next_seed;

redisContext *redis_open_blocking(const struct redis_url *url, unsigned *target_gen)
{
	char host[256];
	redisContext *c;
	unsigned gen = 0, seed = 0;
	int port = url->port;

	if (url->cluster && url->nseeds > 1) {
		/* any node hears a classic PUBLISH; a dead one is passed over */
		seed = atomic_load(&next_seed) % url->nseeds;
		c = redis_connect_tcp(url, url->seeds[seed].host, url->seeds[seed].port,
				      REDIS_CONNECT_TIMEOUT_MS, true);
		goto connected;
	}
	if (url->target) {
		gen = redis_target_get(url->target, host, sizeof(host), &port);
		if (!gen) {
			log_debug("redis connect: no master known yet");
			return NULL;
		}
	}
	c = gen ? redis_connect_tcp(url, host, port, REDIS_CONNECT_TIMEOUT_MS, true)
		: redis_connect_url(url, REDIS_CONNECT_TIMEOUT_MS, true);
connected:
	if (!c)
		return NULL;
	if (blocking_setup(c, url) < 0)
		goto fail;
	if (gen) {
		redisReply *r = redisCommand(c, "ROLE");
		bool master = redis_role_is_master(r);

		if (r)
			freeReplyObject(r);
		if (!master) {
			log_warn("redis %s:%d is not the master (ROLE)", host, port);
			goto fail;
		}
	}
	if (target_gen)
		*target_gen = gen;
	return c;
fail:
	if (gen)
		redis_target_lost(url->target, gen);
	if (url->cluster)
		atomic_compare_exchange_strong(&next_seed, &seed, seed + 1);
	redisFree(c);
	return NULL;
}

/* Ask the one Redis of url whether it is a cluster node (url->cluster);
 * 1 when it did not answer, why saying why. */
static int ask_node(struct redis_url *url, char *why, size_t why_len)
{
	struct redis_url db0 = *url;
	redisContext *c;
	redisReply *r;

	db0.db = 0;	/* a cluster node refuses SELECT: ask without it */
	c = url->unix_path ? redis_connect_url(&db0, REDIS_CONNECT_TIMEOUT_MS, true)
			   : redis_connect_tcp(&db0, url->host, url->port, REDIS_CONNECT_TIMEOUT_MS,
					       true);
	if (!c || c->err) {
		snprintf(why, why_len, "%s", c ? c->errstr : "cannot allocate a connection");
		redisFree(c);
		/* not said first: whoever reads the warning needs the address */
		log_debug("redis did not answer at start: taken for a single Redis, not a "
			  "cluster (list two or more cluster nodes in --redis to say it is one)");
		return 1;
	}
	if (blocking_setup(c, &db0) < 0) {
		snprintf(why, why_len, "%s", c->errstr[0] ? c->errstr : "its set-up (AUTH) failed");
		redisFree(c);
		return 1;
	}
	if (!url->unix_path) {
		r = redisCommand(c, "INFO cluster");
		url->cluster = r && r->type == REDIS_REPLY_STRING &&
			       strstr(r->str, "cluster_enabled:1");
		if (r)
			freeReplyObject(r);
	}
	redisFree(c);
	return 0;
}

int redis_detect_cluster(struct redis_url *url, char *why, size_t why_len)
{
	int rc = 0;

	if (url->nsentinels)
		return 0;
	if (url->nseeds > 1)
		url->cluster = true;
	else
		rc = ask_node(url, why, why_len);
	if (url->cluster && url->db) {
		log_error("redis url: a Redis Cluster has database 0 only, not %d", url->db);
		return -1;
	}
	return rc;
}
