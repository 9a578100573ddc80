/* netns.c -- network namespaces and links of the test's own (see netns.h).
 *
 * The namespaces are anonymous (unshare, then a descriptor of
 * /proc/thread-self/ns/net), the devices in them TUN devices that exist as
 * long as their descriptor is open: this file holds every one of them,
 * and netns_free_all() closes them. A device is made, addressed and
 * brought up from inside its namespace (the calling thread goes there
 * and back), with the classic ioctls, so neither `ip` nor a name in
 * /run/netns is needed.
 *
 * The wire thread polls every TUN descriptor; a packet read from one side
 * of a wire is written to the other, now or, delayed, when it is due (a
 * heap by due time). Drops are decided as the packet is read, and a cut
 * also drops what is under way when it is due. The settings are read
 * atomically per packet, so the test changes them without a lock. */
#include "netns.h"

#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_NS 16
#define MAX_WIRES 16
/* Packets read from one descriptor per wake-up, at most. */
#define READ_BURST 64

struct netns {
	int fd;			/* /proc/thread-self/ns/net of the namespace */
	char tag[32];
	char addr[24];
};

/* One direction's settings; read atomically by the wire thread. */
struct dir_conf {
	int cut, delay_ms, jitter_ms;
	uint64_t loss;		/* lost when a random 32-bit number is below */
	int armed;		/* cut_on is set and has not cut yet */
	int fired;		/* cut_on has cut the direction */
	char cut_on[64];	/* written before armed is stored */
};

struct wire {
	int fd[2];		/* the TUN device in ns[0], in ns[1] */
	struct netns *ns[2];
	struct dir_conf conf[2];	/* [0]: ns[0] to ns[1]; [1]: back */
	long passed, cut, lost;	/* atomic */
};

/* A packet on its way: due at due_us (monotonic), to w's side 1 - dir. */
struct pkt {
	int64_t due_us;
	uint64_t seq;
	struct wire *w;
	int dir;
	size_t len;
	unsigned char data[];
};

static struct {
	pthread_mutex_t lock;	/* the lists, while the wire thread runs */
	int root;		/* the namespace the process started in; -1 until known */
	struct netns *ns[MAX_NS];
	int nns;
	struct wire *wires[MAX_WIRES];
	int nwires;
	bool hooked;		/* netns_free_all is registered with test_at_end */
	bool running;		/* the wire thread */
	pthread_t thread;
	int ctl[2];		/* a byte wakes the wire thread: new wire or stop */
	int stop;		/* atomic */
} net = { .lock = PTHREAD_MUTEX_INITIALIZER, .root = -1, .ctl = { -1, -1 } };

/* ----- Namespaces ----- */

static int this_ns(void)
{
	return open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
}

static bool know_root(void)
{
	if (net.root < 0)
		net.root = this_ns();
	return net.root >= 0;
}

/* Bring interface name up (in the calling thread's namespace). */
static int if_up(int s, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

static int set_addr(int s, const char *name, unsigned long req, const char *addr)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	sin->sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1)
		return -1;
	return ioctl(s, req, &ifr);
}

/* name: local address local, the peer at peer, up; in this namespace. */
static int if_config(const char *name, const char *local, const char *peer, char *why,
		     size_t why_len)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;
	const char *step = "socket";

	if (s >= 0) {
		if ((step = "SIOCSIFADDR", set_addr(s, name, SIOCSIFADDR, local)) == 0 &&
		    (step = "SIOCSIFNETMASK", set_addr(s, name, SIOCSIFNETMASK,
						       "255.255.255.255")) == 0 &&
		    (step = "SIOCSIFDSTADDR", set_addr(s, name, SIOCSIFDSTADDR, peer)) == 0 &&
		    (step = "SIOCSIFFLAGS", if_up(s, name)) == 0)
			rc = 0;
	}
	if (rc < 0)
		snprintf(why, why_len, "%s on %s: %s", step, name, strerror(errno));
	if (s >= 0)
		close(s);
	return rc;
}

