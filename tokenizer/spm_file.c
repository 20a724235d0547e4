/*
 * spm_file.c - opening a model file for reading only when it is a regular
 * file (spm.h). Its own file so that every loader can use it (model/config.c
 * too) and a fuzz target of one loader links this alone, not the tokenizer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spm.h"

/* Opens path for reading only when it is a regular file: a FIFO named
 * like a model file would block the load forever, a device or a directory
 * would mislead it. O_NONBLOCK keeps the open itself from waiting for a
 * FIFO's writer. Returns NULL with *not_regular set when the file exists
 * but is not regular, NULL with errno otherwise. */
FILE *spm_fopen_regular(const char *path, int *not_regular)
{
    *not_regular = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        *not_regular = 1;
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f)
        close(fd);
    return f;
}
