/* config.c -- settings from DLOCKD_* environment variables and flags.
 * Every setting has one row in the options table below: its flag, its
 * environment variable, its help text and where the value goes. */
#include "service/config/config.h"

#include "service/base/log.h"
#include "service/redis/redis_url.h"
#include "service/redis/replica_sync.h"
#include "service/base/util.h"
#include "service/base/version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_type { OPT_STRING, OPT_INT, OPT_LEVEL, OPT_FORMAT };

struct option_row {
	const char *flag;
	const char *env;
	enum opt_type type;
	int64_t min, max;	/* OPT_INT: the accepted range */
	const char *metavar;
	const char *help;
	const char *deflt;
};

enum {
	O_LISTEN, O_REDIS, O_THREADS, O_DEFAULT_TTL, O_MAX_TTL, O_MAX_WAIT,
	O_QUEUE_TTL, O_READ_HOLDS_OWNER, O_READ_HOLDS_LOCK, O_FAIR_QUEUE, O_MAX_BODY, O_MAX_CONN,
	O_MAX_CONN_CLIENT, O_IDLE_TIMEOUT, O_LOG_LEVEL,
	O_LOG_FORMAT, O_LOG_HEARTBEATS, O_AUTH_FILE, O_TLS_CERT, O_TLS_KEY, O_TLS_CLIENT_CA, O_REDIS_CA,
	O_REDIS_CERT, O_REDIS_KEY, O_KEY_PREFIX,
	O_SYNC_REPLICAS, O_SYNC_TIMEOUT, O_PUBSUB,
	O_SESSION_HOLDINGS, O_SESSIONS_PER_TOKEN,
	O_COUNT
};

/* The help texts are wrapped by usage(); row_details (below) says more,
 * in the man page and docs/reference/configuration.md only. */
