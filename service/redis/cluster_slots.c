/* cluster_slots.c -- Redis Cluster's key hashing, slot map and
 * redirections (cluster_slots.h), from the cluster specification: a key's
 * slot is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0) of the
 * key or its hash tag, modulo 16384. Every key of one dlockd lock carries
 * the tag {N}, so each lock operation is one command on one slot. */
#include "service/redis/cluster_slots.h"

#include "service/base/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint16_t crc16(const char *s, size_t len)
{
	uint16_t crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((unsigned char)s[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned cluster_key_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len), *close;

	if (open) {
		size_t rest = len - (size_t)(open - key) - 1;

		close = memchr(open + 1, '}', rest);
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) & (CLUSTER_SLOT_COUNT - 1);
	}
	return crc16(key, len) & (CLUSTER_SLOT_COUNT - 1);
}

void cluster_map_init(struct cluster_map *m)
{
	m->nodes = NULL;
	m->nnodes = 0;
	for (size_t i = 0; i < CLUSTER_SLOT_COUNT; i++)
		m->slot_node[i] = -1;
}

void cluster_map_release(struct cluster_map *m)
{
	free(m->nodes);
	cluster_map_init(m);
}

int cluster_map_node(struct cluster_map *m, const char *host, int port)
{
	for (size_t i = 0; i < m->nnodes; i++)
		if (m->nodes[i].port == port && !strcmp(m->nodes[i].host, host))
			return (int)i;
	m->nodes = xrealloc(m->nodes, (m->nnodes + 1) * sizeof(*m->nodes));
	snprintf(m->nodes[m->nnodes].host, CLUSTER_HOST_MAX, "%s", host);
	m->nodes[m->nnodes].port = port;
	return (int)m->nnodes++;
}

/* Is e a CLUSTER SLOTS range: start, end, then the master as an array
 * whose first two elements are its host and port? */
static bool range_ok(const redisReply *e)
{
	const redisReply *master;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
	    e->element[0]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->type != REDIS_REPLY_INTEGER)
		return false;
	if (e->element[0]->integer < 0 || e->element[1]->integer >= CLUSTER_SLOT_COUNT ||
	    e->element[0]->integer > e->element[1]->integer)
		return false;
	master = e->element[2];
	return master->type == REDIS_REPLY_ARRAY && master->elements >= 2 &&
	       master->element[0]->type == REDIS_REPLY_STRING &&
	       master->element[0]->len < CLUSTER_HOST_MAX &&
	       master->element[1]->type == REDIS_REPLY_INTEGER &&
	       master->element[1]->integer > 0 && master->element[1]->integer <= 65535;
}

int cluster_map_read_slots(struct cluster_map *m, const redisReply *r, const char *seed_host)
{
	int covered = 0;

	if (!r || r->type != REDIS_REPLY_ARRAY)
		return -1;
	for (size_t i = 0; i < r->elements; i++)
		if (!range_ok(r->element[i]))
			return -1;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i], *master = e->element[2];
		const char *host = master->element[0]->str;
		int node;

		if (!*host || !strcmp(host, "?"))
			host = seed_host;
		node = cluster_map_node(m, host, (int)master->element[1]->integer);
		for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
			m->slot_node[s] = (int16_t)node;
		covered += (int)(e->element[1]->integer - e->element[0]->integer + 1);
	}
	return covered;
}

int cluster_map_master(const struct cluster_map *m, unsigned slot)
{
	return slot < CLUSTER_SLOT_COUNT ? m->slot_node[slot] : -1;
}

enum cluster_redirect cluster_redirect_parse(const char *err, unsigned *slot,
					     struct cluster_node *to)
{
	enum cluster_redirect kind;
	const char *p, *addr, *colon;
	char *end;
	unsigned long s;
	long port;

	if (!strncmp(err, "MOVED ", 6)) {
		kind = CLUSTER_MOVED;
		p = err + 6;
	} else if (!strncmp(err, "ASK ", 4)) {
		kind = CLUSTER_ASK;
		p = err + 4;
	} else {
		return CLUSTER_NO_REDIRECT;
	}
	s = strtoul(p, &end, 10);
	if (end == p || *end != ' ' || s >= CLUSTER_SLOT_COUNT)
		return CLUSTER_NO_REDIRECT;
	addr = end + 1;
	colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= CLUSTER_HOST_MAX)
		return CLUSTER_NO_REDIRECT;
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port <= 0 || port > 65535)
		return CLUSTER_NO_REDIRECT;
	*slot = (unsigned)s;
	memcpy(to->host, addr, (size_t)(colon - addr));
	to->host[colon - addr] = '\0';
	to->port = (int)port;
	return kind;
}
