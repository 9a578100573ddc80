/* client_cap.c -- the connections each client has open (client_cap.h).
 *
 * A table of counts keyed by the client's address as text: an IPv4
 * address ("192.0.2.7"; an IPv4-mapped IPv6 one is the same client), or
 * an IPv6 /64 ("2001:db8:1:2::/64": a host picks its addresses from one).
 * A client's entry lives while it has a connection open. Each loop's
 * thread accepts and closes connections, so one mutex guards the table;
 * a take and a give are a lookup each, once a connection. */
#include "api/client_cap.h"

#include "service/base/names.h"
#include "service/base/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct client_slot {
	struct name_entry entry;
	unsigned open;
	char key[INET6_ADDRSTRLEN + 4];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct name_table clients;
static unsigned cap;

void client_cap_init(unsigned max)
{
	names_init(&clients);
	cap = max;
}

/* The client of sa as text into key; false for an address of no client
 * (not IP). */
static bool client_key(const struct sockaddr *sa, char *key, size_t len)
{
	if (sa->sa_family == AF_INET)
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, key,
				 (socklen_t)len) != NULL;
	if (sa->sa_family == AF_INET6) {
		struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
		size_t n;

		if (IN6_IS_ADDR_V4MAPPED(&a))
			return inet_ntop(AF_INET, &a.s6_addr[12], key, (socklen_t)len) != NULL;
		memset(&a.s6_addr[8], 0, 8);
		if (!inet_ntop(AF_INET6, &a, key, (socklen_t)len))
			return false;
		n = strlen(key);
		snprintf(key + n, len - n, "/64");
		return true;
	}
	return false;
}

bool client_cap_take(const struct sockaddr *sa, struct client_slot **slot)
{
	struct client_slot *s = NULL;
	struct name_entry *e;
	char key[sizeof(s->key)];
	bool ok = true;

	*slot = NULL;
	if (!cap || !client_key(sa, key, sizeof(key)))
		return true;	/* not counted */
	pthread_mutex_lock(&mu);
	e = names_find(&clients, key);
	if (e) {
		s = container_of(e, struct client_slot, entry);
		if (s->open >= cap) {
			ok = false;
		} else {
			s->open++;
			*slot = s;
		}
	} else {
		s = xcalloc(1, sizeof(*s));
		memcpy(s->key, key, sizeof(key));
		s->entry.name = s->key;
		s->open = 1;
		names_add(&clients, &s->entry);
		*slot = s;
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

void client_cap_give(struct client_slot *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&mu);
	if (--s->open == 0) {
		names_remove(&clients, &s->entry);
		free(s);
	}
	pthread_mutex_unlock(&mu);
}
