/* replica_sync.h -- replica-acknowledged lock changes (--redis-sync-replicas):
 * after a lock script changed something, a WAIT on the same pipelined
 * connection says whether enough replicas have it. One per event loop,
 * owned through struct backend (NULL there: off, nothing is waited for). */
#ifndef DLOCKD_REPLICA_SYNC_H
#define DLOCKD_REPLICA_SYNC_H

#include <stdbool.h>
#include <stdint.h>

struct redis_conn;
struct replica_sync;

/* --redis-sync-replicas auto: as many replicas as the master has
 * connected (ROLE), and at least one if it has any. */
#define REPLICA_SYNC_AUTO (-1)

/* WAIT blocks the loop's connection: every command sent behind it runs
 * when it answers. A script's deadline is 1.5 s after its send
 * (redis_node.c), so a longer WAIT would make those late. */
#define REPLICA_SYNC_TIMEOUT_MAX_MS 1000

/* A waiter on conn (which must outlive it): replicas is the number WAIT
 * asks for (1..), or REPLICA_SYNC_AUTO; timeout_ms is WAIT's timeout. */
struct replica_sync *replica_sync_new(struct redis_conn *conn, int replicas, int64_t timeout_ms);
/* After the connection is freed (which answers every WAIT in flight). */
void replica_sync_free(struct replica_sync *s);

/* Whether the replicas have a change: confirmed is false when fewer than
 * asked acknowledged it within the timeout, when the connection dropped
 * or gave no answer, or when Redis refused WAIT or ROLE. */
typedef void (*replica_sync_fn)(void *ctx, bool confirmed);

/* Call from the reply callback of a command on s's connection that
 * changed a lock: fn is called exactly once, later, on the loop, when a
 * WAIT sent after that reply on the same connection has answered. WAITs
 * are coalesced: one covers every change answered before it was sent. */
void replica_sync_after(struct replica_sync *s, replica_sync_fn fn, void *ctx);

#endif
