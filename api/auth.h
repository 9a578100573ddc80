/* auth.h -- optional bearer-token access control from --auth-file: which
 * token may touch which lock names, and who may force a release. */
#ifndef DLOCKD_AUTH_H
#define DLOCKD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* A token's name: 1..AUTH_NAME_MAX of A-Z a-z 0-9 . _ - */
#define AUTH_NAME_MAX 64

enum auth_role {
	AUTH_CLIENT,	/* acquire, release, renew and read its own locks */
	AUTH_ADMIN,	/* that, plus force release */
};

enum auth_result {
	AUTH_OK,		/* known token, name in its scope; *role is set */
	AUTH_UNKNOWN,		/* no such token: 401 */
	AUTH_OUT_OF_SCOPE,	/* known token, name outside its prefix: 403 */
};

/* Read the token file (NULL: auth stays off). One token per line,
 * "<token> <role> <prefix> <name>", role client or admin, prefix the start
 * of the lock names it may touch or "*" for all, name the token's name
 * (unique in the file; locks taken under the token are bound to it); '#'
 * starts a comment. Returns 0, or -1 after printing file:line and the
 * problem. */
int auth_load(const char *path);
/* Read the same file again (SIGHUP). On error the old tokens stay in
 * force and -1 is returned after logging why. */
int auth_reload(void);
/* The same, only if the file looks changed (stat of the path, following
 * symlinks: device, inode, size, mtime) since it was last read or found
 * unreadable, so a bad file is tried (and logged) once per change. Cheap:
 * call it every second or so. 0 when nothing changed or the reload worked. */
int auth_reload_if_changed(void);
/* Is auth on? */
bool auth_enabled(void);
/* May token (len bytes, not NUL-terminated) touch lock name? Compares in
 * time independent of where the token differs. On AUTH_OK and
 * AUTH_OUT_OF_SCOPE, *role is set and the token's name copied into
 * principal (a reload may free the table: keep the copy, not a pointer). */
enum auth_result auth_check(const char *token, size_t len, const char *name,
			    enum auth_role *role, char principal[AUTH_NAME_MAX + 1]);
void auth_release(void);

#endif
