/* bench.c -- `make bench`: dlockd against the Redis floor.
 *
 * Starts its own redis-server and dlockd on loopback ports, runs each
 * scenario against dlockd over HTTP/1.1 keep-alive and, as the baseline,
 * the same embedded Lua scripts called directly with EVALSHA over hiredis
 * at the same concurrency, then prints a Markdown table and writes
 * bench/results/latest.json. Absolute numbers drift on a shared machine;
 * the ratios against the floor measured in the same run are the result.
 *
 *   build/bench/bench [--seconds S] [--quick] [--only WORD] [BIN]   (make bench) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ----- The embedded scripts (build/lua_scripts.o) ----- */

struct lua_source {
	const char *name;
	const char *source;
};
extern const struct lua_source lua_sources[];
extern const unsigned lua_sources_count;

static const char *script_source(const char *name)
{
	for (unsigned i = 0; i < lua_sources_count; i++)
		if (!strcmp(lua_sources[i].name, name))
			return lua_sources[i].source;
	fprintf(stderr, "bench: no script %s\n", name);
	exit(2);
}

/* ----- Time and processes ----- */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static pid_t spawn(const char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static int tcp_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	return fd;
}

static bool wait_port(int port)
{
	for (int i = 0; i < 500; i++) {
		int fd = tcp_connect(port);

		if (fd >= 0) {
			close(fd);
			return true;
		}
		sleep_ms(10);
	}
	return false;
}

/* RSS in KiB and thread count of pid, from /proc. */
static void proc_usage(pid_t pid, long *rss_kib, int *threads)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	*rss_kib = -1;
	*threads = -1;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", rss_kib);
		sscanf(line, "Threads: %d", threads);
	}
	if (f)
		fclose(f);
}

/* ----- A minimal HTTP/1.1 keep-alive client ----- */

/* While set, conn_open() speaks TLS (GnuTLS, the certificate checked
 * against tls_trust for 127.0.0.1): the dlockd running is an HTTPS one. */
static bool use_tls;
/* --redis-ca for the dlockd started next (redis_tls_cost), NULL: none */
static const char *redis_ca;
static gnutls_certificate_credentials_t tls_trust;

struct conn {
	int fd;
	gnutls_session_t tls;	/* NULL: plain */
	char buf[1 << 17];	/* room for a whole /metrics page */
	size_t len;		/* bytes in buf */
};

static void conn_close(struct conn *c)
{
	if (c->tls)
		gnutls_deinit(c->tls);
	c->tls = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int conn_open(struct conn *c, int port)
{
	int rc;

	c->len = 0;
	c->tls = NULL;
	c->fd = tcp_connect(port);
	if (c->fd < 0 || !use_tls)
		return c->fd < 0 ? -1 : 0;
	if (gnutls_init(&c->tls, GNUTLS_CLIENT) < 0) {
		c->tls = NULL;
		conn_close(c);
		return -1;
	}
	gnutls_set_default_priority(c->tls);
	gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, tls_trust);
	gnutls_session_set_verify_cert(c->tls, "127.0.0.1", 0);
	gnutls_transport_set_int(c->tls, c->fd);
	do
		rc = gnutls_handshake(c->tls);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	if (rc < 0) {
		fprintf(stderr, "bench: TLS handshake: %s\n", gnutls_strerror(rc));
		conn_close(c);
		return -1;
	}
	return 0;
}

static ssize_t conn_write(struct conn *c, const void *p, size_t n)
{
	return c->tls ? gnutls_record_send(c->tls, p, n) : write(c->fd, p, n);
}

static ssize_t conn_read(struct conn *c, void *p, size_t n)
{
	ssize_t k;

	if (!c->tls)
		return read(c->fd, p, n);
	do
		k = gnutls_record_recv(c->tls, p, n);
	while (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED);
	return k;
}

/* Send one request without a body; read the response into c->buf. Returns
 * the status (body at *body, NUL-terminated), or -1. */
static int http_req(struct conn *c, const char *method, const char *path, const char **body)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Length: 0\r\n\r\n", method, path);
	size_t hdr_end = 0, clen = 0;
	char *p;

	if (conn_write(c, req, (size_t)n) != n)
		return -1;
	c->len = 0;
	for (;;) {
		ssize_t k = conn_read(c, c->buf + c->len, sizeof(c->buf) - 1 - c->len);

		if (k <= 0)
			return -1;
		c->len += (size_t)k;
		c->buf[c->len] = '\0';
		if (!hdr_end && (p = strstr(c->buf, "\r\n\r\n"))) {
			char *cl = strcasestr(c->buf, "Content-Length:");

			hdr_end = (size_t)(p - c->buf) + 4;
			clen = cl ? strtoul(cl + 15, NULL, 10) : 0;
		}
		if (hdr_end && c->len >= hdr_end + clen)
			break;
	}
	if (body)
		*body = c->buf + hdr_end;
	return atoi(c->buf + 9);
}

static long long json_field(const char *body, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(body, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* ----- Settings and results ----- */

static int http_port, redis_port;
static pid_t redis_pid, dlockd_pid, replica_pid;
/* the Sentinel and Cluster topologies' processes, stopped by pid */
static pid_t topo_pids[8];
static pid_t redis_tls_pid;	/* redis_tls_cost's redis-server, while it runs */
static int ntopo;
static double seconds = 3.0;
static const char *only;	/* --only WORD: scenarios whose name contains it */

static bool wanted(const char *scenario)
{
	return !only || strstr(scenario, only);
}
static char dir[128];

struct row {
	char scenario[96];
	char metric[48];
	double dlockd, floor;		/* floor < 0: no baseline for this figure */
	char unit[16];
};
static struct row rows[128];
static int nrows;

static void result(const char *scenario, const char *metric, double d, double f, const char *unit)
{
	struct row *r = &rows[nrows++];

	snprintf(r->scenario, sizeof(r->scenario), "%s", scenario);
	snprintf(r->metric, sizeof(r->metric), "%s", metric);
	r->dlockd = d;
	r->floor = f;
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
	fprintf(stderr, "  %-40s %-22s dlockd %12.2f   floor %12.2f %s\n", scenario, metric, d, f,
		unit);
}

static redisContext *redis_connect(void)
{
	redisContext *c = redisConnect("127.0.0.1", redis_port);

	if (!c || c->err) {
		fprintf(stderr, "bench: cannot reach redis\n");
		exit(2);
	}
	return c;
}


/* ----- Lock kinds, over HTTP and over EVALSHA ----- */

/* Every script's last argument is its deadline in Redis' clock
 * (lua/lib/common.lua); the floor's calls never expire. */
#define DEADLINE "9007199254740991"

enum kind { K_LOCK, K_FAIR, K_WRITE, K_READ, K_COUNT };

static const struct kind_info {
	const char *label;
	const char *path;		/* printf: name */
	const char *acquire, *release;	/* script names */
	const char *channel;		/* printf: name (fair: then ":owner") */
} kinds[K_COUNT] = {
	[K_LOCK] = { "lock", "/locks/%s", "lock_acquire", "lock_release",
		     "redisson_lock__channel:{%s}" },
	[K_FAIR] = { "fairlock", "/fairlocks/%s", "fair_acquire", "fair_release",
		     "redisson_lock__channel:{%s}" },
	[K_WRITE] = { "rwlock write", "/rwlocks/%s/write", "rw_write_acquire", "rw_write_release",
		      "redisson_rwlock:{%s}" },
	[K_READ] = { "rwlock read", "/rwlocks/%s/read", "rw_read_acquire", "rw_read_release",
		     "redisson_rwlock:{%s}" },
};

/* The floor: one client's connections and the scripts' SHAs. */
struct floor_client {
	redisContext *cmd, *sub;
	char acq_sha[41], rel_sha[41];
};

static void script_sha(redisContext *c, const char *name, char sha[41])
{
	redisReply *r = redisCommand(c, "SCRIPT LOAD %s", script_source(name));

	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "bench: SCRIPT LOAD %s failed\n", name);
		exit(2);
	}
	memcpy(sha, r->str, 41);
	freeReplyObject(r);
}

