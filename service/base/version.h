/* version.h -- the version dlockd was built as. */
#ifndef DLOCKD_VERSION_H
#define DLOCKD_VERSION_H

/* `git describe --always --dirty` of the tree it was built from, or
 * openapi.yaml's info.version when built outside git. */
extern const char dlockd_version[];

#endif
