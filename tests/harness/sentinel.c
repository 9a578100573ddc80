/* sentinel.c -- a real Redis Sentinel topology on loopback for the tests
 * (sentinel.h). */
#include "sentinel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sentinel_topo_stop(void *arg)
{
	struct sentinel_topo *t = arg;

	for (int i = 0; i < 3; i++)
		redis_stop(&t->sent[i], false);
	for (int i = 0; i < 3; i++)
		redis_stop(&t->data[i], false);
}

/* A sentinel watching the master on master_port, with its own config
 * file (Sentinel rewrites it); with tls, served and speaking to the data
 * nodes over TLS too. */
static int sentinel_start(struct redis_srv *s, int master_port, bool tls)
{
	char dir[sizeof(s->dir)];
	FILE *f;

	s->port = free_port();
	/* built apart: gcc -O1 takes two fields of *s for one object (-Wrestrict) */
	snprintf(dir, sizeof(dir), "%s/sentinel-%d", test_tmpdir(), s->port);
	mkdir(dir, 0755);
	memcpy(s->dir, dir, sizeof(dir));
	snprintf(s->conf, sizeof(s->conf), "%s/sentinel.conf", dir);
	f = fopen(s->conf, "w");
	if (!f)
		return -1;
	fprintf(f, "sentinel monitor " SENTINEL_MASTER " 127.0.0.1 %d 2\n"
		   "sentinel down-after-milliseconds " SENTINEL_MASTER " 1000\n"
		   "sentinel failover-timeout " SENTINEL_MASTER " 3000\n", master_port);
	fclose(f);
	snprintf(s->extra, sizeof(s->extra), "--sentinel%s", tls ? " --tls-replication yes" : "");
	s->tls_port = tls ? -1 : 0;
	return redis_start(s);
}

bool redis_info_has(const struct redis_srv *r, const char *section, const char *needle)
{
	redisReply *rep = rcmd_on(r, "INFO %s", section);
	bool ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, needle);

	if (rep)
		freeReplyObject(rep);
	return ok;
}

/* Every sentinel knows the other two, the quorum, and every replica. */
static bool sentinels_ready(const struct sentinel_topo *t)
{
	for (int i = 0; i < 3; i++) {
		redisReply *q = rcmd_on(&t->sent[i], "SENTINEL CKQUORUM " SENTINEL_MASTER);
		redisReply *r = rcmd_on(&t->sent[i], "SENTINEL REPLICAS " SENTINEL_MASTER);
		bool ok = q && q->type == REDIS_REPLY_STATUS && !strncmp(q->str, "OK 3 ", 5) &&
			  r && r->type == REDIS_REPLY_ARRAY && (int)r->elements == t->ndata - 1;

		if (q)
			freeReplyObject(q);
		if (r)
			freeReplyObject(r);
		if (!ok)
			return false;
	}
	return true;
}

int sentinel_master_port(const struct sentinel_topo *t)
{
	for (int i = 0; i < 3; i++) {
		redisReply *r = t->sent[i].pid > 0 ?
			rcmd_on(&t->sent[i], "SENTINEL get-master-addr-by-name " SENTINEL_MASTER) :
			NULL;
		int port = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ?
			atoi(r->element[1]->str) : 0;

		if (r)
			freeReplyObject(r);
		if (port)
			return port;
	}
	return 0;
}

struct redis_srv *sentinel_data_on(struct sentinel_topo *t, int port)
{
	for (int i = 0; i < t->ndata; i++)
		if (t->data[i].port == port)
			return &t->data[i];
	return NULL;
}

static int topo_start(struct sentinel_topo *t, int replicas, bool tls)
{
	memset(t, 0, sizeof(*t));
	test_at_end(sentinel_topo_stop, t);
	if (replicas < 1 || replicas > 2)
		return -1;
	t->ndata = 1 + replicas;
	if (tls) {
		t->data[0].tls_port = -1;
		snprintf(t->data[0].extra, sizeof(t->data[0].extra), "--tls-replication yes");
	}
	if (redis_start(&t->data[0]) < 0)
		return -1;
	for (int i = 1; i < t->ndata; i++) {
		snprintf(t->data[i].extra, sizeof(t->data[i].extra), "--replicaof 127.0.0.1 %d%s",
			 tls ? t->data[0].tls_port : t->data[0].port,
			 tls ? " --tls-replication yes" : "");
		t->data[i].tls_port = tls ? -1 : 0;
		if (redis_start(&t->data[i]) < 0)
			return -1;
	}
	for (int i = 1; i < t->ndata; i++)
		if (!WAIT_FOR(redis_info_has(&t->data[i], "replication", "master_link_status:up"),
			      20000)) {
			printf("# replica on %d did not sync\n", t->data[i].port);
			return -1;
		}
	for (int i = 0; i < 3; i++)
		if (sentinel_start(&t->sent[i], tls ? t->data[0].tls_port : t->data[0].port,
				   tls) < 0)
			return -1;
	if (!WAIT_FOR(sentinels_ready(t), 30000)) {
		printf("# sentinels did not agree on the quorum and replicas\n");
		return -1;
	}
	if (tls)
		snprintf(t->url, sizeof(t->url), "rediss-sentinel://127.0.0.1:%d,127.0.0.1:%d,"
			 "127.0.0.1:%d/0#" SENTINEL_MASTER, t->sent[0].tls_port,
			 t->sent[1].tls_port, t->sent[2].tls_port);
	else
		snprintf(t->url, sizeof(t->url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,"
			 "127.0.0.1:%d/0#" SENTINEL_MASTER, t->sent[0].port, t->sent[1].port,
			 t->sent[2].port);
	return 0;
}

int sentinel_topo_start(struct sentinel_topo *t, int replicas)
{
	return topo_start(t, replicas, false);
}

int sentinel_topo_start_tls(struct sentinel_topo *t, int replicas)
{
	return topo_start(t, replicas, true);
}
