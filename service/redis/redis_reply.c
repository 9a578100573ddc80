/* redis_reply.c -- which error replies of Redis mean "cannot serve now"
 * (redis_reply.h), with the words a 503 gives for each; among them the
 * replies dlockd makes up itself when a call never reached Redis
 * (DLOCKD_UNSENT, DLOCKD_SETUP, DLOCKD_NOMASTER, DLOCKD_FAILOVER:
 * redis_node.c, redis_cluster.c) or ran too late (DLOCKD_LATE:
 * lua/lib/common.lua). */
#include "service/redis/redis_reply.h"

#include "service/base/util.h"

#include <string.h>

static const char why_noperm[] =
	"redis refused the command: no permission (NOPERM); dlockd's redis user needs "
	"FCALL, FUNCTION LOAD (or else EVAL, EVALSHA, SCRIPT), TIME, PING, SUBSCRIBE, "
	"the commands and keys of the "
	"lock scripts, and their channels (allchannels or &*)";

static const struct {
	const char *code;	/* the error's first word */
	const char *why;
} unavailable[] = {
	{ "BUSY", "redis is busy running a script (SCRIPT KILL or FUNCTION KILL stops it); "
		  "retry shortly" },
	{ "LOADING", "redis is loading its data into memory; retry shortly" },
	{ "MASTERDOWN", "redis is a replica that lost its master; retry shortly" },
	{ "READONLY", "redis is a read-only replica; point dlockd's --redis at the master" },
	{ "OOM", "redis is out of memory (maxmemory reached); retry later" },
	{ "NOPERM", why_noperm },
	{ "NOAUTH", "redis refused the command: authentication required (NOAUTH); give the "
		    "password in --redis" },
	{ "WRONGPASS", "redis refused dlockd's user or password (WRONGPASS)" },
	{ "TRYAGAIN", "redis cluster is moving the lock's slot (TRYAGAIN); retry shortly" },
	{ "CLUSTERDOWN", "redis cluster is down (CLUSTERDOWN); retry shortly" },
	{ "MOVED", "redis sent the lock's slot elsewhere (MOVED) more often than dlockd "
		   "follows, or is a cluster node --redis did not say is one; retry shortly" },
	{ "ASK", "redis sent the lock's slot elsewhere (ASK) more often than dlockd "
		 "follows, or is a cluster node --redis did not say is one; retry shortly" },
	{ "MISCONF", "redis refuses writes: it cannot save to disk (MISCONF); retry later" },
	{ "NOREPLICAS", "redis refuses writes: not enough replicas (NOREPLICAS); retry later" },
	{ "NOSCRIPT", "redis lost the lock script (NOSCRIPT); retry shortly" },
	{ "DLOCKD_LATE", "redis was too slow: the call reached it after dlockd gave up and "
			 "changed nothing; retry shortly" },
	{ "DLOCKD_UNSENT", "redis cannot be reached (no connection, or one that has not "
			   "answered for 2 s): the call was not sent and changed nothing; "
			   "retry shortly" },
	{ "DLOCKD_SETUP", "redis refused dlockd's connection set-up (AUTH, SELECT of the "
			  "database in --redis, or TIME: at its maxclients?); dlockd's log has "
			  "redis' words" },
	{ "DLOCKD_NOMASTER", "no redis master known: no sentinel of --redis names a master "
			     "that answers as one (sentinels down, or a failover under way); "
			     "retry shortly" },
	{ "DLOCKD_FAILOVER", "no redis master known: the sentinels are failing the master over "
			     "(dlockd left the old master when the failover began and waits "
			     "for the promoted replica); retry shortly" },
};

const char *redis_error_unavailable(const char *err)
{
	/* a command inside a script refused by the ACL: Redis 7.0 says "can't
	 * run this command", "can't access at least one of the keys" or "can't
	 * publish to the channel mentioned in the command"; 7.2 and later say
	 * "ERR ACL failure in script: ..." */
	static const char *const script_noperm[] = {
		"ERR The user executing the script can't ",
		"ERR ACL failure in script: ",
	};

	for (size_t i = 0; i < ARRAY_SIZE(script_noperm); i++)
		if (!strncmp(err, script_noperm[i], strlen(script_noperm[i])))
			return why_noperm;
	for (size_t i = 0; i < ARRAY_SIZE(unavailable); i++) {
		size_t n = strlen(unavailable[i].code);

		if (!strncmp(err, unavailable[i].code, n) && (err[n] == ' ' || err[n] == '\0'))
			return unavailable[i].why;
	}
	return NULL;
}

redisReply *redis_reply_unsent(void)
{
	static char code[] = "DLOCKD_UNSENT";
	static redisReply unsent = { .type = REDIS_REPLY_ERROR, .str = code,
				     .len = sizeof(code) - 1 };

	return &unsent;
}

bool redis_reply_made_up(const redisReply *r)
{
	static const char *const ours[] = { "DLOCKD_UNSENT", "DLOCKD_SETUP",
					    "DLOCKD_NOMASTER", "DLOCKD_FAILOVER" };

	if (!r || r->type != REDIS_REPLY_ERROR)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(ours); i++) {
		size_t n = strlen(ours[i]);

		if (!strncmp(r->str, ours[i], n) && (r->str[n] == ' ' || r->str[n] == '\0'))
			return true;
	}
	return false;
}

/* The reasons of dlockd_redis_errors_total: the two of ours, then each
 * code of unavailable[], in its order, lowercased, without "DLOCKD_". */
#define NREASONS (2 + ARRAY_SIZE(unavailable))
static const char *reasons[NREASONS] = { "no_reply", "error" };
static char reason_text[ARRAY_SIZE(unavailable)][24];

const char *const *redis_fault_labels(unsigned *n)
{
	for (size_t i = 0; i < ARRAY_SIZE(unavailable); i++) {
		const char *c = unavailable[i].code;
		size_t k = 0;

		if (!strncmp(c, "DLOCKD_", 7))
			c += 7;
		for (; c[k] && k < sizeof(reason_text[i]) - 1; k++)
			reason_text[i][k] = (char)(c[k] >= 'A' && c[k] <= 'Z' ? c[k] - 'A' + 'a' : c[k]);
		reason_text[i][k] = '\0';
		reasons[2 + i] = reason_text[i];
	}
	*n = NREASONS;
	return reasons;
}

int redis_fault_reason(const redisReply *r)
{
	if (!r)
		return REDIS_FAULT_NO_REPLY;
	if (r->type != REDIS_REPLY_ERROR)
		return -1;
	if (!strncmp(r->str, "MOVED ", 6) || !strncmp(r->str, "ASK ", 4))
		return -1;	/* a redirection the cluster router follows */
	for (size_t i = 0; i < ARRAY_SIZE(unavailable); i++) {
		size_t n = strlen(unavailable[i].code);

		if (!strncmp(r->str, unavailable[i].code, n) && (r->str[n] == ' ' || r->str[n] == '\0'))
			return (int)(2 + i);
	}
	return REDIS_FAULT_ERROR;
}
