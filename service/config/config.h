/* config.h -- dlockd's settings, from flags and DLOCKD_* environment. */
#ifndef DLOCKD_CONFIG_H
#define DLOCKD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* --redis-pubsub */
enum pubsub_mode { PUBSUB_AUTO, PUBSUB_SHARDED, PUBSUB_CLASSIC };

/* --health-check: serve (off), or probe a running dlockd instead */
enum health_check_mode {
	HEALTH_CHECK_OFF,
	HEALTH_CHECK_LIVE,	/* GET /healthz */
	HEALTH_CHECK_READY,	/* GET /readyz */
};

struct config {
	char *listen;			/* "host:port", as given */
	struct sockaddr_storage listen_addr;
	socklen_t listen_addr_len;
	char *redis_url;
	char *auth_file;		/* NULL: no auth */
	char *tls_cert, *tls_key;	/* NULL: plain HTTP; both or neither */
	char *tls_client_ca;		/* NULL: no client certificates (needs tls_cert) */
	char *redis_ca;			/* TLS to Redis: NULL: the system's trust store */
	char *redis_cert, *redis_key;	/* TLS to Redis: client certificate; NULL none */
	char *key_prefix;		/* put before every lock name in Redis; "" none */
	unsigned threads;		/* event loops, each with one pipelined Redis connection */
	int64_t default_ttl_ms;
	int64_t max_ttl_ms;
	int64_t max_wait_ms;
	int64_t queue_ttl_ms;		/* an unrefreshed queue place lives this long */
	int64_t read_holds_per_owner;	/* live read holds of one owner on a lock, at most */
	int64_t read_holds_per_lock;	/* ... of all readers of a lock, at most */
	int64_t fair_queue_max;		/* live places in a fair lock's queue, at most */
	int64_t session_holdings_max;	/* holdings one session may have, at most */
	int64_t sessions_per_token_max;	/* sessions one token name may have open */
	size_t max_body_bytes;
	unsigned max_connections;
	unsigned max_connections_per_client;	/* 0: half of max_connections */
	unsigned idle_timeout_s;	/* idle keep-alive connections are closed after this */
	int log_level;			/* enum log_level */
	int log_format;			/* enum log_format */
	bool log_heartbeats;		/* heartbeats' access lines at info, not debug */
	int sync_replicas;		/* replicas a lock change waits for: 0 off,
					 * REPLICA_SYNC_AUTO, or 1..64 */
	int64_t sync_timeout_ms;	/* WAIT's timeout */
	int pubsub;			/* enum pubsub_mode */
	int health_check;		/* enum health_check_mode */
};

/* Fill cfg from the environment, then argv (flags win). Returns 0 on
 * success, 1 when --help or --version was printed, -1 after printing an
 * error; cfg->health_check is set on every return once argv asks for a
 * health check, so that the caller can exit as a probe must. The caller
 * releases cfg with config_release(). */
int config_load(struct config *cfg, int argc, char **argv);
/* The most connections one client may have (--max-connections-per-client,
 * 0 there meaning half of --max-connections), never more than all. */
unsigned config_per_client_connections(const struct config *cfg);
void config_release(struct config *cfg);

/* Parse "host:port" or "[v6]:port" into addr; 0 on success, -1 if malformed. */
int config_parse_listen(const char *s, struct sockaddr_storage *addr, socklen_t *len);

/* The CPUs a cgroup v2 "cpu.max" line ("<quota> <period>" in µs, or
 * "max <period>") allows, rounded up; 0 when it sets no limit or is not
 * such a line. */
unsigned config_cpu_quota(const char *cpu_max);

/* Parse a whole decimal integer in [min, max]; 0 on success, -1 otherwise. */
int config_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