/* EVALSHA acquire; 1 acquired (token set), 0 held (pttl set), -1 error. */
static int floor_acquire(struct floor_client *fc, enum kind k, const char *name,
			 const char *owner, bool queue, long long *token, long long *pttl)
{
	char tok[300], q[300], dl[300], ch[300], tag[300], wr[300], own[300];
	const char *life = queue ? "5000" : "0";
	redisReply *r;
	int res = -1;

	/* ARGV: lease, owner, queue life, reentrant "0", principal "" (auth off) */
	snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", name);
	snprintf(own, sizeof(own), "dlockd_lock_owners:{%s}", name);
	switch (k) {
	case K_LOCK:
		r = redisCommand(fc->cmd, "EVALSHA %s 3 %s %s %s 30000 %s 0 0 %s " DEADLINE, fc->acq_sha,
				 name, tok, own, owner, "");
		break;
	case K_FAIR:
		snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
		snprintf(dl, sizeof(dl), "redisson_lock_timeout:{%s}", name);
		snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
		r = redisCommand(fc->cmd, "EVALSHA %s 6 %s %s %s %s %s %s 30000 %s %s 0 %s " DEADLINE,
				 fc->acq_sha, name, tok, q, dl, ch, own, owner, life, "");
		break;
	case K_WRITE:
		snprintf(tag, sizeof(tag), "{%s}", name);
		snprintf(wr, sizeof(wr), "dlockd_rwlock_writers:{%s}", name);
		r = redisCommand(fc->cmd, "EVALSHA %s 5 %s %s %s %s %s 30000 %s %s 0 %s " DEADLINE,
				 fc->acq_sha, name, tok, tag, wr, own, owner, life, "");
		break;
	default:
		/* a read also takes the caps on read holds: dlockd's defaults */
		snprintf(tag, sizeof(tag), "{%s}", name);
		snprintf(wr, sizeof(wr), "dlockd_rwlock_writers:{%s}", name);
		r = redisCommand(fc->cmd, "EVALSHA %s 5 %s %s %s %s %s 30000 %s %s 0 %s 64 256 "
				 DEADLINE, fc->acq_sha, name, tok, tag, wr, own, owner, life, "");
	}
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2) {
		res = r->element[0]->integer == 1;
		if (res)
			*token = r->element[1]->integer;
		else
			*pttl = r->element[1]->integer;
	}
	if (r)
		freeReplyObject(r);
	return res;
}

