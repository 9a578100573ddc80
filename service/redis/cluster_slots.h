/* cluster_slots.h -- Redis Cluster's rules, as pure logic: which slot a key
 * hashes to, the map from slots to the masters that serve them (read from
 * CLUSTER SLOTS), and what a MOVED or ASK redirection says. No I/O: the
 * router that sends commands uses these. */
#ifndef DLOCKD_CLUSTER_SLOTS_H
#define DLOCKD_CLUSTER_SLOTS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_SLOT_COUNT 16384
/* A host as a redirection or CLUSTER SLOTS names it: a name or an address. */
#define CLUSTER_HOST_MAX 256

/* The slot of key (len bytes): CRC16 (XMODEM) of the key, or of its hash
 * tag -- what lies between the first '{' and the first '}' after it, when
 * that is not empty -- modulo 16384. */
unsigned cluster_key_slot(const char *key, size_t len);

struct cluster_node {
	char host[CLUSTER_HOST_MAX];
	int port;
};

/* Which master serves each slot: node indexes into nodes, -1 for a slot
 * nobody serves. Nodes are only ever added, so an index stays valid for
 * the map's life. */
struct cluster_map {
	struct cluster_node *nodes;
	size_t nnodes;
	int16_t slot_node[CLUSTER_SLOT_COUNT];
};

void cluster_map_init(struct cluster_map *m);
void cluster_map_release(struct cluster_map *m);

/* The index of node host:port in m, added if it is new. */
int cluster_map_node(struct cluster_map *m, const char *host, int port);

/* Read a CLUSTER SLOTS reply into m (every slot it lists is pointed at
 * its master; the others are left as they were). A master with an empty
 * host ("" or "?": the node does not know its own address) is taken to be
 * seed_host, the host the reply came from. Returns how many slots the
 * reply covered, or -1 (m unchanged) when the reply is not CLUSTER SLOTS'
 * shape. */
int cluster_map_read_slots(struct cluster_map *m, const redisReply *r, const char *seed_host);

/* The master of slot in m, or -1. */
int cluster_map_master(const struct cluster_map *m, unsigned slot);

enum cluster_redirect {
	CLUSTER_NO_REDIRECT,
	CLUSTER_MOVED,	/* "MOVED <slot> <host>:<port>": the slot lives there now */
	CLUSTER_ASK,	/* "ASK <slot> <host>:<port>": this once, send ASKING then
			 * the command there (the slot is being migrated) */
};

/* What the error reply err says: a redirection, with the slot and where to
 * (the host is the text before the last ':'; "" means the node that
 * answered), or CLUSTER_NO_REDIRECT for any other error. */
enum cluster_redirect cluster_redirect_parse(const char *err, unsigned *slot,
					     struct cluster_node *to);

#endif
