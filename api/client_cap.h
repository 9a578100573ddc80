/* client_cap.h -- how many connections each client has open, so that one
 * client cannot take all of --max-connections (--max-connections-per-
 * client). A client is an IPv4 address, or an IPv6 address's /64. Shared
 * by every loop (each accepts): thread-safe. */
#ifndef DLOCKD_CLIENT_CAP_H
#define DLOCKD_CLIENT_CAP_H

#include <stdbool.h>
#include <sys/socket.h>

struct client_slot;

/* Before any take: at most max connections a client (0: no cap). */
void client_cap_init(unsigned max);
/* Count a new connection of the client at sa into *slot (NULL: not
 * counted, no cap or no IP address); false when the client has max open
 * already. Give the slot back when the connection closes. */
bool client_cap_take(const struct sockaddr *sa, struct client_slot **slot);
/* The connection of slot closed (NULL: nothing). */
void client_cap_give(struct client_slot *slot);

#endif
