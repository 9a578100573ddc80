/* version.h -- the version dlockd was built as. */
#ifndef DLOCKD_VERSION_H
#define DLOCKD_VERSION_H

/* What --version prints after the program's name: the semantic version
 * (the VERSION file), then, built in a git checkout, the commit
 * ("0.4.0 (e2b678d)", "0.4.0 (e2b678d-dirty)"); outside git "0.4.0". */
extern const char dlockd_version[];
/* Its two parts: "0.4.0", and "e2b678d" ("" outside git). */
extern const char dlockd_release[];
extern const char dlockd_revision[];

#endif