static const struct option_row rows[O_COUNT] = {
	[O_LISTEN] = { "listen", "DLOCKD_LISTEN", OPT_STRING, 0, 0, "HOST:PORT",
		"address to serve HTTP (HTTPS with --tls-cert) on: an IPv4 address, "
		"[IPv6] or localhost, and a port (0: any free one)", "127.0.0.1:8080" },
	[O_REDIS] = { "redis", "DLOCKD_REDIS_URL", OPT_STRING, 0, 0, "URL",
		"redis://[user:password@]host:port/db or unix:///path/to/socket; "
		"TLS: rediss://... (or ?tls=true), rediss-sentinel://...; "
		"a Redis Cluster: redis://[user:password@]HOSTS (some of its nodes, "
		"or one: a cluster is found from the node itself); "
		"or Sentinel: redis-sentinel://[[user:]password@]HOSTS[/db]#master, "
		"HOSTS the sentinels as host[:port],... (port 26379 by default; "
		"their own password as ?sentinel_password=P); each with "
		"?db=N&user=U&password=P; percent-encode '@' '/' ':' '?' "
		"'#' '%' '&' in them (%40 %2F ...)", "redis://127.0.0.1:6379/0" },
	[O_THREADS] = { "threads", "DLOCKD_THREADS", OPT_INT, 1, 256, "N",
		"event loop threads, each with its share of the HTTP connections "
		"and one pipelined Redis connection",
		"one per CPU dlockd may use (its affinity mask, capped by a cgroup v2 CPU "
		"quota), at most 64" },
	[O_DEFAULT_TTL] = { "default-ttl-ms", "DLOCKD_DEFAULT_TTL_MS", OPT_INT, 1, INT32_MAX,
		"MS", "lease when a request gives no ttl_ms; at most --max-ttl-ms", "30000" },
	[O_MAX_TTL] = { "max-ttl-ms", "DLOCKD_MAX_TTL_MS", OPT_INT, 1, INT32_MAX, "MS",
		"largest ttl_ms accepted; at least --default-ttl-ms", "86400000" },
	[O_MAX_WAIT] = { "max-wait-ms", "DLOCKD_MAX_WAIT_MS", OPT_INT, 0, INT32_MAX, "MS",
		"largest wait_ms accepted (0: no request waits)", "300000" },
	[O_QUEUE_TTL] = { "queue-ttl-ms", "DLOCKD_QUEUE_TTL_MS", OPT_INT, 300, 600000, "MS",
		"a waiter's place in a fair-lock queue (or as a waiting writer) lives "
		"this long unless its dlockd refreshes it (every third of it); a dead "
		"dlockd's waiters stop blocking others after it", "5000" },
	[O_READ_HOLDS_OWNER] = { "max-read-holds-per-owner", "DLOCKD_MAX_READ_HOLDS_PER_OWNER",
		OPT_INT, 1, 100000, "N",
		"the most live read holds one owner may have on a read-write lock; "
		"a read PUT that would add one more (reentrant=true, or a new "
		"reader) gets 409 too_many_holds. Every call on the lock costs "
		"Redis a few microseconds per read hold it has", "64" },
	[O_READ_HOLDS_LOCK] = { "max-read-holds-per-lock", "DLOCKD_MAX_READ_HOLDS_PER_LOCK",
		OPT_INT, 1, 100000, "N",
		"the most live read holds a read-write lock may have, all readers' "
		"(Redisson clients' included, which dlockd cannot refuse); past it "
		"read PUTs that add one get 409 too_many_holds", "256" },
	[O_FAIR_QUEUE] = { "max-fair-queue", "DLOCKD_MAX_FAIR_QUEUE", OPT_INT, 1, 100000, "N",
		"the most live places a fair lock's queue may have (Redisson "
		"clients' included), and the most writers that may wait for a "
		"read-write lock; past it a PUT that would wait gets 409 queue_full",
		"1000" },
	[O_MAX_BODY] = { "max-body-bytes", "DLOCKD_MAX_BODY_BYTES", OPT_INT, 64, 16 << 20, "N",
		"larger request bodies get 413", "16384" },
	[O_MAX_CONN] = { "max-connections", "DLOCKD_MAX_CONNECTIONS", OPT_INT, 16, 1 << 20, "N",
		"open HTTP connections, waiting ones included, over all the threads; "
		"past it a new connection gets 503 overloaded", "20000" },
	[O_MAX_CONN_CLIENT] = { "max-connections-per-client", "DLOCKD_MAX_CONNECTIONS_PER_CLIENT",
		OPT_INT, 0, 1 << 20, "N",
		"open HTTP connections one client (an IPv4 address, an IPv6 /64) may "
		"have, waiting ones included; past it its new connection gets 503 "
		"overloaded (0: half of --max-connections)", "0" },
	[O_IDLE_TIMEOUT] = { "idle-timeout-s", "DLOCKD_IDLE_TIMEOUT_S", OPT_INT, 1, 86400, "S",
		"close a connection that has not sent a whole request this long "
		"after connecting or after its last answer, however slowly it "
		"trickles; a waiting request is not idle", "60" },
	[O_LOG_LEVEL] = { "log-level", "DLOCKD_LOG_LEVEL", OPT_LEVEL, 0, 0, "LEVEL",
		"error, warn, info or debug", "info" },
	[O_LOG_FORMAT] = { "log-format", "DLOCKD_LOG_FORMAT", OPT_FORMAT, 0, 0, "FORMAT",
		"json (one object per line) or text", "json" },
	[O_LOG_HEARTBEATS] = { "log-heartbeats", "DLOCKD_LOG_HEARTBEATS", OPT_STRING, 0, 0,
		"on|off", "log the access line of a successful heartbeat at info, "
		"not debug (every holder sends one every few seconds)", "off" },
	[O_AUTH_FILE] = { "auth-file", "DLOCKD_AUTH_FILE", OPT_STRING, 0, 0, "FILE",
		"bearer tokens, one '<token> <role> <prefix> <name>' per line (role "
		"client or admin, prefix * for every lock, name the token's, for "
		"the logs; a line without a name is refused); re-read on SIGHUP "
		"and when it changes", "none (no auth)" },
	[O_TLS_CERT] = { "tls-cert", "DLOCKD_TLS_CERT", OPT_STRING, 0, 0, "FILE",
		"serve HTTPS on --listen with this certificate (PEM, the server's "
		"first, then its chain); needs --tls-key. Re-read with the key on "
		"SIGHUP and when either file changes on disk; connections made "
		"before keep theirs", "none (plain HTTP)" },
	[O_TLS_KEY] = { "tls-key", "DLOCKD_TLS_KEY", OPT_STRING, 0, 0, "FILE",
		"the private key of --tls-cert (PEM, not encrypted)", "none" },
	[O_TLS_CLIENT_CA] = { "tls-client-ca", "DLOCKD_TLS_CLIENT_CA", OPT_STRING, 0, 0, "FILE",
		"mutual TLS: every client must present a certificate signed by a "
		"CA in FILE (PEM), or its handshake fails; re-read like --tls-cert",
		"none (no client certificates)" },
	[O_REDIS_CA] = { "redis-ca", "DLOCKD_REDIS_CA", OPT_STRING, 0, 0, "FILE",
		"TLS to Redis (rediss://): trust only the CAs in FILE (PEM) for "
		"Redis' certificate, whose name must match the host in --redis "
		"(an IP address: one of its IP addresses)", "the system's trust store" },
	[O_REDIS_CERT] = { "redis-cert", "DLOCKD_REDIS_CERT", OPT_STRING, 0, 0, "FILE",
		"TLS to Redis: the client certificate dlockd presents (PEM), for a "
		"Redis with tls-auth-clients; needs --redis-key", "none" },
	[O_REDIS_KEY] = { "redis-key", "DLOCKD_REDIS_KEY", OPT_STRING, 0, 0, "FILE",
		"the private key of --redis-cert (PEM, not encrypted)", "none" },
	[O_KEY_PREFIX] = { "key-prefix", "DLOCKD_KEY_PREFIX", OPT_STRING, 0, 0, "STR",
		"put STR before every lock name in Redis (lock N is key STRN, and "
		"its channels and other keys follow), as Redisson's NameMapper does; "
		"1-64 of A-Z a-z 0-9 . _ : -", "none" },
	[O_SYNC_REPLICAS] = { "redis-sync-replicas", "DLOCKD_REDIS_SYNC_REPLICAS", OPT_STRING,
		0, 0, "off|auto|N",
		"after lock changes, WAIT until N replicas (1-64; auto: all the master "
		"has connected, per ROLE) have them; a grant they do not confirm in "
		"time is taken back (unless a later call changed the holding) and "
		"answered 503 replication_unconfirmed", "off" },
	[O_SYNC_TIMEOUT] = { "redis-sync-timeout-ms", "DLOCKD_REDIS_SYNC_TIMEOUT_MS", OPT_INT,
		10, REPLICA_SYNC_TIMEOUT_MAX_MS, "MS",
		"how long WAIT waits for the replicas (it holds up the loop's redis "
		"connection meanwhile)", "1000" },
	[O_PUBSUB] = { "redis-pubsub", "DLOCKD_REDIS_PUBSUB", OPT_STRING, 0, 0,
		"auto|sharded|classic",
		"how release messages travel: sharded (SSUBSCRIBE/SPUBLISH, on a "
		"cluster to the node of each channel's slot) or classic "
		"(SUBSCRIBE/PUBLISH); auto: sharded on a Redis 7 cluster, as "
		"Redisson does, else classic. Both sides of a lock must use the "
		"same kind", "auto" },
	[O_SESSION_HOLDINGS] = { "max-session-holdings", "DLOCKD_MAX_SESSION_HOLDINGS", OPT_INT,
		1, 100000, "N",
		"the most holdings one session may have; past it an acquire with "
		"session= gets 409 session_full and takes nothing", "256" },
	[O_SESSIONS_PER_TOKEN] = { "max-sessions-per-token", "DLOCKD_MAX_SESSIONS_PER_TOKEN",
		OPT_INT, 1, 1000000, "N",
		"the most sessions one auth token name (all clients, with auth off) "
		"may have open; past it POST /sessions gets 409 too_many_sessions",
		"1000" },
};