static int floor_release(struct floor_client *fc, enum kind k, const char *name, const char *owner)
{
	char q[300], dl[300], ch[300], tag[300], own[300];
	redisReply *r;
	int ok;

	/* ARGV: owner, principal "" (auth off) */
	snprintf(ch, sizeof(ch), kinds[k].channel, name);
	snprintf(own, sizeof(own), "dlockd_lock_owners:{%s}", name);
	switch (k) {
	case K_LOCK:
		r = redisCommand(fc->cmd, "EVALSHA %s 3 %s %s %s %s %s " DEADLINE, fc->rel_sha, name, ch, own,
				 owner, "");
		break;
	case K_FAIR:
		snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
		snprintf(dl, sizeof(dl), "redisson_lock_timeout:{%s}", name);
		r = redisCommand(fc->cmd, "EVALSHA %s 5 %s %s %s %s %s %s %s " DEADLINE, fc->rel_sha, name, q,
				 dl, ch, own, owner, "");
		break;
	default:
		snprintf(tag, sizeof(tag), "{%s}", name);
		r = redisCommand(fc->cmd, "EVALSHA %s 4 %s %s %s %s %s %s " DEADLINE, fc->rel_sha, name, ch,
				 tag, own, owner, "");
	}
	ok = r && r->type == REDIS_REPLY_ARRAY;
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* Wait for any message on the floor client's subscription, at most ms. */
static void floor_wait_message(struct floor_client *fc, long long ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	void *r = NULL;

	redisSetTimeout(fc->sub, tv);
	if (redisGetReply(fc->sub, &r) == REDIS_OK && r)
		freeReplyObject(r);
	else if (fc->sub->err) {
		/* a timeout kills a hiredis context: reconnect and resubscribe */
		redisFree(fc->sub);
		fc->sub = NULL;
	}
}

/* ----- One run: N clients for `seconds`, over HTTP or the floor ----- */

enum mode { UNCONTENDED, HOT };

struct run {
	enum kind kind;
	enum mode mode;
	bool floor;
	int clients;
	char name[96];		/* the hot lock */
	int64_t until_us;
	long long cycles;	/* completed acquire+release cycles */
	int errors;
	/* hand-off latency: when each token was granted and released; the
	 * grant with the next higher token is the next holder's (tokens
	 * follow Redis' clock, so they grow by more than 1 a grant) */
	struct stamp *grants, *releases;
	size_t ngrants, nreleases;
};

struct stamp {
	long long token;
	int64_t at_us;
};

#define MAX_TOKENS (1 << 21)

struct client_arg {
	struct run *run;
	int id;
};

static void note(struct stamp *v, size_t *n, long long token)
{
	size_t i;

	if (!v || token <= 0)
		return;
	i = __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
	if (i < MAX_TOKENS)
		v[i] = (struct stamp){ token, now_us() };
}

static void note_grant(struct run *run, long long token)
{
	note(run->grants, &run->ngrants, token);
}

static void note_release(struct run *run, long long token)
{
	note(run->releases, &run->nreleases, token);
}

static int cmp_stamp(const void *a, const void *b)
{
	long long x = ((const struct stamp *)a)->token, y = ((const struct stamp *)b)->token;

	return (x > y) - (x < y);
}

static void *http_client(void *arg)
{
	struct client_arg *ca = arg;
	struct run *run = ca->run;
	char name[160], base[256], acq[400], rel[400];
	struct conn c;
	long long i = 0;

	if (conn_open(&c, http_port) < 0) {
		__atomic_add_fetch(&run->errors, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	while (now_us() < run->until_us) {
		const char *body;
		long long token;

		if (run->mode == HOT)
			snprintf(name, sizeof(name), "%s", run->name);
		else
			snprintf(name, sizeof(name), "%s-%d-%lld", run->name, ca->id, i++ % 1000);
		snprintf(base, sizeof(base), kinds[run->kind].path, name);
		snprintf(acq, sizeof(acq), "%s?owner=c%d&ttl_ms=30000%s", base, ca->id,
			 run->mode == HOT ? "&wait_ms=60000" : "");
		snprintf(rel, sizeof(rel), "%s?owner=c%d", base, ca->id);
		if (http_req(&c, "PUT", acq, &body) != 200) {
			run->errors++;
			break;
		}
		token = json_field(body, "fencing_token");
		note_grant(run, token);
		note_release(run, token);
		if (http_req(&c, "DELETE", rel, NULL) != 200) {
			run->errors++;
			break;
		}
		__atomic_add_fetch(&run->cycles, 1, __ATOMIC_RELAXED);
	}
	conn_close(&c);
	return NULL;
}

static void *floor_client(void *arg)
{
	struct client_arg *ca = arg;
	struct run *run = ca->run;
	struct floor_client fc = { 0 };
	char name[160], owner[32], ch[400];
	long long i = 0;

	fc.cmd = redis_connect();
	script_sha(fc.cmd, kinds[run->kind].acquire, fc.acq_sha);
	script_sha(fc.cmd, kinds[run->kind].release, fc.rel_sha);
	snprintf(owner, sizeof(owner), "c%d", ca->id);
	while (now_us() < run->until_us) {
		long long token = 0, pttl = 0;
		int got;

		if (run->mode == HOT)
			snprintf(name, sizeof(name), "%s", run->name);
		else
			snprintf(name, sizeof(name), "%s-%d-%lld", run->name, ca->id, i++ % 1000);
		while ((got = floor_acquire(&fc, run->kind, name, owner, run->mode == HOT, &token,
					    &pttl)) == 0) {
			/* the naive client: subscribe once, wait for "0", retry */
			if (!fc.sub) {
				redisReply *r;

				fc.sub = redis_connect();
				snprintf(ch, sizeof(ch), kinds[run->kind].channel, name);
				if (run->kind == K_FAIR)
					snprintf(ch + strlen(ch), sizeof(ch) - strlen(ch), ":%s", owner);
				r = redisCommand(fc.sub, "SUBSCRIBE %s", ch);
				if (r)
					freeReplyObject(r);
				continue;	/* subscribe, then try again */
			}
			if (now_us() >= run->until_us + 5000000)
				break;
			floor_wait_message(&fc, pttl > 0 && pttl < 1000 ? pttl : 1000);
		}
		if (got != 1) {
			run->errors++;
			break;
		}
		note_grant(run, token);
		note_release(run, token);
		if (floor_release(&fc, run->kind, name, owner) < 0) {
			run->errors++;
			break;
		}
		__atomic_add_fetch(&run->cycles, 1, __ATOMIC_RELAXED);
	}
	redisFree(fc.cmd);
	if (fc.sub)
		redisFree(fc.sub);
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

struct outcome {
	double per_s;
	double p50_ms, p99_ms, max_ms;	/* hand-off latency (HOT) */
	int errors;
	long long cycles;
};

static struct outcome run_once(enum kind k, enum mode m, bool floor, int clients, const char *tag)
{
	static int serial;
	struct run run = { .kind = k, .mode = m, .floor = floor, .clients = clients };
	pthread_t *t = calloc((size_t)clients, sizeof(*t));
	struct client_arg *args = calloc((size_t)clients, sizeof(*args));
	struct outcome o = { 0 };
	int64_t t0;

	snprintf(run.name, sizeof(run.name), "bench-%s-%d-%d", tag, getpid(), serial++);
	if (m == HOT) {
		run.grants = calloc(MAX_TOKENS, sizeof(*run.grants));
		run.releases = calloc(MAX_TOKENS, sizeof(*run.releases));
	}
	t0 = now_us();
	run.until_us = t0 + (int64_t)(seconds * 1e6);
	for (int i = 0; i < clients; i++) {
		args[i] = (struct client_arg){ &run, i };
		pthread_create(&t[i], NULL, floor ? floor_client : http_client, &args[i]);
	}
	for (int i = 0; i < clients; i++)
		pthread_join(t[i], NULL);
	o.per_s = (double)run.cycles / ((double)(now_us() - t0) / 1e6);
	o.errors = run.errors;
	o.cycles = run.cycles;
	if (m == HOT) {
		int64_t *lat = calloc(MAX_TOKENS, sizeof(int64_t));
		size_t n = 0, ng = run.ngrants < MAX_TOKENS ? run.ngrants : MAX_TOKENS;
		size_t nr = run.nreleases < MAX_TOKENS ? run.nreleases : MAX_TOKENS;

		/* a release is noted just before its DELETE is sent, a grant
		 * when its answer arrives; the next grant in token order is
		 * the hand-off's */
		qsort(run.grants, ng, sizeof(*run.grants), cmp_stamp);
		qsort(run.releases, nr, sizeof(*run.releases), cmp_stamp);
		for (size_t i = 0; i + 1 < ng; i++) {
			struct stamp *rel = bsearch(&run.grants[i], run.releases, nr,
						    sizeof(*run.releases), cmp_stamp);

			if (rel && run.grants[i + 1].at_us >= rel->at_us)
				lat[n++] = run.grants[i + 1].at_us - rel->at_us;
		}
		qsort(lat, n, sizeof(*lat), cmp_i64);
		if (n) {
			o.p50_ms = (double)lat[n / 2] / 1000.0;
			o.p99_ms = (double)lat[n * 99 / 100] / 1000.0;
			o.max_ms = (double)lat[n - 1] / 1000.0;
		}
		free(lat);
		free(run.grants);
		free(run.releases);
	}
	free(t);
	free(args);
	return o;
}

/* ----- Many waiters: one epoll loop holds every connection ----- */

struct waiter_conn {
	int fd;
	int state;		/* 0 waiting for the grant, 1 for the release, 2 done */
	char name[96];
	int owner;
	char buf[1024];
	size_t len;
};

/* A complete response in w->buf? Returns its status, 0 if not yet. */
static int response_ready(struct waiter_conn *w)
{
	char *end = strstr(w->buf, "\r\n\r\n"), *cl;
	size_t need;

	if (!end)
		return 0;
	cl = strcasestr(w->buf, "Content-Length:");
	need = (size_t)(end - w->buf) + 4 + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	if (w->len < need)
		return 0;
	return atoi(w->buf + 9);
}

static void send_req(int fd, const char *method, const char *path)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Length: 0\r\n\r\n", method, path);

	if (write(fd, req, (size_t)n) != n)
		fprintf(stderr, "bench: short write\n");
}

/* Connect w (number i) to dlockd and have ep watch it; -1 (counted by
 * the caller) when the connection failed. */
static int connect_one(struct waiter_conn *w, int ep, int i)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

	w->fd = tcp_connect(http_port);
	if (w->fd < 0) {
		fprintf(stderr, "bench: connect %d failed: %s\n", i, strerror(errno));
		w->state = 2;
		return -1;
	}
	fcntl(w->fd, F_SETFL, O_NONBLOCK);
	epoll_ctl(ep, EPOLL_CTL_ADD, w->fd, &ev);
	return 0;
}

/* Poll /metrics every 50 ms until the gauge series (e.g. "dlockd_waiters")
 * is at least want, at most 60 s; returns how long that took (us). */
static int64_t wait_gauge(struct conn *ctl, const char *series, long long want)
{
	int64_t t0 = now_us();
	char pat[64];

	snprintf(pat, sizeof(pat), "\n%s ", series);
	for (;;) {
		const char *body, *p;
		long long got = -1;

		if (http_req(ctl, "GET", "/metrics", &body) == 200 && (p = strstr(body, pat)))
			got = strtoll(p + strlen(pat), NULL, 10);
		if (got >= want || now_us() - t0 > 60000000) {
			if (got < want)
				fprintf(stderr, "bench: %s only %lld of %lld\n", series, got, want);
			return now_us() - t0;
		}
		sleep_ms(50);
	}
}

/* Read what came on w: its response's status once whole, 0 while not, -1
 * when the connection ended (then ep no longer watches it). */
static int read_some(struct waiter_conn *w, int ep)
{
	ssize_t got = read(w->fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len);

	if (got <= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, w->fd, NULL);
		return -1;
	}
	w->len += (size_t)got;
	w->buf[w->len] = '\0';
	return response_ready(w);
}

/* Close the n connections of w and free it, with ep, ctl and rc. */
static void close_all(struct waiter_conn *w, int n, int ep, struct conn *ctl, redisContext *rc)
{
	for (int i = 0; i < n; i++)
		if (w[i].fd >= 0)
			close(w[i].fd);
	close(ep);
	close(ctl->fd);
	redisFree(rc);
	free(w);
}

/* From one INFO commandstats: calls of every command but INFO (those run
 * inside scripts included: Redis 7 counts them) and of EVALSHA alone. */
static void redis_calls(redisContext *c, long long *total, long long *evalsha)
{
	redisReply *r = redisCommand(c, "INFO commandstats");
	const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : "";

	*total = *evalsha = 0;
	while ((p = strstr(p, "cmdstat_"))) {
		const char *calls = strstr(p, "calls=");
		long long n = calls ? strtoll(calls + 6, NULL, 10) : 0;

		if (strncmp(p, "cmdstat_info:", 13))
			*total += n;
		if (!strncmp(p, "cmdstat_evalsha:", 16))
			*evalsha = n;
		p = calls ? calls : p + 8;
	}
	if (r)
		freeReplyObject(r);
}

/* How long an idle fair queue is watched: three refresh periods at the
 * default --queue-ttl-ms of 5 s. */
#define FAIR_IDLE_MS 5000

/* n waiters on `locks` locks (1, or one each) of kind ("locks" or
 * "fairlocks"); returns nothing, records rows. A fair queue is first left
 * idle for FAIR_IDLE_MS, to see what keeping its places costs. */
static void many_waiters(int n, int locks, const char *kind, const char *label)
{
	struct waiter_conn *w = calloc((size_t)n, sizeof(*w));
	int ep = epoll_create1(0), done = 0, granted = 0, errors = 0;
	redisContext *rc = redis_connect();
	struct conn ctl;
	long rss0, rss;
	int thr0, thr;
	long long calls0, calls1, eval0, eval1, idle_calls = 0, idle_eval = 0;
	double idle_s = 0;
	int64_t t0, t_all_waiting;
	char path[256], scenario[96];

	conn_open(&ctl, http_port);
	proc_usage(dlockd_pid, &rss0, &thr0);
	/* holders */
	for (int l = 0; l < locks; l++) {
		snprintf(path, sizeof(path), "/%s/mw-%s-%d-%d?owner=holder&ttl_ms=600000", kind,
			 label, getpid(), l);
		if (http_req(&ctl, "PUT", path, NULL) != 200) {
			fprintf(stderr, "bench: holder of %s not granted: %s\n", path, ctl.buf);
			errors++;
		}
	}
	for (int i = 0; i < n; i++) {
		w[i].owner = i;
		snprintf(w[i].name, sizeof(w[i].name), "mw-%s-%d-%d", label, getpid(), i % locks);
		if (connect_one(&w[i], ep, i) < 0) {
			errors++;
			done++;
			continue;
		}
		snprintf(path, sizeof(path), "/%s/%s?owner=w%d&ttl_ms=30000&wait_ms=240000", kind,
			 w[i].name, i);
		send_req(w[i].fd, "PUT", path);
	}
	/* until every request waits */
	t_all_waiting = wait_gauge(&ctl, "dlockd_waiters", n - errors);
	sleep_ms(500);
	proc_usage(dlockd_pid, &rss, &thr);
	if (!strcmp(kind, "fairlocks")) {
		/* nobody releases: only keeping the queue places costs */
		redis_calls(rc, &calls0, &eval0);
		t0 = now_us();
		sleep_ms(FAIR_IDLE_MS);
		redis_calls(rc, &calls1, &eval1);
		idle_s = (double)(now_us() - t0) / 1e6;
		idle_calls = calls1 - calls0;
		idle_eval = eval1 - eval0;
	}
	redis_calls(rc, &calls0, &eval0);

	/* release the holders; each waiter releases as soon as it is served */
	t0 = now_us();
	for (int l = 0; l < locks; l++) {
		snprintf(path, sizeof(path), "/%s/mw-%s-%d-%d?owner=holder", kind, label, getpid(),
			 l);
		if (http_req(&ctl, "DELETE", path, NULL) != 200)
			errors++;
	}
	while (done < n && now_us() - t0 < 120000000) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 1000);

		for (int e = 0; e < k; e++) {
			struct waiter_conn *c = &w[evs[e].data.u32];
			int status = read_some(c, ep);

			if (status < 0) {
				errors++;
				c->state = 2;
				done++;
				continue;
			}
			if (!status)
				continue;
			c->len = 0;
			if (c->state == 0) {
				if (status == 200)
					granted++;
				else
					errors++;
				snprintf(path, sizeof(path), "/%s/%s?owner=w%d", kind, c->name,
					 c->owner);
				send_req(c->fd, "DELETE", path);
				c->state = 1;
			} else if (c->state == 1) {
				c->state = 2;
				done++;
			}
		}
	}
	redis_calls(rc, &calls1, &eval1);
	snprintf(scenario, sizeof(scenario), "%d %swaiters on %s", n,
		 strcmp(kind, "fairlocks") ? "" : "fair ", locks == 1 ? "1 lock" : "1 lock each");
	result(scenario, "dlockd RSS idle", (double)rss0 / 1024.0, -1, "MiB");
	result(scenario, "dlockd RSS waiting", (double)rss / 1024.0, -1, "MiB");
	result(scenario, "threads idle", thr0, -1, "");
	result(scenario, "threads waiting", thr, -1, "");
	result(scenario, "time to all waiting", (double)t_all_waiting / 1e6, -1, "s");
	result(scenario, "time to drain", (double)(now_us() - t0) / 1e6, -1, "s");
	if (idle_s > 0) {
		result(scenario, "EVALSHA/s idle", (double)idle_eval / idle_s, -1, "/s");
		result(scenario, "cmds/s idle incl. inside scripts", (double)idle_calls / idle_s, -1,
		       "/s");
	}
	result(scenario, "served exactly once", granted, n, "waiters");
	result(scenario, "errors", errors, 0, "");
	/* each hand-off: the holder's release script, the next waiter's
	 * acquire script (whose own release is the next hand-off's) */
	result(scenario, "EVALSHA sent per hand-off", (double)(eval1 - eval0) / (granted ? granted : 1),
	       -1, "");
	result(scenario, "cmds incl. inside scripts", (double)(calls1 - calls0) / (granted ? granted : 1),
	       -1, "");
	close_all(w, n, ep, &ctl, rc);
}

