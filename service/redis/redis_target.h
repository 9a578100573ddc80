/* redis_target.h -- where dlockd's Redis connections connect when --redis
 * names sentinels (redis-sentinel://): the master they report, asked for
 * and confirmed by a resolver thread of its own, published under a mutex.
 * A plain redis:// or unix:// URL has no target: its connections use the
 * URL's address and never call in here. */
#ifndef DLOCKD_REDIS_TARGET_H
#define DLOCKD_REDIS_TARGET_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

struct redis_target;
struct redis_url;

/* Start the resolver of url (a sentinel URL, which must outlive it) and
 * set url->target; it asks the sentinels at once. -1 if the thread cannot
 * start. */
int redis_target_start(struct redis_url *url);
/* Stop the resolver and clear url->target; after every connection is
 * gone. */
void redis_target_stop(struct redis_url *url);

/* Any thread, never blocking: the master's address now, its host copied
 * into host (len bytes, NUL-terminated) and its port into *port. Returns
 * the address's generation (> 0), to hand back to redis_target_lost(), or
 * 0 while no master is known (the resolver is asking). */
unsigned redis_target_get(struct redis_target *t, char *host, size_t len, int *port);
/* Any thread, never blocking: a connection to generation gen's address
 * was refused or lost, or found a node that is not the master (ROLE, a
 * READONLY error): forget that address and ask the sentinels again. An
 * older generation than the current one is ignored. */
void redis_target_lost(struct redis_target *t, unsigned gen);

/* Any thread, lock-free: the sentinels have named another master since
 * generation gen's address (a connection on it must move). */
bool redis_target_moved(struct redis_target *t, unsigned gen);

/* Any thread, lock-free: no master is known because a failover the
 * sentinels announced is under way (for the 503's words). */
bool redis_target_failing_over(struct redis_target *t);

/* ROLE's reply r says the node is a master. */
bool redis_role_is_master(const redisReply *r);

#endif
