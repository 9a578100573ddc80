/* redis_blocking.h -- blocking connections to Redis: the ones the
 * subscriber makes for itself, and the questions asked at start (is it a
 * cluster, has it sharded pub/sub). Never on an event loop's thread. */
#ifndef DLOCKD_REDIS_BLOCKING_H
#define DLOCKD_REDIS_BLOCKING_H

#include "service/redis/redis_url.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

/* A blocking connection to url (the subscriber's), authenticated and on the
 * right db, with the command timeout set; NULL (and a log line) if Redis
 * cannot be reached. With a sentinel URL, to the master known now (NULL
 * while none is), confirmed with ROLE; *target_gen (may be NULL) is then
 * the address's generation, for redis_target_lost() when the connection
 * is lost (else 0). The caller frees it with redisFree(). */
redisContext *redis_open_blocking(const struct redis_url *url, unsigned *target_gen);

/* A blocking connection to the cluster node host:port with url's
 * credentials (the sharded subscriber's, one per node); NULL if it cannot
 * be reached or set up. The caller frees it with redisFree(). */
redisContext *redis_open_blocking_at(const struct redis_url *url, const char *host, int port);

/* Does the Redis of url have sharded pub/sub (Redis 7: PUBSUB SHARDNUMSUB
 * answers without error), as Redisson probes it? false when it cannot be
 * asked. */
bool redis_has_sharded_pubsub(const struct redis_url *url);

/* Does Redis answer PING (a node of a cluster, a sentinel URL's master)
 * with PONG now -- not an error such as LOADING? Blocks for a connect at
 * most (REDIS_CONNECT_TIMEOUT_MS) and the command timeout. */
bool redis_answers(const struct redis_url *url);

/* Decide url->cluster before any connection is made: a redis:// URL with
 * several hosts names a cluster's seeds; with one, the node is asked
 * (INFO cluster: cluster_enabled). Returns 0; 1 when the Redis of url
 * (a single host or a unix socket) did not answer, why (why_len bytes)
 * saying why ("Connection refused"), and it is taken for a single Redis;
 * -1 (logged) for a setting a cluster cannot serve (a database other
 * than 0). Sentinel URLs are not asked (0). */
int redis_detect_cluster(struct redis_url *url, char *why, size_t why_len);

#endif