static int cmp_double(const void *a, const void *b);

/* n watches (GET ?index=T&wait_ms) of one held lock; once all wait, the
 * holder releases: how long from the release to each answer. */
static void many_watchers(int n)
{
	struct waiter_conn *w = calloc((size_t)n, sizeof(*w));
	double *lat = calloc((size_t)n, sizeof(*lat));
	int ep = epoll_create1(0), done = 0, answered = 0, errors = 0;
	redisContext *rc = redis_connect();
	struct conn ctl;
	const char *body;
	long rss0, rss;
	int thr0, thr;
	long long token = 0, calls0, calls1, eval0, eval1;
	int64_t t0, t_all_watching;
	char name[96], path[256], scenario[96];

	conn_open(&ctl, http_port);
	proc_usage(dlockd_pid, &rss0, &thr0);
	snprintf(name, sizeof(name), "mwatch-%d", getpid());
	snprintf(path, sizeof(path), "/locks/%s?owner=leader&ttl_ms=600000", name);
	if (http_req(&ctl, "PUT", path, &body) == 200)
		token = json_field(body, "fencing_token");
	else
		errors++;
	snprintf(path, sizeof(path), "/locks/%s?index=%lld&wait_ms=240000", name, token);
	for (int i = 0; i < n; i++) {
		if (connect_one(&w[i], ep, i) < 0) {
			errors++;
			done++;
			continue;
		}
		send_req(w[i].fd, "GET", path);
	}
	t_all_watching = wait_gauge(&ctl, "dlockd_watches", n - errors);
	sleep_ms(500);
	proc_usage(dlockd_pid, &rss, &thr);
	redis_calls(rc, &calls0, &eval0);

	snprintf(path, sizeof(path), "/locks/%s?owner=leader", name);
	t0 = now_us();
	if (http_req(&ctl, "DELETE", path, NULL) != 200)
		errors++;
	while (done < n && now_us() - t0 < 60000000) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 1000);
		int64_t t = now_us();

		for (int e = 0; e < k; e++) {
			struct waiter_conn *c = &w[evs[e].data.u32];
			int status = read_some(c, ep);

			if (!status)
				continue;
			if (status == 200 && strstr(c->buf, "\"changed\":true"))
				lat[answered++] = (double)(t - t0) / 1000.0;
			else
				errors++;
			c->state = 2;
			done++;
			if (status > 0)
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
		}
	}
	redis_calls(rc, &calls1, &eval1);
	qsort(lat, (size_t)answered, sizeof(double), cmp_double);
	snprintf(scenario, sizeof(scenario), "%d watchers on 1 lock", n);
	result(scenario, "dlockd RSS idle", (double)rss0 / 1024.0, -1, "MiB");
	result(scenario, "dlockd RSS watching", (double)rss / 1024.0, -1, "MiB");
	result(scenario, "threads idle", thr0, -1, "");
	result(scenario, "threads watching", thr, -1, "");
	result(scenario, "time to all watching", (double)t_all_watching / 1e6, -1, "s");
	result(scenario, "release to answer p50", answered ? lat[answered / 2] : -1, -1, "ms");
	result(scenario, "release to answer p99", answered ? lat[answered * 99 / 100] : -1, -1, "ms");
	result(scenario, "release to last answer", answered ? lat[answered - 1] : -1, -1, "ms");
	result(scenario, "answered", answered, n, "watchers");
	result(scenario, "errors", errors, 0, "");
	/* the release, then one status read per watcher (each read by its own
	 * script: the reads are not shared) */
	result(scenario, "EVALSHA per watcher", (double)(eval1 - eval0) / (answered ? answered : 1),
	       -1, "");
	free(lat);
	close_all(w, n, ep, &ctl, rc);
}

