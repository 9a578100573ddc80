/* file_look.c -- what stat(2) says of a path, to tell whether a file
 * dlockd re-reads while it runs has changed on disk (see file_look.h). */
#include "service/base/file_look.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

struct file_look file_look_at(const char *path)
{
	struct file_look l;
	struct stat st;

	memset(&l, 0, sizeof(l));
	if (stat(path, &st) < 0) {
		l.err = errno;
		return l;
	}
	l.dev = st.st_dev;
	l.ino = st.st_ino;
	l.size = st.st_size;
	l.mtime = st.st_mtim;
	l.ctime = st.st_ctim;
	return l;
}

bool file_look_same(const struct file_look *a, const struct file_look *b)
{
	return a->err == b->err && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}
