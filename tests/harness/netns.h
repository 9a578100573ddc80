/* netns.h -- network namespaces and links of the test's own, for the
 * partition tests (tests/integration/test_partition.c).
 *
 * A namespace here is anonymous: made with unshare(CLONE_NEWNET) and held
 * by a file descriptor of this process, never named in /run/netns. Nothing
 * in the namespace the process started in is touched (no device, address,
 * route or rule), and what the test made goes with its last user: at the
 * end of the test, or when the process and the children it started in
 * them die, however they die.
 *
 * Each namespace has one IPv4 address, 10.200.0.<n> (n its number in the
 * run), on every link it has, and loopback up. A link (struct wire) joins
 * two namespaces with a TUN device in each, point to point; a thread of
 * this process carries the packets between the two, and does to them what
 * the test asks, like tc netem on a veth pair: drop them all (a cut:
 * packets vanish, no RST, no ICMP, so only the peers' own timeouts can
 * tell), delay them (with jitter, reordering as netem does) and drop a
 * share at random. Why not veth and netem: the development machine's
 * kernel has no sch_netem (nor a gact action, nor iptables or nft
 * userland), and the wire works wherever namespaces and TUN do, with
 * counters of what it did.
 *
 * A thread's namespace is its own: netns_enter(ns) moves the calling
 * thread, and whatever it starts afterwards is born there: processes
 * (redis_start, dlockd_start), threads (load_start's clients, bg_start),
 * sockets (requests, Redis clients). So a test enters a namespace to start
 * or to talk to what is in it, by the namespace's address or by
 * 127.0.0.1 of its loopback.
 *
 * Everything here is the current test's: netns_free_all() (also run when
 * the test is over, see test_at_end) stops the wire thread, closes every
 * TUN device and namespace and brings the calling thread back. */
#ifndef DLOCKD_NETNS_H
#define DLOCKD_NETNS_H

#include <stdbool.h>

struct netns;
struct wire;

/* NULL when this process can make namespaces and TUN devices; else the
 * reason it cannot (for a SKIP line), e.g. no CAP_NET_ADMIN. Tried once. */
const char *netns_unavailable(void);

/* A new namespace, loopback up; NULL after a failed CHECK's message. tag
 * names it in messages only. */
struct netns *netns_new(const char *tag);
/* Its address, "10.200.0.<n>": where the others reach it over a wire. */
const char *netns_addr(const struct netns *ns);
/* Move the calling thread into ns; NULL: back into the namespace the
 * process started in. */
void netns_enter(const struct netns *ns);

/* A point-to-point link between a and b, passing every packet, IPv4 only;
 * NULL after a failed CHECK's message. */
struct wire *wire_new(struct netns *a, struct netns *b);

/* Directions of a wire: from a to b, from b to a. */
enum { WIRE_AB = 1, WIRE_BA = 2, WIRE_BOTH = 3 };

/* What a wire does to the packets of a direction: with cut every packet
 * vanishes (those already under way too); else each is lost with
 * probability loss_pct / 100, and the rest arrive delay_ms ± jitter_ms
 * later (uniform). With cut_on (at most 63 bytes, copied) the direction
 * passes as told until the first packet whose bytes contain cut_on: that
 * packet and all after it vanish, as with cut, from that moment on (a
 * cut timed by what is sent, not by the clock). */
struct wire_conf {
	bool cut;
	int delay_ms, jitter_ms;
	double loss_pct;
	const char *cut_on;
};
void wire_set(struct wire *w, int dirs, const struct wire_conf *c);
/* Cut both directions (true), or let them pass again (false) as before. */
void wire_cut(struct wire *w, bool cut);

/* Whether a cut_on of direction dir (WIRE_AB or WIRE_BA) has cut it. */
bool wire_cut_fired(const struct wire *w, int dir);

/* What a wire did so far, both directions together. */
struct wire_stats {
	long passed, cut, lost;
};
void wire_stats(const struct wire *w, struct wire_stats *out);

/* Stop the wire thread, close every wire and namespace of the test, and
 * bring the calling thread back to where the process started. Also run
 * when the test is over. */
void netns_free_all(void);

#endif