/* ----- Set-up, the scenarios, the report ----- */

static void stop_all(void)
{
	if (dlockd_pid > 0) {
		kill(dlockd_pid, SIGTERM);
		waitpid(dlockd_pid, NULL, 0);
		dlockd_pid = 0;
	}
	for (int i = 0; i < ntopo; i++)
		if (topo_pids[i] > 0) {
			kill(topo_pids[i], SIGTERM);
			waitpid(topo_pids[i], NULL, 0);
			topo_pids[i] = 0;
		}
	ntopo = 0;
	if (redis_tls_pid > 0) {
		kill(redis_tls_pid, SIGTERM);
		waitpid(redis_tls_pid, NULL, 0);
		redis_tls_pid = 0;
	}
	if (replica_pid > 0) {
		kill(replica_pid, SIGTERM);
		waitpid(replica_pid, NULL, 0);
		replica_pid = 0;
	}
	if (redis_pid > 0) {
		kill(redis_pid, SIGTERM);
		waitpid(redis_pid, NULL, 0);
		redis_pid = 0;
	}
}

static void on_signal(int sig)
{
	stop_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void start_dlockd(const char *bin);
static void start_dlockd_sync(const char *bin, const char *replicas);
static void start_dlockd_url(const char *bin, const char *redis_url, const char *replicas);

static void start_all(const char *bin)
{
	char rport[16], listen[64], url[96], log[200];
	const char *rargv[] = { "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save", "",
			  "--appendonly", "no", "--dir", dir, NULL };
	const char *dargv[] = { bin, "--listen", listen, "--redis", url, "--log-level", "warn",
			  NULL };

	redis_port = free_port();
	http_port = free_port();
	snprintf(rport, sizeof(rport), "%d", redis_port);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", http_port);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", redis_port);
	snprintf(log, sizeof(log), "%s/redis.log", dir);
	redis_pid = spawn(rargv, log);
	if (!wait_port(redis_port)) {
		fprintf(stderr, "bench: redis-server did not start (%s)\n", log);
		exit(2);
	}
	(void)dargv;
	start_dlockd(bin);
}

/* A fresh dlockd on a new port (the waiter scenarios each get their own,
 * so one's freed-but-kept heap does not count as the next one's baseline). */
static void start_dlockd(const char *bin)
{
	start_dlockd_sync(bin, NULL);
}

/* The same with --redis-sync-replicas replicas (NULL: off). */
static void start_dlockd_sync(const char *bin, const char *replicas)
{
	start_dlockd_url(bin, NULL, replicas);
}

/* The same on --redis url (NULL: the bench's standalone Redis). */
static void start_dlockd_url(const char *bin, const char *redis_url, const char *replicas)
{
	char listen[64], url[300], log[200];
	char cert[300], key[300];
	const char *dargv[16] = { bin, "--listen", listen, "--redis", url, "--log-level", "warn" };
	int argc = 7;

	if (dlockd_pid > 0) {
		kill(dlockd_pid, SIGTERM);
		waitpid(dlockd_pid, NULL, 0);
	}
	http_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", http_port);
	if (redis_url)
		snprintf(url, sizeof(url), "%s", redis_url);
	else
		snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", redis_port);
	snprintf(log, sizeof(log), "%s/dlockd.log", dir);
	snprintf(cert, sizeof(cert), "%s/tls.pem", dir);
	snprintf(key, sizeof(key), "%s/tls.key", dir);
	if (replicas) {
		dargv[argc++] = "--redis-sync-replicas";
		dargv[argc++] = replicas;
	}
	if (redis_ca) {	/* TLS to Redis (redis_tls_cost) */
		dargv[argc++] = "--redis-ca";
		dargv[argc++] = redis_ca;
	}
	if (use_tls) {	/* an HTTPS dlockd (tls_cost) */
		dargv[argc++] = "--tls-cert";
		dargv[argc++] = cert;
		dargv[argc++] = "--tls-key";
		dargv[argc++] = key;
	}
	dlockd_pid = spawn(dargv, log);
	if (!wait_port(http_port)) {
		fprintf(stderr, "bench: dlockd did not start (%s)\n", log);
		stop_all();
		exit(2);
	}
	sleep_ms(300);
	/* a sentinel or cluster URL is resolved after the port opens */
	for (int i = 0; i < 200; i++) {
		struct conn c;
		int st = -1;

		if (conn_open(&c, http_port) == 0) {
			st = http_req(&c, "GET", "/readyz", NULL);
			conn_close(&c);
		}
		if (st == 200)
			break;
		sleep_ms(50);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Uncontended throughput is measured in ROUNDS alternating runs of dlockd
 * and of the floor, and the medians are compared: a neighbour's burst on
 * the shared machine then costs one round, not the figure. */
#define ROUNDS 3

static void versus(const char *scenario, enum kind k, enum mode m, int clients)
{
	double hs[ROUNDS], fs[ROUNDS];
	int rounds = m == HOT ? 1 : ROUNDS, herr = 0, ferr = 0;
	struct outcome h = { 0 }, f = { 0 };

	if (!wanted(scenario))
		return;
	for (int i = 0; i < rounds; i++) {
		h = run_once(k, m, false, clients, "h");
		f = run_once(k, m, true, clients, "f");
		hs[i] = h.per_s;
		fs[i] = f.per_s;
		herr += h.errors;
		ferr += f.errors;
		if (rounds > 1)
			fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1,
				h.per_s, f.per_s, h.per_s / f.per_s);
	}
	qsort(hs, (size_t)rounds, sizeof(double), cmp_double);
	qsort(fs, (size_t)rounds, sizeof(double), cmp_double);
	result(scenario, m == HOT ? "hand-offs/s" : "cycles/s", hs[rounds / 2], fs[rounds / 2],
	       "/s");
	if (m == HOT) {
		result(scenario, "hand-off p50", h.p50_ms, f.p50_ms, "ms");
		result(scenario, "hand-off p99", h.p99_ms, f.p99_ms, "ms");
		result(scenario, "hand-off max", h.max_ms, f.max_ms, "ms");
	}
	if (herr || ferr)
		result(scenario, "errors", herr, ferr, "");
}

/* Start a replica of the bench's redis and wait until the master lists
 * it online (ROLE); false if it does not come. */
static bool start_replica(void)
{
	char rport[16], master[16], log[200], rdir[200];
	const char *argv[] = { "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save", "",
			       "--appendonly", "no", "--dir", rdir, "--replicaof", "127.0.0.1",
			       master, NULL };
	redisContext *c = redisConnect("127.0.0.1", redis_port);
	bool online = false;

	snprintf(rport, sizeof(rport), "%d", free_port());
	snprintf(master, sizeof(master), "%d", redis_port);
	snprintf(rdir, sizeof(rdir), "%s/replica", dir);
	snprintf(log, sizeof(log), "%s/replica.log", dir);
	mkdir(rdir, 0755);
	replica_pid = spawn(argv, log);
	for (int i = 0; c && !c->err && i < 200 && !online; i++) {
		redisReply *r = redisCommand(c, "ROLE");

		online = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
			 r->element[2]->type == REDIS_REPLY_ARRAY && r->element[2]->elements > 0;
		if (r)
			freeReplyObject(r);
		if (!online)
			sleep_ms(50);
	}
	if (c)
		redisFree(c);
	return online;
}

/* The cost of --redis-sync-replicas 1 (a WAIT after every change) on a
 * master with one replica: uncontended cycles with it ("dlockd") against
 * the same run without it (the "floor" column), in alternating rounds. */
static void sync_cost(const char *bin, int clients)
{
	double with[ROUNDS], without[ROUNDS];
	char scenario[96];

	snprintf(scenario, sizeof(scenario), "sync replicas 1 vs off, lock, %d clients", clients);
	if (!wanted(scenario))
		return;
	for (int i = 0; i < ROUNDS; i++) {
		start_dlockd_sync(bin, NULL);
		without[i] = run_once(K_LOCK, UNCONTENDED, false, clients, "s0").per_s;
		start_dlockd_sync(bin, "1");
		with[i] = run_once(K_LOCK, UNCONTENDED, false, clients, "s1").per_s;
		fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1, with[i],
			without[i], with[i] / without[i]);
	}
	qsort(with, ROUNDS, sizeof(double), cmp_double);
	qsort(without, ROUNDS, sizeof(double), cmp_double);
	result(scenario, "cycles/s (floor: off)", with[ROUNDS / 2], without[ROUNDS / 2], "/s");
	start_dlockd_sync(bin, NULL);
}

