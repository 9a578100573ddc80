/* cluster.c -- a real Redis Cluster on loopback for the tests (cluster.h). */
#include "cluster.h"
#include "service/redis/cluster_slots.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

redisReply *cluster_cmd(struct redis_cluster *c, int i, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	if (i < 0 || i >= c->n || c->node[i].pid <= 0)
		return NULL;
	va_start(ap, fmt);
	r = rvcmd_on(&c->node[i], fmt, ap);
	va_end(ap);
	return r;
}

/* Node i says cluster_state:ok. */
static bool node_ok(struct redis_cluster *c, int i)
{
	redisReply *r = cluster_cmd(c, i, "CLUSTER INFO");
	bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") &&
		  strstr(r->str, "cluster_slots_ok:16384");

	if (r)
		freeReplyObject(r);
	return ok;
}

/* Node i is a master, or a replica whose link to its master is up. */
static bool node_synced(struct redis_cluster *c, int i)
{
	redisReply *r = cluster_cmd(c, i, "INFO replication");
	bool ok = r && r->type == REDIS_REPLY_STRING &&
		  (strstr(r->str, "role:master") || strstr(r->str, "master_link_status:up"));

	if (r)
		freeReplyObject(r);
	return ok;
}

bool cluster_wait_ok(struct redis_cluster *c, int timeout_ms)
{
	int64_t end = mono_ms() + timeout_ms;

	for (;;) {
		bool all = true;

		for (int i = 0; i < c->n && all; i++)
			if (c->node[i].pid > 0)
				all = node_ok(c, i) && node_synced(c, i);
		if (all)
			return true;
		if (mono_ms() > end)
			return false;
		sleep_ms(50);
	}
}

/* Can port be bound on loopback now? */
static bool port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* A free port whose cluster bus port (+10000, so at most 55535) is free
 * too. */
static int node_port(void)
{
	for (int i = 0; i < 1000; i++) {
		int p = free_port();

		if (p <= 55535 && port_free(p + 10000))
			return p;
	}
	return -1;
}

/* redis-cli's TLS options (trusting ca.pem, presenting client.pem) for a
 * cluster served over TLS, "" for a plaintext one. */
static const char *cli_tls(const struct redis_cluster *c)
{
	static char opts[1024];

	if (!c->tls)
		return "";
	snprintf(opts, sizeof(opts), " --tls --cacert %s --cert %s --key %s", pki_path("ca.pem"),
		 pki_path("client.pem"), pki_path("client.key"));
	return opts;
}

/* The port clients of the cluster reach node i by: its TLS port in a
 * cluster over TLS. */
static int client_port(const struct redis_cluster *c, int i)
{
	return c->tls ? c->node[i].tls_port : c->node[i].port;
}

static int nodes_started;

static int cluster_start_once(struct redis_cluster *c, int masters, int replicas, bool tls)
{
	char log[400];
	char cmd[2048];
	int n = masters * (1 + replicas), len, rc;

	memset(c, 0, sizeof(*c));
	c->tls = tls;
	if (n > CLUSTER_MAX_NODES)
		return -1;
	for (int i = 0; i < n; i++) {
		/* over TLS the cluster bus is too (tls-cluster), on the TLS port
		 * + 10000, and so is replication; the plaintext port is the
		 * harness' own (hiredis has no TLS) */
		snprintf(c->node[i].extra, sizeof(c->node[i].extra),
			 "--cluster-enabled yes --cluster-config-file nodes.conf "
			 "--cluster-node-timeout 2000 --appendonly no%s",
			 tls ? " --tls-cluster yes --tls-replication yes --tls-auth-clients yes" :
			       "");
		if (tls) {
			c->node[i].tls_port = node_port();
			c->node[i].port = free_port();
		} else {
			c->node[i].port = node_port();
		}
		/* a directory of its own: one named after a port an earlier test's
		 * node had would hand this node that node's nodes.conf ("node is
		 * not empty", and no cluster) */
		snprintf(c->node[i].dir, sizeof(c->node[i].dir), "%s/cluster-node-%d-%d",
			 test_tmpdir(), ++nodes_started, c->node[i].port);
		mkdir(c->node[i].dir, 0755);
		c->n = i + 1;
		if (redis_start(&c->node[i]) < 0)
			goto fail;
	}
	/* bounded: redis-cli waits for the nodes to join for ever, and a
	 * node that cannot reach the others' bus never does */
	len = snprintf(cmd, sizeof(cmd), "timeout -s KILL 60 redis-cli%s --cluster create",
		       cli_tls(c));
	for (int i = 0; i < n; i++)
		len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " 127.0.0.1:%d",
				client_port(c, i));
	snprintf(log, sizeof(log), "%s/cluster-create-%d.log", test_tmpdir(), c->node[0].port);
	snprintf(cmd + len, sizeof(cmd) - (size_t)len,
		 " --cluster-replicas %d --cluster-yes > %s 2>&1", replicas, log);
	rc = system(cmd);
	if (rc != 0) {
		fprintf(stderr, "# redis-cli --cluster create failed (%d); its last lines:\n", rc);
		snprintf(cmd, sizeof(cmd), "tail -n 5 %s | sed 's/^/#   /' >&2", log);
		if (system(cmd) != 0)
			fprintf(stderr, "#   (see %s)\n", log);
		goto fail;
	}
	if (!cluster_wait_ok(c, 30000)) {
		fprintf(stderr, "# the cluster did not come up\n");
		goto fail;
	}
	len = 0;
	for (int i = 0; i < masters && i < 3; i++)
		len += snprintf(c->seeds + len, sizeof(c->seeds) - (size_t)len, "%s127.0.0.1:%d",
				i ? "," : "", client_port(c, i));
	return 0;