/* A new namespace with loopback up; the calling thread stays where it is.
 * -1 with why. */
static int ns_make(char *why, size_t why_len)
{
	int here = this_ns(), fd = -1, s;

	if (here < 0) {
		snprintf(why, why_len, "/proc/thread-self/ns/net: %s", strerror(errno));
		return -1;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		snprintf(why, why_len, "unshare(CLONE_NEWNET): %s (needs CAP_SYS_ADMIN)",
			 strerror(errno));
		close(here);
		return -1;
	}
	fd = this_ns();
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || s < 0 || if_up(s, "lo") < 0) {
		snprintf(why, why_len, "loopback up in a new namespace: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	if (s >= 0)
		close(s);
	if (setns(here, CLONE_NEWNET) < 0) {
		/* cannot happen to a thread that could unshare; never go on in
		 * the wrong namespace */
		fprintf(stderr, "# setns back: %s\n", strerror(errno));
		abort();
	}
	close(here);
	return fd;
}

/* A TUN device in the calling thread's namespace: its descriptor, -1 with
 * why. */
static int tun_open(const char *name, char *why, size_t why_len)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, why_len, "/dev/net/tun: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		snprintf(why, why_len, "TUNSETIFF %s: %s (needs CAP_NET_ADMIN)", name,
			 strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

const char *netns_unavailable(void)
{
	static char why[200];
	static bool tried;
	int ns, here, tun;

	if (tried)
		return why[0] ? why : NULL;
	tried = true;
	if (!know_root()) {
		snprintf(why, sizeof(why), "/proc/thread-self/ns/net: %s", strerror(errno));
		return why;
	}
	ns = ns_make(why, sizeof(why));
	if (ns < 0)
		return why;
	here = this_ns();
	if (here < 0 || setns(ns, CLONE_NEWNET) < 0) {
		snprintf(why, sizeof(why), "setns into a new namespace: %s", strerror(errno));
	} else {
		tun = tun_open("probe0", why, sizeof(why));
		if (tun >= 0)
			close(tun);
		if (setns(here, CLONE_NEWNET) < 0) {
			fprintf(stderr, "# setns back: %s\n", strerror(errno));
			abort();
		}
	}
	if (here >= 0)
		close(here);
	close(ns);
	return why[0] ? why : NULL;
}

static void free_hook(void *arg)
{
	(void)arg;
	net.hooked = false;	/* the runner dropped it as it ran it */
	netns_free_all();
}

struct netns *netns_new(const char *tag)
{
	char why[200];
	struct netns *ns;
	int fd;

	if (!know_root()) {
		test_fail(__FILE__, __LINE__, "/proc/thread-self/ns/net: %s", strerror(errno));
		return NULL;
	}
	if (net.nns == MAX_NS) {
		test_fail(__FILE__, __LINE__, "more than %d namespaces", MAX_NS);
		return NULL;
	}
	if (!net.hooked) {
		test_at_end(free_hook, &net);
		net.hooked = true;
	}
	fd = ns_make(why, sizeof(why));
	if (fd < 0) {
		test_fail(__FILE__, __LINE__, "namespace %s: %s", tag, why);
		return NULL;
	}
	ns = calloc(1, sizeof(*ns));
	ns->fd = fd;
	snprintf(ns->tag, sizeof(ns->tag), "%s", tag);
	snprintf(ns->addr, sizeof(ns->addr), "10.200.0.%d", net.nns + 1);
	net.ns[net.nns++] = ns;
	return ns;
}

const char *netns_addr(const struct netns *ns)
{
	return ns->addr;
}

void netns_enter(const struct netns *ns)
{
	if (setns(ns ? ns->fd : net.root, CLONE_NEWNET) < 0) {
		/* a thread left in the wrong namespace would mislead every
		 * later test */
		fprintf(stderr, "# setns into %s: %s\n", ns ? ns->tag : "the first namespace",
			strerror(errno));
		abort();
	}
}

/* ----- The wire thread ----- */

struct heap {
	struct pkt **p;
	size_t n, cap;
};

static bool pkt_before(const struct pkt *x, const struct pkt *y)
{
	return x->due_us < y->due_us || (x->due_us == y->due_us && x->seq < y->seq);
}

static void heap_push(struct heap *h, struct pkt *p)
{
	size_t i;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 256;
		h->p = realloc(h->p, h->cap * sizeof(*h->p));
	}
	for (i = h->n++; i > 0 && pkt_before(p, h->p[(i - 1) / 2]); i = (i - 1) / 2)
		h->p[i] = h->p[(i - 1) / 2];
	h->p[i] = p;
}