/* --health-check is no row: it takes no variable and makes dlockd a probe */
static const char health_check_help[] =
	"do not serve: ask the dlockd these settings describe (its --listen, "
	"0.0.0.0 and [::] as loopback) GET /healthz, or /readyz with =ready, and "
	"exit 0 on 200 within 2 s, else 1 with a line on stderr; for a "
	"HEALTHCHECK or an exec probe";

#define HELP_INDENT 24
#define HELP_WIDTH 80

/* text after a HELP_INDENT-wide left column, wrapped at spaces so that no
 * line passes HELP_WIDTH; every continuation line is indented. A '\t'
 * is a space that does not break. */
static void wrap(FILE *out, const char *text)
{
	int col = HELP_INDENT;
	const char *p = text;

	while (*p) {
		size_t word = strcspn(p, " ");

		if (col > HELP_INDENT && col + 1 + (int)word > HELP_WIDTH) {
			fprintf(out, "\n%*s", HELP_INDENT, "");
			col = HELP_INDENT;
		} else if (col > HELP_INDENT) {
			fputc(' ', out);
			col++;
		}
		for (size_t k = 0; k < word; k++)
			fputc(p[k] == '\t' ? ' ' : p[k], out);
		col += (int)word;
		p += word;
		while (*p == ' ')
			p++;
	}
	fputc('\n', out);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dlockd [options]\n"
		"Distributed locks over HTTP/JSON, kept in Redis with Redisson's layout.\n\n"
		"Every option can also be set by the environment variable shown;\n"
		"a flag wins over its variable.\n\n");
	for (int i = 0; i < O_COUNT; i++) {
		const struct option_row *r = &rows[i];
		char left[64], text[1024];	/* the longest help (--redis) and more */
		int n;

		snprintf(left, sizeof(left), "--%s %s", r->flag, r->metavar);
		n = snprintf(text, sizeof(text), "%s. Default:\t%s.", r->help, r->deflt);
		if (r->type == OPT_INT)
			snprintf(text + n, sizeof(text) - (size_t)n, " Range:\t%lld..%lld.",
				 (long long)r->min, (long long)r->max);
		fprintf(out, "  %-*s", HELP_INDENT - 2, left);
		if (strlen(left) > HELP_INDENT - 3)
			fprintf(out, "\n%*s", HELP_INDENT, "");
		wrap(out, text);
		fprintf(out, "%*s[env %s]\n", HELP_INDENT, "", r->env);
	}
	fprintf(out, "  %s\n%*s", "--health-check[=ready]", HELP_INDENT, "");
	wrap(out, health_check_help);
	fprintf(out, "  %-*sprint this help and exit\n", HELP_INDENT - 2, "-h, --help");
	fprintf(out, "  %-*sprint the version and exit\n", HELP_INDENT - 2, "-V, --version");
}

/* ----- The reference and the man page, from the same rows ----- */

/* The hidden --help-format=man|markdown prints the table above as
 * dlockd.8 (the Makefile builds it) or as docs/reference/configuration.md
 * (committed; tests/check-reference.sh regenerates and compares it), so
 * --help, the man page and the reference cannot drift apart. */

static const char intro_text[] =
	"Distributed locks over HTTP/JSON, kept in Redis with Redisson's layout.";
static const char env_text[] =
	"Every option but --health-check can also be set by the environment "
	"variable shown; a flag wins over its variable. A value out of range, "
	"or settings that contradict each other, stop dlockd at start with exit "
	"status 2 and a line naming the flag or variable.";

/* What --help leaves out to stay short -- the forms of a value, examples,
 * what a setting costs, what is re-read and when, what it does not do --
 * printed after the help in the man page and the reference (the README's
 * settings table said it before). Indexed like rows[]; NULL: the help
 * says it all. Plain ASCII without backslashes: it goes into troff and
 * Markdown as it is. */
