/*
 * wfile.c - a weight file read whole (wfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wfile.h"

int td_wfile_read(const char *path, char **buf, size_t *size, char *err, size_t errlen)
{
    *buf = NULL;
    *size = 0;
    /* O_NONBLOCK: a FIFO would block the open; refused as not regular below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat sb, after;
    char *m = NULL;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "cannot stat: %s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        goto fail;
    }
    if ((uintmax_t)sb.st_size >= SIZE_MAX / 2) {
        snprintf(err, errlen, "file of %lld bytes is too large to read", (long long)sb.st_size);
        goto fail;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    m = malloc(n + 1); /* one byte more: a file that grew shows in the read */
    if (!m) {
        snprintf(err, errlen, "out of memory reading %zu bytes", n);
        goto fail;
    }
    while (got <= n) {
        ssize_t r = pread(fd, m + got, n + 1 - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "read failed at byte %zu: %s", got, strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    int same_time = fstat(fd, &after) == 0 && after.st_mtim.tv_sec == sb.st_mtim.tv_sec &&
                    after.st_mtim.tv_nsec == sb.st_mtim.tv_nsec;
    if (got != n || after.st_size != sb.st_size || !same_time) {
        snprintf(err, errlen,
                 "the file changed while it was read (%zu bytes read of the %zu it had when "
                 "opened): it is being written; update a model by writing the new file beside "
                 "it and renaming it over the old one",
                 got, n);
        goto fail;
    }
    close(fd);
    *buf = m;
    *size = n;
    return 0;
fail:
    free(m);
    close(fd);
    return -1;
}
