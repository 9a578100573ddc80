/* file_look.h -- has a file changed on disk since it was last read? For
 * the files dlockd re-reads while it runs (--auth-file, the TLS
 * certificates), looked at every second from main.c's signal wait. */
#ifndef DLOCKD_FILE_LOOK_H
#define DLOCKD_FILE_LOOK_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

/* What stat(2) said of a path, which follows symlinks: a file rewritten
 * in place (its mtime or size), renamed over (its inode), given other
 * permissions (its ctime: a key made readable after a failed read), or swapped
 * behind a symlink as Kubernetes does with a mounted Secret (the ..data
 * link, another inode) all look different. */
struct file_look {
	int err;		/* stat's errno; 0: the fields below are set */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;	/* also a chmod or chown (a key made readable) */
};

/* Look at path now. Take the look before reading the file, so that a
 * change made while it is read is seen at the next look. */
struct file_look file_look_at(const char *path);
/* Do two looks see the same file (or the same error)? */
bool file_look_same(const struct file_look *a, const struct file_look *b);

#endif
