/* version.c -- dlockd's version string. The Makefile compiles this file
 * alone with -DDLOCKD_VERSION="...", so a new version recompiles this one
 * object and relinks, nothing else. */
#include "service/base/version.h"

#ifndef DLOCKD_VERSION
#define DLOCKD_VERSION "unknown"
#endif

const char dlockd_version[] = DLOCKD_VERSION;