fail:
	cluster_stop(c);
	return -1;
}

/* A cluster is many processes on ports picked a moment before they are
 * bound: should the creation fail, once more on new ports. */
static int start_twice(struct redis_cluster *c, int masters, int replicas, bool tls)
{
	if (cluster_start_once(c, masters, replicas, tls) == 0)
		return 0;
	fprintf(stderr, "# starting the cluster again\n");
	return cluster_start_once(c, masters, replicas, tls);
}

int cluster_start(struct redis_cluster *c, int masters, int replicas)
{
	return start_twice(c, masters, replicas, false);
}

int cluster_start_tls(struct redis_cluster *c, int masters, int replicas)
{
	return start_twice(c, masters, replicas, true);
}

void cluster_stop(struct redis_cluster *c)
{
	for (int i = 0; i < c->n; i++)
		redis_stop(&c->node[i], true);
}

void cluster_stop_at_end(void *c)
{
	cluster_stop(c);
}

long long cluster_key_slot_of(struct redis_cluster *c, const char *key)
{
	for (int i = 0; i < c->n; i++) {
		redisReply *r = cluster_cmd(c, i, "CLUSTER KEYSLOT %s", key);
		long long slot = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

		if (r)
			freeReplyObject(r);
		if (slot >= 0)
			return slot;
	}
	return -1;
}

int cluster_master_of(struct redis_cluster *c, int from, const char *key)
{
	redisReply *r = cluster_cmd(c, from, "CLUSTER KEYSLOT %s", key), *s;
	long long slot;
	int found = -1;

	if (!r || r->type != REDIS_REPLY_INTEGER) {
		if (r)
			freeReplyObject(r);
		return -1;
	}
	slot = r->integer;
	freeReplyObject(r);
	s = cluster_cmd(c, from, "CLUSTER SLOTS");
	for (size_t i = 0; s && s->type == REDIS_REPLY_ARRAY && i < s->elements; i++) {
		redisReply *e = s->element[i];

		if (e->elements < 3 || slot < e->element[0]->integer ||
		    slot > e->element[1]->integer)
			continue;
		for (int k = 0; k < c->n; k++)
			if (c->node[k].port == e->element[2]->element[1]->integer)
				found = k;
	}
	if (s)
		freeReplyObject(s);
	return found;
}

int cluster_replica_of(struct redis_cluster *c, int m)
{
	for (int i = 0; i < c->n; i++) {
		redisReply *r = i != m ? cluster_cmd(c, i, "ROLE") : NULL;
		bool mine = false;

		if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
		    !strcmp(r->element[0]->str, "slave"))
			/* over TLS a replica names its master's TLS port */
			mine = r->element[2]->integer == client_port(c, m);
		if (r)
			freeReplyObject(r);
		if (mine)
			return i;
	}
	return -1;
}

bool cluster_names_per_master(struct redis_cluster *c, const char *hint, char names[3][128])
{
	bool found[3] = { false, false, false };

	for (int i = 0; i < 300 && !(found[0] && found[1] && found[2]); i++) {
		char n[128];
		int m;

		snprintf(n, sizeof(n), "%s", lockname(hint));
		m = cluster_master_of(c, 0, n);
		if (m >= 0 && m < 3 && !found[m]) {
			found[m] = true;
			snprintf(names[m], 128, "%s", n);
		}
	}
	return found[0] && found[1] && found[2];
}

bool cluster_has_key(struct redis_cluster *c, int i, const char *key)
{
	redisReply *r = cluster_cmd(c, i, "EXISTS %s", key);
	bool yes = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;

	if (r)
		freeReplyObject(r);
	return yes;
}

bool cluster_node_has_keys(struct redis_cluster *c, int i)
{
	redisReply *r = cluster_cmd(c, i, "DBSIZE");
	bool yes = r && r->type == REDIS_REPLY_INTEGER && r->integer > 0;

	if (r)
		freeReplyObject(r);
	return yes;
}

void cluster_same_slot_name(const char *name, const char *prefix, char *out, size_t cap)
{
	unsigned slot = cluster_key_slot(name, strlen(name));

	out[0] = '\0';
	for (int i = 0; i < 1000000 && !out[0]; i++) {
		char n[128];

		snprintf(n, sizeof(n), "%s-%d", prefix, i);
		if (cluster_key_slot(n, strlen(n)) == slot)
			snprintf(out, cap, "%s", n);
	}
}
