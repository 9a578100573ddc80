/* sd_notify.h -- telling systemd (Type=notify) how the service is doing,
 * through the datagram socket named by $NOTIFY_SOCKET, without libsystemd. */
#ifndef DLOCKD_SD_NOTIFY_H
#define DLOCKD_SD_NOTIFY_H

#include <stdbool.h>

/* Is there a $NOTIFY_SOCKET to tell (dlockd runs under Type=notify)? */
bool sd_notify_wanted(void);

/* Send state ("READY=1", "STOPPING=1", "STATUS=..."; lines joined by
 * '\n') to $NOTIFY_SOCKET. 0 sent, 1 no socket to send to, -1 failed
 * (logged). */
int sd_notify_send(const char *state);

#endif