static const char *const row_details[O_COUNT] = {
	[O_LISTEN] =
		"The port is 0..65535; with 0 the start-up log line says which port "
		"was taken. An IPv6 address goes in brackets: [::1]:8080. localhost "
		"means 127.0.0.1; no other host name is taken.",
	[O_REDIS] =
		"One Redis: redis://[user:password@]host[:port][/db] (port 6379, db 0 "
		"by default), or a unix socket, e.g. "
		"unix:///run/redis.sock?db=1&password=s3cret. "
		"A Redis Cluster: some of its nodes, "
		"redis://[user:password@]host:port[,host:port...], e.g. "
		"redis://:s3cret@redis-0:6379,redis-1:6379,redis-2:6379 "
		"(see \"Redis Cluster\" in README.md). "
		"Redis Sentinel: redis-sentinel://[[user:]password@]host[:port]"
		"[,host[:port]...][/db]#master, the master named as the sentinels "
		"watch it, e.g. "
		"redis-sentinel://:s3cret@sentinel-0:26379,sentinel-1,sentinel-2/0#mymaster "
		"(a sentinel's port is 26379 by default); user and password are the "
		"data nodes', ?sentinel_password=P is the sentinels' own (see "
		"\"Redis Sentinel\" in README.md). "
		"Every form takes ?db=N&user=U&password=P. "
		"Over TLS: rediss://[user:password@]host:port[/db] (a cluster's seeds "
		"too), rediss-sentinel://...#master (the sentinels and the data "
		"nodes), or ?tls=true on redis:// and redis-sentinel:// (see \"TLS to "
		"Redis\" in README.md). "
		"The user, the password, the socket path, the master name and the "
		"parameter values are percent-decoded: write @ / : ? # % & in them as "
		"%40 %2F %3A %3F %23 %25 %26, e.g. redis://:p%40ss%2Fw%3Ard@host:6379/0 "
		"for the password p@ss/w:rd; a raw # only starts a Sentinel URL's "
		"master name. Anything else is refused at start with what is wrong. "
		"The logs show the URL without its passwords.",
	[O_THREADS] =
		"A cgroup v2 CPU quota is rounded up to whole CPUs: half a core gives "
		"1 thread. A loop never blocks on Redis: it pipelines the calls of "
		"all its connections on its one Redis connection.",
	[O_DEFAULT_TTL] =
		"Also the lease a heartbeat without ttl_ms renews to.",
	[O_QUEUE_TTL] =
		"The refresh costs one Redis script per lock and event loop every third "
		"of MS for up to 256 of that loop's fair-lock waiters (one more for "
		"each 256 more); a waiting writer renews its own place when it looks "
		"again. The head of a fair queue and every read-write waiter look "
		"again at least every third of MS.",
	[O_READ_HOLDS_OWNER] =
		"Every call on a read-write lock, a GET too, reads each of its read "
		"holds: about 1.5 microseconds of Redis per read hold and 4-6 per "
		"reader, which this cap and --max-read-holds-per-lock bound (see "
		"\"Read-write locks\" in README.md).",
	[O_READ_HOLDS_LOCK] =
		"Every call on the lock, a GET too, costs Redis about 1.5 "
		"microseconds per read hold and 4-6 per reader it has, which this cap "
		"and --max-read-holds-per-owner bound: at the defaults at most about "
		"1-2 ms a call (see \"Read-write locks\" in README.md).",
	[O_MAX_CONN] =
		"Over plain HTTP such a connection is answered 503 overloaded and "
		"closed; over HTTPS it is closed unanswered (a plain answer would be "
		"garbage to a TLS client). Either is logged and counted.",
	[O_MAX_CONN_CLIENT] =
		"So no one client (a script looping on waits, a leak of connections, a "
		"slowloris that reconnects) can take every connection and refuse "
		"everyone else, health checks included. Clients behind one proxy or "
		"NAT share its address: raise it (up to --max-connections) for them.",
	[O_IDLE_TIMEOUT] =
		"A byte does not restart the clock, so a client trickling its request "
		"a byte at a time (slowloris) is cut too (checked once a second). "
		"As a request waiting for a lock is not idle, this does not bound "
		"wait_ms.",
	[O_LOG_LEVEL] =
		"The least severe messages logged, to stderr: error logs errors only, "
		"warn adds warnings, info also one line per answered request, debug "
		"everything.",
	[O_LOG_FORMAT] =
		"Lines go to stderr; a text line is the time, the level and the "
		"message, for people.",
	[O_AUTH_FILE] =
		"A file that cannot be read, or a bad line, stops dlockd at start "
		"(exit status 2). A change on disk is seen through a symlink too. "
		"See \"Access control\" in README.md.",
	[O_TLS_CERT] =
		"A file that cannot be read at start stops dlockd (exit status 2). "
		"See \"HTTPS and mutual TLS\" in README.md.",
	[O_TLS_KEY] =
		"Needs --tls-cert: either without the other stops dlockd at start.",
	[O_TLS_CLIENT_CA] =
		"FILE holds one or more CA certificates. Needs --tls-cert (client "
		"certificates are asked for in the TLS handshake).",
	[O_REDIS_CA] =
		"FILE holds one or more CA certificates. Needs a TLS --redis "
		"(rediss://, rediss-sentinel:// or ?tls=true): with a plaintext one "
		"dlockd stops at start, never falling back to plaintext. Read at "
		"start only. See \"TLS to Redis\" in README.md.",
	[O_REDIS_CERT] =
		"For tls-auth-clients yes (or optional). It needs a TLS --redis too. "
		"Read at start only.",
	[O_REDIS_KEY] =
		"Needs --redis-cert and a TLS --redis. Read at start only.",
	[O_KEY_PREFIX] =
		"Every key and channel of lock N carries STRN where Redisson puts the "
		"name (redisson_lock__channel:{STRN}, redisson_lock_token:{STRN}, "
		"...); paths and answers still show N. Redisson clients sharing the "
		"locks must map names the same way (a NameMapper that adds the same "
		"prefix), or both sides use the prefixed name.",
	[O_SYNC_REPLICAS] =
		"After every grant, release, heartbeat and forced release dlockd "
		"sends WAIT on the same Redis connection and answers only once WAIT "
		"has. auto waits for as many replicas as ROLE lists connected (asked "
		"at most once a second); with none it sends no WAIT, unless the "
		"master had replicas on this connection and has had none for less "
		"than 10 s: then it waits for one. A grant (a repeat or re-entry too) "
		"the replicas do not confirm is taken back, unless a later call of "
		"the owner changed the holding meanwhile, and answered 503 "
		"replication_unconfirmed with undone saying which; an unconfirmed "
		"release, heartbeat or forced release stands and is answered as "
		"usual. Cost: each change waits one more round trip and the "
		"replicas' acknowledgement; off sends nothing and costs nothing. See "
		"\"Replica-acknowledged grants\" in README.md.",
	[O_SYNC_TIMEOUT] =
		"The calls queued behind a WAIT must still meet their deadline, 1.5 s "
		"after dlockd sent them (a call Redis gets to later does nothing and "
		"is answered 503), hence the cap.",
	[O_PUBSUB] =
		"The sharded kind waits with SSUBSCRIBE (on a cluster, on the master "
		"of each channel's slot) and releases with SPUBLISH, the classic kind "
		"with SUBSCRIBE and PUBLISH. auto is sharded on a cluster of Redis 7 or later, where "
		"PUBSUB SHARDNUMSUB answers (asked at start; a cluster none of whose "
		"nodes answers is taken as sharded), else classic. The start-up log "
		"line says which. Classic and sharded channels never see each other's "
		"messages: a dlockd set to another kind than its Redisson clients "
		"still grants correctly, but each side's waiters miss the other's "
		"releases and wait until the lease ends.",
};

