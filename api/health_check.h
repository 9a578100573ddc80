/* health_check.h -- `dlockd --health-check`: probe a running dlockd. */
#ifndef DLOCKD_HEALTH_CHECK_H
#define DLOCKD_HEALTH_CHECK_H

struct config;

/* Ask the dlockd serving at cfg->listen (an unspecified address, 0.0.0.0
 * or [::], taken as loopback) GET /healthz, or /readyz when
 * cfg->health_check is HEALTH_CHECK_READY, over TCP (and TLS when cfg has
 * --tls-cert), all within HEALTH_CHECK_TIMEOUT_MS. Returns the exit status: 0 when it
 * answered 200, else 1 after one line on stderr saying why. */
int health_check_run(const struct config *cfg);

#define HEALTH_CHECK_TIMEOUT_MS 2000

#endif
