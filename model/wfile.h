/*
 * wfile.h - a weight file read whole, as each format of the weight-format
 * seam (wformat.h) reads its one file.
 */
#ifndef TD_WFILE_H
#define TD_WFILE_H

#include <stddef.h>

/* Reads path into a malloc'd buffer of *size bytes (one more allocated):
 * a regular file only (a FIFO is refused without blocking on it), read,
 * not mapped, and unchanged while it was read (its size and modification
 * time compared before and after: a file being written in place is
 * refused, one renamed over it stays whole). 0, or -1 with the reason in
 * err ("not a regular file", "the file changed while it was read ..."),
 * *buf NULL. */
int td_wfile_read(const char *path, char **buf, size_t *size, char *err, size_t errlen);

#endif /* TD_WFILE_H */
