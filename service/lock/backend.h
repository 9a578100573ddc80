/* backend.h -- what the lock domain runs on in one event loop: the loop,
 * its Redis connection, its waiters and the refresher of their fair-lock
 * queue places. Made by the composition root
 * (main.c) for each loop; handlers pass it to every lock operation, and
 * never look inside. */
#ifndef DLOCKD_BACKEND_H
#define DLOCKD_BACKEND_H

struct fair_queue;
struct leavers;
struct loop;
struct pubsub;
struct redis_conn;
struct replica_sync;
struct waiters;

struct backend {
	struct loop *loop;
	struct redis_conn *redis;	/* the loop's pipelined connection */
	struct waiters *waiters;	/* the loop's waiting requests */
	struct fair_queue *fair;	/* keeps their fair-lock queue places */
	struct leavers *leavers;	/* gives back the places of those leaving */
	struct pubsub *pubsub;		/* the subscriber, shared by every loop */
	struct replica_sync *sync;	/* WAITs for replicas after lock changes on
					 * redis; NULL: --redis-sync-replicas off */
};

#endif