/* --health-check's, as row_details */
static const char health_check_details[] =
	"--health-check=live is --health-check. The address asked is the "
	"--listen (or DLOCKD_LISTEN) of the dlockd these settings describe, "
	"0.0.0.0 asked on 127.0.0.1 and [::] on [::1], over a plain socket, with "
	"TLS when --tls-cert is set (see \"HTTPS and mutual TLS\" in README.md). "
	"Exit status 1 and one line on stderr for nothing listening, another "
	"status, no answer within 2 s or a bad setting (never 2, which Docker "
	"reserves). For the image's HEALTHCHECK and exec probes, where there is "
	"no curl or shell; it reads no auth file and never talks to Redis.";

/* s as troff text: a backslash is \e, a '\t' an unbreakable space, a
 * dash that starts a word (an option's) \-, every dash with all_dashes
 * (a flag's name), and a line never starts with a control character.
 * A comma inside a word (a URL's host list) may end a line there (\:),
 * or a long URL could not be broken. */
static void man_escape(FILE *out, const char *s, bool all_dashes)
{
	for (const char *p = s; *p; p++) {
		bool word_start = p == s || p[-1] == ' ' || p[-1] == '(' || p[-1] == '-' ||
				  p[-1] == '\t' || p[-1] == '[';

		if (p == s && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '\t')
			fputs("\\ ", out);
		else if (*p == '-' && (word_start || all_dashes))
			fputs("\\-", out);
		else if (*p == ',' && !all_dashes && p[1] && p[1] != ' ')
			fputs(",\\:", out);
		else
			fputc(*p, out);
	}
}

/* s in a Markdown table cell: '|' escaped, '\t' a space */
static void md_escape(FILE *out, const char *s)
{
	for (const char *p = s; *p; p++) {
		if (*p == '|')
			fputs("\\|", out);
		else
			fputc(*p == '\t' ? ' ' : *p, out);
	}
}

static void usage_man(FILE *out)
{
	fprintf(out, ".\\\" generated by dlockd --help-format=man from service/config/config.c\n"
		".TH DLOCKD 8 \"\" \"dlockd %s\" \"System Administration\"\n.nh\n.ad l\n"
		".SH NAME\ndlockd \\- distributed locks over HTTP/JSON, kept in Redis\n"
		".SH SYNOPSIS\n.B dlockd\n.RI [ options ]\n"
		".SH DESCRIPTION\n", dlockd_release);
	man_escape(out, intro_text, false);
	fputs("\n.PP\n", out);
	man_escape(out, env_text, false);
	fputs("\n.SH OPTIONS\n", out);
	for (int i = 0; i < O_COUNT; i++) {
		const struct option_row *r = &rows[i];

		fputs(".TP\n.BI \"", out);
		man_escape(out, "--", true);
		man_escape(out, r->flag, true);
		fputs(" \" \"", out);
		man_escape(out, r->metavar, false);
		fputs("\"\n", out);
		man_escape(out, r->help, false);
		fputs(".\n", out);
		if (row_details[i]) {
			man_escape(out, row_details[i], false);
			fputc('\n', out);
		}
		fputs(".br\nDefault: ", out);
		man_escape(out, r->deflt, false);
		fputc('.', out);
		if (r->type == OPT_INT)
			fprintf(out, " Range: %lld..%lld.", (long long)r->min, (long long)r->max);
		fputs("\n.br\nEnvironment:\n.BR ", out);
		man_escape(out, r->env, false);
		fputs(" .\n", out);
	}
	fputs(".TP\n.BR \\-\\-health\\-check [ =ready ]\n", out);
	man_escape(out, health_check_help, false);
	fputs(".\n", out);
	man_escape(out, health_check_details, false);
	fputs("\n.TP\n.BR \\-h \", \" \\-\\-help\nPrint the help and exit.\n"
	      ".TP\n.BR \\-V \", \" \\-\\-version\nPrint the version and exit.\n"
	      ".SH ENVIRONMENT\n", out);
	for (int i = 0; i < O_COUNT; i++) {
		fputs(".TP\n.B ", out);
		man_escape(out, rows[i].env, false);
		fputs("\nAs\n.BR ", out);
		man_escape(out, "--", true);
		man_escape(out, rows[i].flag, true);
		fputs(" .\n", out);
	}
	fputs(".SH SIGNALS\n"
	      "SIGTERM or SIGINT: stop accepting, answer every waiting request 503 and "
	      "exit 0. SIGHUP: read \\-\\-auth\\-file and the \\-\\-tls\\-* files again.\n"
	      ".SH EXIT STATUS\n"
	      "0 after SIGTERM or SIGINT, \\-\\-help or \\-\\-version; 2 for a bad setting; "
	      "1 when dlockd cannot start otherwise. With \\-\\-health\\-check: 0 healthy, "
	      "else 1.\n"
	      ".SH SEE ALSO\n.BR dlock (1);\n"
	      "the HTTP contract, share/dlockd/openapi.yaml where dlockd is installed, "
	      "also served as GET /openapi.yaml.\n", out);
}

