/*
 * textfile.h - read a whole regular file with a size bound, without ever
 * blocking or reading forever.
 *
 * Lua's io.open blocks on a FIFO nobody writes (open(2) waits for a
 * writer) and reads /dev/zero until memory runs out. Here the path is
 * checked with stat(2) before it is opened, so a FIFO, device or socket is
 * refused unopened; it is then opened with O_NONBLOCK and checked again
 * with fstat(2) (the path may have been replaced in between), and at most
 * max_bytes + 1 bytes are read, so a file that grows while it is read is
 * refused too.
 */
#ifndef QL_TEXTFILE_H
#define QL_TEXTFILE_H

#include <stddef.h>

#include "err.h"

/*
 * Read the regular file at path into a new buffer (*out, NUL-terminated,
 * free(3) it; *len bytes without the NUL). what names the file in messages
 * ("plan file", "results file"). Returns 0, or a negative errno with codes:
 *   "ENOENT", "EACCES", "ENOTDIR", "ELOOP", "ENAMETOOLONG"  from stat/open,
 *   "EISDIR"  a directory,
 *   "EFTYPE"  not a regular file (FIFO, character or block device, socket):
 *             Linux has no errno for this; the name is BSD's "inappropriate
 *             file type",
 *   "EFBIG"   more than max_bytes,
 *   "EIO", "EAGAIN", ...  from read(2).
 */
int ql_textfile_read(const char *path, const char *what, size_t max_bytes, char **out,
		     size_t *len, ql_err *e);

#endif
