/* version.c -- dlockd's version strings. The Makefile compiles this file
 * alone with -DDLOCKD_VERSION="...", -DDLOCKD_RELEASE and
 * -DDLOCKD_REVISION, so a new version recompiles this one object and
 * relinks, nothing else. */
#include "service/base/version.h"

#ifndef DLOCKD_VERSION
#define DLOCKD_VERSION "unknown"
#endif
#ifndef DLOCKD_RELEASE
#define DLOCKD_RELEASE "unknown"
#endif
#ifndef DLOCKD_REVISION
#define DLOCKD_REVISION ""
#endif

const char dlockd_version[] = DLOCKD_VERSION;
const char dlockd_release[] = DLOCKD_RELEASE;
const char dlockd_revision[] = DLOCKD_REVISION;
