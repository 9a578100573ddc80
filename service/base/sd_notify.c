/* sd_notify.c -- systemd's notification protocol (sd_notify(3)): one
 * datagram of "KEY=value" lines to the AF_UNIX socket whose path is in
 * $NOTIFY_SOCKET (a leading '@' names an abstract socket). That is all of
 * it dlockd needs, so libsystemd is not linked. */
#include "service/base/sd_notify.h"

#include "service/base/log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

bool sd_notify_wanted(void)
{
	const char *path = getenv("NOTIFY_SOCKET");

	return path && (path[0] == '/' || path[0] == '@');
}

int sd_notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	ssize_t n;
	int fd;

	if (!sd_notify_wanted())
		return 1;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path)) {
		log_warn("NOTIFY_SOCKET is too long a path; systemd is not told %s", state);
		return -1;
	}
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';	/* abstract: no trailing NUL counted */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("NOTIFY_SOCKET: socket: %s; systemd is not told %s", strerror(errno), state);
		return -1;
	}
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	close(fd);
	if (n < 0) {
		log_warn("NOTIFY_SOCKET %s: %s; systemd is not told %s", path, strerror(errno),
			 state);
		return -1;
	}
	return 0;
}