/* dir/tls.pem and dir/tls.key: a self-signed EC P-256 certificate for
 * 127.0.0.1 (made once), which clients trust as its own CA. */
static bool tls_cert_made(void)
{
	static int made;	/* 0 not yet, 1 made, -1 failed */
	char cmd[1024];

	if (!made) {
		snprintf(cmd, sizeof(cmd), "openssl req -x509 -newkey ec -pkeyopt "
			 "ec_paramgen_curve:P-256 -nodes -keyout %s/tls.key -out %s/tls.pem -days 2 "
			 "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null", dir,
			 dir);
		made = system(cmd) == 0 ? 1 : -1;
	}
	return made > 0;
}

/* The cost of TLS to Redis: uncontended cycles against a dlockd on
 * rediss:// ("dlockd") and the same run against one on redis:// (the
 * "floor" column) to the same redis-server, which serves both --port and
 * --tls-port, in alternating rounds, a fresh dlockd each. Redis' TLS
 * (OpenSSL) answers both; dlockd's side of TLS is its tunnel pump. */
static void redis_tls_cost(const char *bin, int clients)
{
	double with[ROUNDS], without[ROUNDS];
	char scenario[96], ca[300], key[300], rport[16], tport[16], log[200], rdir[200];
	char plain[96], tls[96];
	const char *argv[] = { "redis-server", "--port", rport, "--tls-port", tport,
			       "--tls-cert-file", ca, "--tls-key-file", key, "--tls-ca-cert-file",
			       ca, "--tls-auth-clients", "no", "--bind", "127.0.0.1", "--save", "",
			       "--appendonly", "no", "--dir", rdir, NULL };
	int port, tls_port;

	snprintf(scenario, sizeof(scenario), "redis tls vs plain, lock, %d clients", clients);
	if (!wanted(scenario))
		return;
	if (!tls_cert_made()) {
		fprintf(stderr, "bench: openssl could not make a certificate; redis tls skipped\n");
		return;
	}
	snprintf(ca, sizeof(ca), "%s/tls.pem", dir);
	snprintf(key, sizeof(key), "%s/tls.key", dir);
	port = free_port();
	tls_port = free_port();
	snprintf(rport, sizeof(rport), "%d", port);
	snprintf(tport, sizeof(tport), "%d", tls_port);
	snprintf(rdir, sizeof(rdir), "%s/redis-tls", dir);
	snprintf(log, sizeof(log), "%s/redis-tls.log", dir);
	mkdir(rdir, 0755);
	redis_tls_pid = spawn(argv, log);
	if (!wait_port(port) || !wait_port(tls_port)) {
		fprintf(stderr, "bench: redis-server with TLS did not start (%s)\n", log);
		goto out;
	}
	snprintf(plain, sizeof(plain), "redis://127.0.0.1:%d/0", port);
	snprintf(tls, sizeof(tls), "rediss://127.0.0.1:%d/0", tls_port);
	for (int i = 0; i < ROUNDS; i++) {
		start_dlockd_url(bin, plain, NULL);
		without[i] = run_once(K_LOCK, UNCONTENDED, false, clients, "r0").per_s;
		redis_ca = ca;
		start_dlockd_url(bin, tls, NULL);
		redis_ca = NULL;
		with[i] = run_once(K_LOCK, UNCONTENDED, false, clients, "r1").per_s;
		fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1, with[i],
			without[i], with[i] / without[i]);
	}
	qsort(with, ROUNDS, sizeof(double), cmp_double);
	qsort(without, ROUNDS, sizeof(double), cmp_double);
	result(scenario, "cycles/s (floor: redis://)", with[ROUNDS / 2], without[ROUNDS / 2],
	       "/s");
out:
	start_dlockd(bin);
	kill(redis_tls_pid, SIGTERM);
	waitpid(redis_tls_pid, NULL, 0);
	redis_tls_pid = 0;
}

/* The cost of HTTPS: uncontended cycles on keep-alive connections against
 * a dlockd serving HTTPS ("dlockd") and the same run against a plaintext
 * one (the "floor" column), in alternating rounds, a fresh dlockd each.
 * The certificate is a self-signed EC P-256 one made with openssl, which
 * the client checks; TLS 1.3 as GnuTLS negotiates it by default. */
static void tls_cost(const char *bin, int clients)
{
	double with[ROUNDS], without[ROUNDS];
	char scenario[96], cmd[1024];

	snprintf(scenario, sizeof(scenario), "https vs http, lock, %d clients", clients);
	if (!wanted(scenario))
		return;
	if (!tls_trust) {
		if (!tls_cert_made()) {
			fprintf(stderr, "bench: openssl could not make a certificate; https skipped\n");
			return;
		}
		snprintf(cmd, sizeof(cmd), "%s/tls.pem", dir);
		gnutls_certificate_allocate_credentials(&tls_trust);
		if (gnutls_certificate_set_x509_trust_file(tls_trust, cmd, GNUTLS_X509_FMT_PEM) != 1) {
			fprintf(stderr, "bench: cannot trust %s; https skipped\n", cmd);
			return;
		}
	}
	for (int i = 0; i < ROUNDS; i++) {
		use_tls = false;
		start_dlockd(bin);
		without[i] = run_once(K_LOCK, UNCONTENDED, false, clients, "t0").per_s;
		use_tls = true;
		start_dlockd(bin);
		with[i] = run_once(K_LOCK, UNCONTENDED, false, clients, "t1").per_s;
		fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1, with[i],
			without[i], with[i] / without[i]);
	}
	use_tls = false;
	qsort(with, ROUNDS, sizeof(double), cmp_double);
	qsort(without, ROUNDS, sizeof(double), cmp_double);
	result(scenario, "cycles/s (floor: http)", with[ROUNDS / 2], without[ROUNDS / 2], "/s");
	start_dlockd(bin);
}

/* ----- Sentinel and Cluster topologies against the standalone Redis -----
 *
 * A bench-local copy of what tests/harness (cluster.c, sentinel.c) does:
 * the bench does not link the test harness (libcurl, the test runner). */

/* A redis-server on a free loopback port (cluster: its bus port, +10000,
 * free too) in a directory of its own, with extra arguments; its pid is
 * kept for stop_all. Returns the port, or -1. */
static int topo_redis(const char *what, const char *const extra[])
{
	char rport[16], rdir[200], log[200];
	const char *argv[32] = { "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save",
				 "", "--appendonly", "no", "--dir", rdir };
	int n = 11, port = -1;

	for (int i = 0; i < 1000 && port < 0; i++) {
		int p = free_port(), fd;
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(p + 10000)) };

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (p <= 55535 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			port = p;
		close(fd);
	}
	for (int i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(rport, sizeof(rport), "%d", port);
	snprintf(rdir, sizeof(rdir), "%s/%s-%d", dir, what, port);
	snprintf(log, sizeof(log), "%s/%s-%d.log", dir, what, port);
	mkdir(rdir, 0755);
	if (port < 0 || ntopo >= (int)(sizeof(topo_pids) / sizeof(topo_pids[0])))
		return -1;
	topo_pids[ntopo++] = spawn(argv, log);
	return wait_port(port) ? port : -1;
}

/* The reply of a command on 127.0.0.1:port, on a connection of its own
 * (free it), or NULL. */
static redisReply *cmd_at(int port, const char *fmt, ...)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	redisReply *r = NULL;
	va_list ap;

	if (c && !c->err) {
		va_start(ap, fmt);
		r = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (c)
		redisFree(c);
	return r;
}

