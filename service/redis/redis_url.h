/* redis_url.h -- the --redis setting: parsing a Redis URL, and showing one
 * in logs without its password. */
#ifndef DLOCKD_REDIS_URL_H
#define DLOCKD_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

struct redis_target;

/* A host and port: of a sentinel, or a cluster seed. */
struct redis_host {
	char *host;
	int port;
};

struct redis_url {
	char *host;		/* NULL for a unix socket or sentinels */
	int port;
	char *unix_path;	/* NULL for TCP */
	char *user;		/* NULL unless given */
	char *password;		/* NULL unless given */
	int db;
	/* rediss://, rediss-sentinel:// or ?tls=true: every connection (to
	 * the data nodes, the sentinels, the cluster's nodes) is TLS
	 * (redis_tls.h) */
	bool tls;
	/* redis-sentinel:// only (nsentinels > 0): the sentinels to ask, in
	 * order, the master's name, and the sentinels' own password (NULL
	 * unless given); user and password above are the data nodes'. */
	struct redis_host *sentinels;
	unsigned nsentinels;
	char *master;
	char *sentinel_password;
	/* redis:// only: every host given (host and port above are the
	 * first); more than one names the seeds of a Redis Cluster. */
	struct redis_host *seeds;
	unsigned nseeds;
	/* Not the parser's: the Redis is a cluster (main.c decides: several
	 * seeds, or the node says so); its connections route by slot. */
	bool cluster;
	/* Not the parser's: where the connections find the current master,
	 * set by whoever starts the resolver (redis_target.h); NULL for a
	 * fixed address. */
	struct redis_target *target;
};

/* Parse
 *   redis[s]://[[user]:password@]host[:port][,host[:port]...][/db][?param=value&...]
 *   unix:///path/to/socket[?param=value&...]
 *   redis[s]-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]
 *       [?param=value&...]#master
 * where rediss and rediss-sentinel (or tls=true on the others but
 * unix://) mean TLS to every node (tls=false with them is refused), the
 * params are db, user, password and tls, on every scheme, and
 * sentinel_password on redis-sentinel:// (whose ports default to 26379;
 * its '#' starts the master's name, also percent-decoded; '#' is refused
 * anywhere else). The user,
 * the password, the socket path and every param value are percent-decoded
 * (RFC 3986): write '@', '/', ':', '?', '#', '%' and '&' in them as %40,
 * %2F, %3A, %3F, %23, %25 and %26. '+' is a plus, not a space.
 * Returns 0 and fills u (release it with redis_url_release), or -1 and
 * writes into why (why_len bytes, may be NULL/0) what is wrong, starting
 * "redis url: ...", without ever quoting the password. */
int redis_url_parse(const char *s, struct redis_url *u, char *why, size_t why_len);
void redis_url_release(struct redis_url *u);

/* s with its user:password@ shown as ***@ and any password= or
 * sentinel_password= value as ***,
 * for log lines and error messages; works on malformed URLs too (when in
 * doubt it hides more). The caller frees it. */
char *redis_url_redacted(const char *s);

#endif