static void usage_markdown(FILE *out)
{
	fputs("<!-- generated by `dlockd --help-format=markdown` from the options table of "
	      "service/config/config.c (`make docs`); do not edit -->\n"
	      "# dlockd configuration\n\n", out);
	fprintf(out, "%s\n\n%s `dlockd --help` prints this list, `man dlockd` shows it "
		"too.\n\n", intro_text, env_text);
	fputs("| flag | env | default | range | meaning |\n|---|---|---|---|---|\n", out);
	for (int i = 0; i < O_COUNT; i++) {
		const struct option_row *r = &rows[i];

		fprintf(out, "| `--%s ", r->flag);
		md_escape(out, r->metavar);
		fprintf(out, "` | `%s` | ", r->env);
		md_escape(out, r->deflt);
		fputs(" | ", out);
		if (r->type == OPT_INT)
			fprintf(out, "%lld..%lld", (long long)r->min, (long long)r->max);
		fputs(" | ", out);
		md_escape(out, r->help);
		if (row_details[i]) {
			fputs(". ", out);
			md_escape(out, row_details[i]);
		}
		fputs(" |\n", out);
	}
	fputs("| `--health-check[=ready]` | none | off (serve) | `live`, `ready` | ", out);
	md_escape(out, health_check_help);
	fputs(". ", out);
	md_escape(out, health_check_details);
	fputs(" |\n| `-h`, `--help` | | | | print the help and exit |\n"
	      "| `-V`, `--version` | | | | print the version and exit |\n", out);
}

int config_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s || !(*s == '-' || (*s >= '0' && *s <= '9')))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int config_parse_listen(const char *s, struct sockaddr_storage *addr, socklen_t *len)
{
	char host[64];
	const char *colon, *h = s;
	size_t hlen;
	int64_t port;

	memset(addr, 0, sizeof(*addr));
	if (*s == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -1;
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -1;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= sizeof(host) ||
	    config_parse_int(colon + 1, 0, 65535, &port) < 0)
		return -1;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");

	struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;

	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		*len = sizeof(*v4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*v6);
		return 0;
	}
	return -1;
}

/* A key prefix is made of the characters of lock names (no '{': it must
 * not change Redisson's hash-tag rule) and is short enough that the
 * longest name with it stays a modest key. */
#define KEY_PREFIX_MAX 64

static bool key_prefix_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > KEY_PREFIX_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

/* --redis-sync-replicas: off (0), auto (REPLICA_SYNC_AUTO) or 1..64;
 * -1 when it is none of them. */
static int parse_sync_replicas(const char *s, int *out)
{
	int64_t n;

	if (!strcmp(s, "off"))
		*out = 0;
	else if (!strcmp(s, "auto"))
		*out = REPLICA_SYNC_AUTO;
	else if (config_parse_int(s, 1, 64, &n) == 0)
		*out = (int)n;
	else
		return -1;
	return 0;
}