/* Wait (at most 30 s) until the answer of cmd arg ("INFO replication",
 * "CLUSTER INFO") at port contains needle. */
static bool wait_info(int port, const char *cmd, const char *arg, const char *needle)
{
	for (int i = 0; i < 600; i++) {
		redisReply *r = cmd_at(port, "%s %s", cmd, arg);
		bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, needle);

		if (r)
			freeReplyObject(r);
		if (ok)
			return true;
		sleep_ms(50);
	}
	fprintf(stderr, "bench: %d never said %s\n", port, needle);
	return false;
}

/* A topology dlockd is pointed at: its --redis URL and its data masters
 * (where commands are counted). */
struct target {
	const char *label;
	char url[300];
	int masters[3];
	int nmasters;
	int redis_pids_from, redis_pids_to;	/* its data nodes in topo_pids */
};

/* 1 master + 1 replica + 1 sentinel (quorum 1). */
static bool sentinel_topology(struct target *t)
{
	char mport[16];
	const char *rep[] = { "--replicaof", "127.0.0.1", mport, NULL };
	const char *sen[] = { "--sentinel", NULL };
	char conf[300];
	int m, r, s;
	FILE *f;

	memset(t, 0, sizeof(*t));
	t->label = "sentinel";
	t->redis_pids_from = ntopo;
	if ((m = topo_redis("sent-master", NULL)) < 0)
		return false;
	snprintf(mport, sizeof(mport), "%d", m);
	if ((r = topo_redis("sent-replica", rep)) < 0 ||
	    !wait_info(r, "INFO", "replication", "master_link_status:up"))
		return false;
	t->redis_pids_to = ntopo;
	/* a sentinel reads and rewrites its own config file */
	snprintf(conf, sizeof(conf), "%s/sentinel-%d.conf", dir, m);
	f = fopen(conf, "w");
	if (!f)
		return false;
	fprintf(f, "sentinel monitor m 127.0.0.1 %d 1\n"
		   "sentinel down-after-milliseconds m 5000\n", m);
	fclose(f);
	{
		/* redis-server CONF --sentinel --port P ... */
		char sport[16], sdir[200], log[200];
		const char *argv[] = { "redis-server", conf, "--sentinel", "--port", sport, "--bind",
				       "127.0.0.1", "--dir", sdir, NULL };

		s = free_port();
		snprintf(sport, sizeof(sport), "%d", s);
		snprintf(sdir, sizeof(sdir), "%s/sentinel-%d", dir, s);
		snprintf(log, sizeof(log), "%s/sentinel-%d.log", dir, s);
		mkdir(sdir, 0755);
		topo_pids[ntopo++] = spawn(argv, log);
		if (!wait_port(s))
			return false;
		(void)sen;
	}
	for (int i = 0; i < 600; i++) {
		redisReply *q = cmd_at(s, "SENTINEL REPLICAS m");
		bool ok = q && q->type == REDIS_REPLY_ARRAY && q->elements == 1;

		if (q)
			freeReplyObject(q);
		if (ok)
			break;
		sleep_ms(50);
	}
	snprintf(t->url, sizeof(t->url), "redis-sentinel://127.0.0.1:%d/0#m", s);
	t->masters[0] = m;
	t->nmasters = 1;
	return true;
}

/* 3 masters, no replicas, joined by redis-cli --cluster create. */
static bool cluster_topology(struct target *t)
{
	const char *ext[] = { "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			      "--cluster-node-timeout", "2000", NULL };
	char cmd[600];
	int len;

	memset(t, 0, sizeof(*t));
	t->label = "cluster";
	t->redis_pids_from = ntopo;
	for (int i = 0; i < 3; i++)
		if ((t->masters[i] = topo_redis("cluster", ext)) < 0)
			return false;
	t->nmasters = 3;
	t->redis_pids_to = ntopo;
	len = snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
	for (int i = 0; i < 3; i++)
		len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " 127.0.0.1:%d", t->masters[i]);
	snprintf(cmd + len, sizeof(cmd) - (size_t)len,
		 " --cluster-replicas 0 --cluster-yes > %s/cluster-create.log 2>&1", dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "bench: %s failed (%s/cluster-create.log)\n", cmd, dir);
		return false;
	}
	for (int i = 0; i < 3; i++)
		if (!wait_info(t->masters[i], "CLUSTER", "INFO", "cluster_state:ok"))
			return false;
	snprintf(t->url, sizeof(t->url), "redis://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
		 t->masters[0], t->masters[1], t->masters[2]);
	return true;
}

/* CPU time (user + system) of pid so far, in microseconds. */
static double proc_cpu_us(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	/* after "(comm)": state is field 3, utime 14, stime 15 */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* Commands (INFO commandstats, inside scripts included, INFO excluded)
 * and CPU time of the target's data nodes; t NULL: the standalone Redis. */
static void target_usage(const struct target *t, long long *cmds, long long *evalsha,
			 double *cpu_us)
{
	long long total, eval;

	*cmds = *evalsha = 0;
	*cpu_us = 0;
	if (!t) {
		redisContext *c = redis_connect();

		redis_calls(c, &total, &eval);
		redisFree(c);
		*cmds = total;
		*evalsha = eval;
		*cpu_us = proc_cpu_us(redis_pid);
		return;
	}
	for (int i = 0; i < t->nmasters; i++) {
		redisContext *c = redisConnect("127.0.0.1", t->masters[i]);

		if (c && !c->err) {
			redis_calls(c, &total, &eval);
			*cmds += total;
			*evalsha += eval;
		}
		if (c)
			redisFree(c);
	}
	for (int i = t->redis_pids_from; i < t->redis_pids_to; i++)
		*cpu_us += proc_cpu_us(topo_pids[i]);
}

/* One run of the plain lock on dlockd over t (NULL: standalone) with
 * --redis-sync-replicas sync (NULL: off), on a fresh dlockd. */
struct measured {
	struct outcome o;
	double cmds_per_cycle;		/* Redis commands, summed over the masters */
	double evalsha_per_cycle;	/* of which EVALSHA (the rest: inside scripts) */
	double dlockd_us, redis_us;	/* CPU per cycle */
};

static const char *bench_bin;

static struct measured measure(const struct target *t, const char *sync, enum mode m,
			       int clients)
{
	struct measured r = { 0 };
	long long c0, c1, e0, e1;
	double r0, r1, d0, d1, cycles;

	start_dlockd_url(bench_bin, t ? t->url : NULL, sync);
	target_usage(t, &c0, &e0, &r0);
	d0 = proc_cpu_us(dlockd_pid);
	r.o = run_once(K_LOCK, m, false, clients, t ? t->label : "standalone");
	target_usage(t, &c1, &e1, &r1);
	d1 = proc_cpu_us(dlockd_pid);
	cycles = (double)r.o.cycles;
	if (cycles < 1)
		cycles = 1;
	r.cmds_per_cycle = (double)(c1 - c0) / cycles;
	r.evalsha_per_cycle = (double)(e1 - e0) / cycles;
	r.dlockd_us = (d1 - d0) / cycles;
	r.redis_us = (r1 - r0) / cycles;
	return r;
}

static int cmp_measured(const void *a, const void *b)
{
	double x = ((const struct measured *)a)->o.per_s, y = ((const struct measured *)b)->o.per_s;

	return x < y ? -1 : x > y;
}

/* a against b (NULL: standalone), with their sync settings, at clients:
 * ROUNDS alternating rounds, the medians in the "dlockd" (a) and "floor"
 * (b) columns. */
static void topo_versus(const char *scenario, const struct target *a, const char *sync_a,
			const struct target *b, const char *sync_b, enum mode m, int clients)
{
	struct measured ma[ROUNDS], mb[ROUNDS];
	int rounds = m == HOT ? 1 : ROUNDS;

	for (int i = 0; i < rounds; i++) {
		mb[i] = measure(b, sync_b, m, clients);
		ma[i] = measure(a, sync_a, m, clients);
		if (rounds > 1)
			fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1,
				ma[i].o.per_s, mb[i].o.per_s, ma[i].o.per_s / mb[i].o.per_s);
	}
	qsort(ma, (size_t)rounds, sizeof(*ma), cmp_measured);
	qsort(mb, (size_t)rounds, sizeof(*mb), cmp_measured);
	ma[0] = ma[rounds / 2];
	mb[0] = mb[rounds / 2];
	result(scenario, m == HOT ? "hand-offs/s" : "cycles/s", ma[0].o.per_s, mb[0].o.per_s, "/s");
	if (m == HOT) {
		result(scenario, "hand-off p50", ma[0].o.p50_ms, mb[0].o.p50_ms, "ms");
		result(scenario, "hand-off p99", ma[0].o.p99_ms, mb[0].o.p99_ms, "ms");
	}
	/* per cycle = per hand-off on the hot lock: each cycle's release
	 * hands it to the next */
	result(scenario, m == HOT ? "EVALSHA per hand-off" : "EVALSHA per cycle",
	       ma[0].evalsha_per_cycle, mb[0].evalsha_per_cycle, "");
	result(scenario, m == HOT ? "cmds per hand-off incl. scripts'" : "cmds per cycle incl. scripts'",
	       ma[0].cmds_per_cycle, mb[0].cmds_per_cycle, "");
	result(scenario, m == HOT ? "dlockd CPU per hand-off" : "dlockd CPU per cycle",
	       ma[0].dlockd_us, mb[0].dlockd_us, "us");
	result(scenario, m == HOT ? "Redis CPU per hand-off" : "Redis CPU per cycle",
	       ma[0].redis_us, mb[0].redis_us, "us");
	if (ma[0].o.errors || mb[0].o.errors)
		result(scenario, "errors", ma[0].o.errors, mb[0].o.errors, "");
}