static struct pkt *heap_pop(struct heap *h)
{
	struct pkt *top = h->p[0], *last = h->p[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && pkt_before(h->p[c + 1], h->p[c]))
			c++;
		if (!pkt_before(h->p[c], last))
			break;
		h->p[i] = h->p[c];
		i = c;
	}
	if (h->n)
		h->p[i] = last;
	return top;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint32_t rnd32(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (uint32_t)((*s * 0x2545F4914F6CDD1DULL) >> 32);
}

static int conf_get(const int *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void put(struct wire *w, int dir, const void *data, size_t len)
{
	if (write(w->fd[1 - dir], data, len) == (ssize_t)len)
		__atomic_add_fetch(&w->passed, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&w->lost, 1, __ATOMIC_RELAXED);
}

/* Say which packet a cut_on cut at: its TCP payload's first bytes. */
static void print_cut_on(const char *what, const unsigned char *data, size_t len)
{
	size_t ihl = (size_t)(data[0] & 15) * 4, at, end;
	char text[161];
	size_t n = 0;

	at = ihl + 12 < len && data[9] == IPPROTO_TCP ? ihl + (size_t)(data[ihl + 12] >> 4) * 4 : ihl;
	end = len < at + 160 ? len : at + 160;
	for (; at < end; at++)
		text[n++] = data[at] >= 32 && data[at] < 127 ? (char)data[at] : '.';
	text[n] = '\0';
	printf("# wire: cut on \"%s\" at a packet of %zu bytes: %s\n", what, len, text);
}

/* A packet read from side dir of w: drop, pass or delay it. */
static void take(struct wire *w, int dir, const unsigned char *data, size_t len,
		 struct heap *h, uint64_t *rs, uint64_t *seq)
{
	struct dir_conf *c = &w->conf[dir];
	int delay_ms = conf_get(&c->delay_ms), jitter_ms = conf_get(&c->jitter_ms);
	uint64_t loss = __atomic_load_n(&c->loss, __ATOMIC_ACQUIRE);
	int64_t delay_us = (int64_t)delay_ms * 1000;
	struct pkt *p;

	if (len < 20 || data[0] >> 4 != 4)
		return;		/* IPv4 only: the kernel's IPv6 chatter goes nowhere */
	if (conf_get(&c->armed) && memmem(data, len, c->cut_on, strlen(c->cut_on))) {
		print_cut_on(c->cut_on, data, len);
		__atomic_store_n(&c->cut, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&c->armed, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&c->fired, 1, __ATOMIC_RELEASE);
	}
	if (conf_get(&c->cut)) {
		__atomic_add_fetch(&w->cut, 1, __ATOMIC_RELAXED);
		return;
	}
	if (loss && rnd32(rs) < loss) {
		__atomic_add_fetch(&w->lost, 1, __ATOMIC_RELAXED);
		return;
	}
	if (jitter_ms > 0)
		delay_us += (int64_t)(rnd32(rs) % (2u * (uint32_t)jitter_ms * 1000u + 1)) -
			    (int64_t)jitter_ms * 1000;
	if (delay_us <= 0) {
		put(w, dir, data, len);
		return;
	}
	p = malloc(sizeof(*p) + len);
	p->due_us = now_us() + delay_us;
	p->seq = (*seq)++;
	p->w = w;
	p->dir = dir;
	p->len = len;
	memcpy(p->data, data, len);
	heap_push(h, p);
}

static void *wire_main(void *arg)
{
	struct pollfd pfd[1 + 2 * MAX_WIRES];
	struct wire *pw[1 + 2 * MAX_WIRES];
	struct heap h = { 0 };
	uint64_t rs = (uint64_t)now_us() | 1, seq = 0;
	unsigned char *buf = malloc(65536);
	int npfd = 0;
	bool rebuild = true;

	(void)arg;
	while (!__atomic_load_n(&net.stop, __ATOMIC_ACQUIRE)) {
		int timeout = -1;
		int64_t now;

		if (rebuild) {
			pthread_mutex_lock(&net.lock);
			pfd[0] = (struct pollfd){ .fd = net.ctl[0], .events = POLLIN };
			npfd = 1;
			for (int i = 0; i < net.nwires; i++)
				for (int d = 0; d < 2; d++) {
					pw[npfd] = net.wires[i];
					pfd[npfd++] = (struct pollfd){ .fd = net.wires[i]->fd[d],
								       .events = POLLIN };
				}
			pthread_mutex_unlock(&net.lock);
			rebuild = false;
		}
		if (h.n) {
			int64_t wait = h.p[0]->due_us - now_us();

			timeout = wait <= 0 ? 0 : (int)((wait + 999) / 1000);
		}
		if (poll(pfd, (nfds_t)npfd, timeout) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			char b[64];

			while (read(net.ctl[0], b, sizeof(b)) > 0)
				;
			rebuild = true;
		}
		for (int i = 1; i < npfd; i++) {
			int dir = pw[i]->fd[0] == pfd[i].fd ? 0 : 1;

			if (!(pfd[i].revents & POLLIN))
				continue;
			for (int k = 0; k < READ_BURST; k++) {
				ssize_t n = read(pfd[i].fd, buf, 65536);

				if (n <= 0)
					break;
				take(pw[i], dir, buf, (size_t)n, &h, &rs, &seq);
			}
		}
		now = now_us();
		while (h.n && h.p[0]->due_us <= now) {
			struct pkt *p = heap_pop(&h);

			if (conf_get(&p->w->conf[p->dir].cut))
				__atomic_add_fetch(&p->w->cut, 1, __ATOMIC_RELAXED);
			else
				put(p->w, p->dir, p->data, p->len);
			free(p);
		}
	}
	while (h.n)
		free(heap_pop(&h));
	free(h.p);
	free(buf);
	return NULL;
}

static void wire_thread_poke(void)
{
	if (write(net.ctl[1], "", 1) < 0 && errno != EAGAIN)
		fprintf(stderr, "# waking the wire thread: %s\n", strerror(errno));
}

/* ----- Wires ----- */

struct wire *wire_new(struct netns *a, struct netns *b)
{
	struct wire *w;
	char why[200] = "", name[IFNAMSIZ];
	int here;

	if (net.nwires == MAX_WIRES) {
		test_fail(__FILE__, __LINE__, "more than %d wires", MAX_WIRES);
		return NULL;
	}
	here = this_ns();
	if (here < 0) {
		test_fail(__FILE__, __LINE__, "/proc/thread-self/ns/net: %s", strerror(errno));
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	w->ns[0] = a;
	w->ns[1] = b;
	w->fd[0] = w->fd[1] = -1;
	snprintf(name, sizeof(name), "wire%d", net.nwires);
	for (int side = 0; side < 2; side++) {
		netns_enter(w->ns[side]);
		w->fd[side] = tun_open(name, why, sizeof(why));
		if (w->fd[side] < 0)
			break;
		if (if_config(name, w->ns[side]->addr, w->ns[1 - side]->addr, why,
			      sizeof(why)) < 0) {
			close(w->fd[side]);
			w->fd[side] = -1;
			break;
		}
	}
	if (setns(here, CLONE_NEWNET) < 0) {
		fprintf(stderr, "# setns back: %s\n", strerror(errno));
		abort();
	}
	close(here);
	if (w->fd[0] < 0 || w->fd[1] < 0) {
		test_fail(__FILE__, __LINE__, "wire %s-%s: %s", a->tag, b->tag, why);
		for (int side = 0; side < 2; side++)
			if (w->fd[side] >= 0)
				close(w->fd[side]);
		free(w);
		return NULL;
	}
	if (!net.running) {
		if (pipe2(net.ctl, O_NONBLOCK | O_CLOEXEC) < 0) {
			test_fail(__FILE__, __LINE__, "pipe: %s", strerror(errno));
			close(w->fd[0]);
			close(w->fd[1]);
			free(w);
			return NULL;
		}
		__atomic_store_n(&net.stop, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_lock(&net.lock);
	net.wires[net.nwires++] = w;
	pthread_mutex_unlock(&net.lock);
	if (!net.running) {
		pthread_create(&net.thread, NULL, wire_main, NULL);
		net.running = true;
	} else {
		wire_thread_poke();
	}
	return w;
}

void wire_set(struct wire *w, int dirs, const struct wire_conf *c)
{
	double loss = c->loss_pct <= 0 ? 0 : c->loss_pct >= 100 ? 100 : c->loss_pct;

	for (int d = 0; d < 2; d++) {
		struct dir_conf *dc = &w->conf[d];

		if (!(dirs & (d ? WIRE_BA : WIRE_AB)))
			continue;
		__atomic_store_n(&dc->delay_ms, c->delay_ms, __ATOMIC_RELEASE);
		__atomic_store_n(&dc->jitter_ms, c->jitter_ms, __ATOMIC_RELEASE);
		__atomic_store_n(&dc->loss, (uint64_t)(loss / 100 * 4294967296.0), __ATOMIC_RELEASE);
		__atomic_store_n(&dc->armed, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&dc->fired, 0, __ATOMIC_RELEASE);
		if (c->cut_on) {
			snprintf(dc->cut_on, sizeof(dc->cut_on), "%s", c->cut_on);
			__atomic_store_n(&dc->armed, 1, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&dc->cut, c->cut, __ATOMIC_RELEASE);
	}
}

bool wire_cut_fired(const struct wire *w, int dir)
{
	return conf_get(&w->conf[dir == WIRE_BA].fired);
}

void wire_cut(struct wire *w, bool cut)
{
	for (int d = 0; d < 2; d++)
		__atomic_store_n(&w->conf[d].cut, cut, __ATOMIC_RELEASE);
}

void wire_stats(const struct wire *w, struct wire_stats *out)
{
	out->passed = __atomic_load_n(&w->passed, __ATOMIC_RELAXED);
	out->cut = __atomic_load_n(&w->cut, __ATOMIC_RELAXED);
	out->lost = __atomic_load_n(&w->lost, __ATOMIC_RELAXED);
}

void netns_free_all(void)
{
	if (net.hooked) {
		test_at_end_cancel(&net);
		net.hooked = false;
	}
	if (net.running) {
		__atomic_store_n(&net.stop, 1, __ATOMIC_RELEASE);
		wire_thread_poke();
		pthread_join(net.thread, NULL);
		net.running = false;
	}
	for (int i = 0; i < 2; i++)
		if (net.ctl[i] >= 0) {
			close(net.ctl[i]);
			net.ctl[i] = -1;
		}
	if (net.nns > 0)	/* none made, none entered (and maybe no right to) */
		netns_enter(NULL);
	for (int i = 0; i < net.nwires; i++) {
		close(net.wires[i]->fd[0]);
		close(net.wires[i]->fd[1]);
		free(net.wires[i]);
	}
	net.nwires = 0;
	for (int i = 0; i < net.nns; i++) {
		close(net.ns[i]->fd);
		free(net.ns[i]);
	}
	net.nns = 0;
}