/* Store one option value; prints the error and returns -1 when it is bad. */
static int set_option(struct config *cfg, int i, const char *val, const char *from)
{
	const struct option_row *r = &rows[i];
	int64_t n = 0;

	if (r->type == OPT_INT && config_parse_int(val, r->min, r->max, &n) < 0) {
		fprintf(stderr, "dlockd: %s '%s' is not an integer in %lld..%lld\n",
			from, val, (long long)r->min, (long long)r->max);
		return -1;
	}
	switch (i) {
	case O_LISTEN:
		free(cfg->listen);
		cfg->listen = xstrdup(val);
		break;
	case O_REDIS:
		free(cfg->redis_url);
		cfg->redis_url = xstrdup(val);
		break;
	case O_AUTH_FILE:
		free(cfg->auth_file);
		cfg->auth_file = xstrdup(val);
		break;
	case O_TLS_CERT:
		free(cfg->tls_cert);
		cfg->tls_cert = xstrdup(val);
		break;
	case O_TLS_KEY:
		free(cfg->tls_key);
		cfg->tls_key = xstrdup(val);
		break;
	case O_TLS_CLIENT_CA:
		free(cfg->tls_client_ca);
		cfg->tls_client_ca = xstrdup(val);
		break;
	case O_REDIS_CA:
		free(cfg->redis_ca);
		cfg->redis_ca = xstrdup(val);
		break;
	case O_REDIS_CERT:
		free(cfg->redis_cert);
		cfg->redis_cert = xstrdup(val);
		break;
	case O_REDIS_KEY:
		free(cfg->redis_key);
		cfg->redis_key = xstrdup(val);
		break;
	case O_KEY_PREFIX:
		if (!key_prefix_ok(val)) {
			fprintf(stderr, "dlockd: %s '%s' must be 1 to %d of A-Z a-z 0-9 . _ : -\n",
				from, val, KEY_PREFIX_MAX);
			return -1;
		}
		free(cfg->key_prefix);
		cfg->key_prefix = xstrdup(val);
		break;
	case O_SYNC_REPLICAS:
		if (parse_sync_replicas(val, &cfg->sync_replicas) < 0) {
			fprintf(stderr, "dlockd: %s '%s' is not off, auto or a number in 1..64\n",
				from, val);
			return -1;
		}
		break;
	case O_PUBSUB:
		if (!strcmp(val, "auto"))
			cfg->pubsub = PUBSUB_AUTO;
		else if (!strcmp(val, "sharded"))
			cfg->pubsub = PUBSUB_SHARDED;
		else if (!strcmp(val, "classic"))
			cfg->pubsub = PUBSUB_CLASSIC;
		else {
			fprintf(stderr, "dlockd: %s '%s' is not auto, sharded or classic\n",
				from, val);
			return -1;
		}
		break;
	case O_SYNC_TIMEOUT: cfg->sync_timeout_ms = n; break;
	case O_THREADS: cfg->threads = (unsigned)n; break;
	case O_DEFAULT_TTL: cfg->default_ttl_ms = n; break;
	case O_MAX_TTL: cfg->max_ttl_ms = n; break;
	case O_MAX_WAIT: cfg->max_wait_ms = n; break;
	case O_QUEUE_TTL: cfg->queue_ttl_ms = n; break;
	case O_READ_HOLDS_OWNER: cfg->read_holds_per_owner = n; break;
	case O_READ_HOLDS_LOCK: cfg->read_holds_per_lock = n; break;
	case O_FAIR_QUEUE: cfg->fair_queue_max = n; break;
	case O_SESSION_HOLDINGS: cfg->session_holdings_max = n; break;
	case O_SESSIONS_PER_TOKEN: cfg->sessions_per_token_max = n; break;
	case O_MAX_BODY: cfg->max_body_bytes = (size_t)n; break;
	case O_MAX_CONN: cfg->max_connections = (unsigned)n; break;
	case O_MAX_CONN_CLIENT: cfg->max_connections_per_client = (unsigned)n; break;
	case O_IDLE_TIMEOUT: cfg->idle_timeout_s = (unsigned)n; break;
	case O_LOG_LEVEL:
		cfg->log_level = log_level_parse(val);
		if (cfg->log_level < 0) {
			fprintf(stderr, "dlockd: %s '%s' is not one of error, warn, info, debug\n",
				from, val);
			return -1;
		}
		break;
	case O_LOG_HEARTBEATS:
		if (strcmp(val, "on") && strcmp(val, "off")) {
			fprintf(stderr, "dlockd: %s '%s' is not on or off\n", from, val);
			return -1;
		}
		cfg->log_heartbeats = !strcmp(val, "on");
		break;
	case O_LOG_FORMAT:
		cfg->log_format = log_format_parse(val);
		if (cfg->log_format < 0) {
			fprintf(stderr, "dlockd: %s '%s' is not json or text\n", from, val);
			return -1;
		}
		break;
	}
	return 0;
}

static void empty_is_none(char **s)
{
	if (*s && !**s) {
		free(*s);
		*s = NULL;
	}
}

static int check_consistent(struct config *cfg)
{
	struct redis_url url;
	char why[256];
	bool tls;

	if (config_parse_listen(cfg->listen, &cfg->listen_addr, &cfg->listen_addr_len) < 0) {
		fprintf(stderr, "dlockd: listen address '%s' is not HOST:PORT or [V6]:PORT\n",
			cfg->listen);
		return -1;
	}
	if (redis_url_parse(cfg->redis_url, &url, why, sizeof(why)) < 0) {
		char *shown = redis_url_redacted(cfg->redis_url);

		fprintf(stderr, "dlockd: %s\n  in --redis '%s'\n", why, shown);
		free(shown);
		return -1;
	}
	/* an empty file name (--tls-key '') is none */
	empty_is_none(&cfg->tls_cert);
	empty_is_none(&cfg->tls_key);
	empty_is_none(&cfg->tls_client_ca);
	empty_is_none(&cfg->redis_ca);
	empty_is_none(&cfg->redis_cert);
	empty_is_none(&cfg->redis_key);
	tls = url.tls;
	redis_url_release(&url);
	if (!tls && (cfg->redis_ca || cfg->redis_cert || cfg->redis_key)) {
		/* never a silent plaintext connection where TLS was meant */
		fprintf(stderr, "dlockd: %s is for TLS to Redis, but --redis is not TLS: write "
			"rediss:// (or rediss-sentinel://, or add ?tls=true)\n",
			cfg->redis_ca ? "--redis-ca" : cfg->redis_cert ? "--redis-cert"
								: "--redis-key");
		return -1;
	}
	if (!cfg->redis_cert != !cfg->redis_key) {
		fprintf(stderr, "dlockd: --redis-cert and --redis-key go together: %s was given "
			"without %s\n", cfg->redis_cert ? "--redis-cert" : "--redis-key",
			cfg->redis_cert ? "--redis-key" : "--redis-cert");
		return -1;
	}
	if (!cfg->tls_cert != !cfg->tls_key) {
		fprintf(stderr, "dlockd: --tls-cert and --tls-key go together: %s was given "
			"without %s\n", cfg->tls_cert ? "--tls-cert" : "--tls-key",
			cfg->tls_cert ? "--tls-key" : "--tls-cert");
		return -1;
	}
	if (cfg->tls_client_ca && !cfg->tls_cert) {
		fprintf(stderr, "dlockd: --tls-client-ca needs --tls-cert and --tls-key (client "
			"certificates are asked for in the TLS handshake)\n");
		return -1;
	}
	if (cfg->default_ttl_ms > cfg->max_ttl_ms) {
		fprintf(stderr, "dlockd: --default-ttl-ms %lld is larger than --max-ttl-ms %lld\n",
			(long long)cfg->default_ttl_ms, (long long)cfg->max_ttl_ms);
		return -1;
	}
	return 0;
}