/* The topology t against the standalone Redis: uncontended at 1 and 16
 * clients, the hot lock at 64 (rows "<label> vs standalone, ..."). */
static void topology_runs(const struct target *t)
{
	static const int conc[] = { 1, 16 };
	char s[96];

	for (size_t c = 0; c < 2; c++) {
		snprintf(s, sizeof(s), "%s vs standalone, lock, %d clients", t->label, conc[c]);
		topo_versus(s, t, NULL, NULL, NULL, UNCONTENDED, conc[c]);
	}
	snprintf(s, sizeof(s), "%s vs standalone, hot lock, 64 clients", t->label);
	topo_versus(s, t, NULL, NULL, NULL, HOT, 64);
}

/* Stop the topology's processes (started last), keeping the standalone
 * Redis and its replica. */
static void topology_stop(void)
{
	if (dlockd_pid > 0) {
		kill(dlockd_pid, SIGTERM);
		waitpid(dlockd_pid, NULL, 0);
		dlockd_pid = 0;
	}
	for (int i = 0; i < ntopo; i++) {
		kill(topo_pids[i], SIGTERM);
		waitpid(topo_pids[i], NULL, 0);
		topo_pids[i] = 0;
	}
	ntopo = 0;
}

static void sentinel_bench(void)
{
	struct target t;

	if (!sentinel_topology(&t)) {
		fprintf(stderr, "bench: the sentinel topology did not start; skipped\n");
		topology_stop();
		return;
	}
	topology_runs(&t);
	for (int c = 1; c <= 16; c += 15) {
		char s[96];

		snprintf(s, sizeof(s), "sentinel, sync replicas 1 vs off, lock, %d clients", c);
		topo_versus(s, &t, "1", &t, NULL, UNCONTENDED, c);
	}
	topology_stop();
}

static void cluster_bench(void)
{
	struct target t;

	if (!cluster_topology(&t)) {
		fprintf(stderr, "bench: the cluster did not start; skipped\n");
		topology_stop();
		return;
	}
	topology_runs(&t);
	topology_stop();
}

static void report(void)
{
	char path[256], host[64] = "";
	FILE *j;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	gethostname(host, sizeof(host));
	printf("\n| scenario | figure | dlockd | Redis floor | ratio |\n|---|---|---:|---:|---:|\n");
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		if (r->floor > 0)
			printf("| %s | %s | %.2f %s | %.2f %s | %.2f |\n", r->scenario, r->metric,
			       r->dlockd, r->unit, r->floor, r->unit, r->dlockd / r->floor);
		else
			printf("| %s | %s | %.2f %s | | |\n", r->scenario, r->metric, r->dlockd, r->unit);
	}
	printf("\n%ld cores, %.1f s per run\n", cores, seconds);
	if (only) {
		fprintf(stderr, "--only: bench/results/latest.json left as it was\n");
		return;
	}
	mkdir("bench/results", 0755);
	snprintf(path, sizeof(path), "bench/results/latest.json");
	j = fopen(path, "w");
	if (!j)
		return;
	fprintf(j, "{\n  \"machine\": {\"cores\": %ld},\n  \"seconds_per_run\": %.1f,\n  \"results\": [\n",
		cores, seconds);
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		fprintf(j, "    {\"scenario\": \"%s\", \"figure\": \"%s\", \"dlockd\": %.4f, "
			"\"floor\": %s%.4f, \"ratio\": %.4f, \"unit\": \"%s\"}%s\n", r->scenario,
			r->metric, r->dlockd, "", r->floor > 0 ? r->floor : 0,
			r->floor > 0 ? r->dlockd / r->floor : 0, r->unit, i + 1 < nrows ? "," : "");
	}
	fprintf(j, "  ]\n}\n");
	fclose(j);
	fprintf(stderr, "wrote %s\n", path);
}

int main(int argc, char **argv)
{
	const char *bin = "build/dlockd";
	struct rlimit rl;
	bool quick = false;
	long rss;
	int thr;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else
			bin = argv[i];
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(dir, sizeof(dir), "/tmp/dlockd-bench.XXXXXX");
	if (!mkdtemp(dir))
		return 2;
	start_all(bin);
	atexit(stop_all);

	proc_usage(dlockd_pid, &rss, &thr);
	result("idle", "RSS", (double)rss / 1024.0, -1, "MiB");
	result("idle", "threads", thr, -1, "");

	static const int conc[] = { 1, 16, 64 };
	for (size_t c = 0; c < 3; c++) {
		char s[64];

		snprintf(s, sizeof(s), "uncontended lock, %d clients", conc[c]);
		versus(s, K_LOCK, UNCONTENDED, conc[c]);
	}
	versus("hot lock, 64 clients", K_LOCK, HOT, 64);
	versus("uncontended fairlock, 16 clients", K_FAIR, UNCONTENDED, 16);
	versus("hot fairlock, 64 clients", K_FAIR, HOT, 64);
	versus("uncontended rwlock write, 16 clients", K_WRITE, UNCONTENDED, 16);
	versus("hot rwlock write, 64 clients", K_WRITE, HOT, 64);
	versus("uncontended rwlock read, 16 clients", K_READ, UNCONTENDED, 16);
	if (wanted("waiters")) {
		start_dlockd(bin);
		many_waiters(quick ? 1000 : 10000, 1, "locks", "one");
		start_dlockd(bin);
		many_waiters(quick ? 1000 : 10000, quick ? 1000 : 10000, "locks", "each");
	}
	if (wanted("fair waiters")) {
		start_dlockd(bin);
		many_waiters(1000, 1, "fairlocks", "fair1k");
		if (!quick) {
			start_dlockd(bin);
			many_waiters(10000, 1, "fairlocks", "fair10k");
		}
	}
	if (wanted("watchers")) {
		start_dlockd(bin);
		many_watchers(quick ? 1000 : 5000);
	}
	tls_cost(bin, 1);
	tls_cost(bin, 16);
	redis_tls_cost(bin, 1);
	redis_tls_cost(bin, 16);
	/* before "sync replicas", which gives the standalone Redis a replica */
	bench_bin = bin;
	if (wanted("sentinel"))
		sentinel_bench();
	if (wanted("cluster"))
		cluster_bench();
	if (wanted("sync replicas")) {
		if (start_replica()) {
			sync_cost(bin, 1);
			sync_cost(bin, 16);
		} else {
			fprintf(stderr, "bench: the replica did not come online; sync skipped\n");
		}
	}
	report();
	return 0;
}