unsigned config_cpu_quota(const char *cpu_max)
{
	long long quota, period;

	if (!cpu_max || sscanf(cpu_max, "%lld %lld", &quota, &period) != 2 || quota <= 0 ||
	    period <= 0)
		return 0;
	return (unsigned)((quota + period - 1) / period);
}

/* The CPUs dlockd may run on: its affinity mask (taskset, a cpuset),
 * capped by the CPU quota of its cgroup v2 ("0::<path>" in
 * /proc/self/cgroup), so that a sidecar limited to half a core on a
 * 64-core node runs one loop, not 64. At least 1. */
static unsigned usable_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	char line[512], path[600], buf[64];
	cpu_set_t set;
	FILE *f, *m;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max",
			 strcmp(line + 3, "/") ? line + 3 : "");
		m = fopen(path, "r");
		if (m && fgets(buf, sizeof(buf), m)) {
			unsigned q = config_cpu_quota(buf);

			if (q && q < n)
				n = q;
		}
		if (m)
			fclose(m);
	}
	if (f)
		fclose(f);
	return n > 0 ? (unsigned)n : 1;
}

/* --health-check's value: none or "live" (/healthz), "ready" (/readyz). */
static int parse_health_check(const char *val)
{
	if (!val || !strcmp(val, "live"))
		return HEALTH_CHECK_LIVE;
	if (!strcmp(val, "ready"))
		return HEALTH_CHECK_READY;
	fprintf(stderr, "dlockd: --health-check='%s' is not live or ready\n", val);
	return -1;
}

int config_load(struct config *cfg, int argc, char **argv)
{
	struct option longopts[O_COUNT + 5];
	unsigned cpus = usable_cpus();
	int c;

	memset(cfg, 0, sizeof(*cfg));
	cfg->listen = xstrdup("127.0.0.1:8080");
	cfg->redis_url = xstrdup("redis://127.0.0.1:6379/0");
	/* A loop never blocks on Redis, so one per usable CPU keeps them busy. */
	cfg->threads = cpus > 64 ? 64 : cpus;
	cfg->default_ttl_ms = 30000;
	cfg->max_ttl_ms = 86400000;
	cfg->max_wait_ms = 300000;
	cfg->queue_ttl_ms = 5000;
	cfg->read_holds_per_owner = 64;
	cfg->read_holds_per_lock = 256;
	cfg->fair_queue_max = 1000;
	cfg->session_holdings_max = 256;
	cfg->sessions_per_token_max = 1000;
	cfg->max_body_bytes = 16384;
	cfg->max_connections = 20000;
	cfg->idle_timeout_s = 60;
	cfg->log_level = LOG_INFO;
	cfg->log_format = LOG_FORMAT_JSON;
	cfg->sync_timeout_ms = 1000;
	/* Known before the environment is read: a probe whose settings are
	 * bad must still exit 1 (Docker reserves 2), not 2 as dlockd does. */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strncmp(argv[i], "--health-check", 14) &&
		    (argv[i][14] == '\0' || argv[i][14] == '='))
			cfg->health_check = HEALTH_CHECK_LIVE;

	for (int i = 0; i < O_COUNT; i++) {
		const char *v = getenv(rows[i].env);

		if (v && *v && set_option(cfg, i, v, rows[i].env) < 0)
			return -1;
		longopts[i] = (struct option){ rows[i].flag, required_argument, NULL, 1000 + i };
	}
	longopts[O_COUNT] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[O_COUNT + 1] = (struct option){ "version", no_argument, NULL, 'V' };
	longopts[O_COUNT + 2] = (struct option){ "health-check", optional_argument, NULL, 'H' };
	longopts[O_COUNT + 3] = (struct option){ "help-format", required_argument, NULL, 'F' };
	longopts[O_COUNT + 4] = (struct option){ NULL, 0, NULL, 0 };

	optind = 1;
	while ((c = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == 'V') {
			printf("dlockd %s\n", dlockd_version);
			return 1;
		}
		if (c == 'F') {
			if (strcmp(optarg, "man") && strcmp(optarg, "markdown")) {
				fprintf(stderr, "dlockd: --help-format='%s' is not man or markdown\n",
					optarg);
				return -1;
			}
			(strcmp(optarg, "man") ? usage_markdown : usage_man)(stdout);
			return 1;
		}
		if (c == 'H') {
			int mode = parse_health_check(optarg);

			if (mode < 0)
				return -1;
			cfg->health_check = mode;
			continue;
		}
		if (c < 1000) {
			usage(stderr);
			return -1;
		}
		char from[64];

		snprintf(from, sizeof(from), "--%s", rows[c - 1000].flag);
		if (set_option(cfg, c - 1000, optarg, from) < 0)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "dlockd: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return check_consistent(cfg);
}

void config_release(struct config *cfg)
{
	free(cfg->listen);
	free(cfg->redis_url);
	free(cfg->auth_file);
	free(cfg->key_prefix);
	free(cfg->tls_cert);
	free(cfg->tls_key);
	free(cfg->tls_client_ca);
	free(cfg->redis_ca);
	free(cfg->redis_cert);
	free(cfg->redis_key);
	cfg->redis_ca = cfg->redis_cert = cfg->redis_key = NULL;
	cfg->listen = cfg->redis_url = cfg->auth_file = cfg->key_prefix = NULL;
	cfg->tls_cert = cfg->tls_key = cfg->tls_client_ca = NULL;
}

unsigned config_per_client_connections(const struct config *cfg)
{
	unsigned n = cfg->max_connections_per_client;

	if (!n)
		n = cfg->max_connections / 2;
	return n < cfg->max_connections ? n : cfg->max_connections;
}
