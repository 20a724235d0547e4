/*
 * run_capture.h - for tests: run a shell command, keep (the start of) its
 * output, return its exit status (-1 when it did not exit normally).
 */
#ifndef TD_RUN_CAPTURE_H
#define TD_RUN_CAPTURE_H

#include <stdio.h>
#include <sys/wait.h>

static inline int run_capture(const char *cmd, char *out, size_t outlen)
{
    FILE *p = popen(cmd, "r");
    if (!p) {
        out[0] = 0;
        return -1;
    }
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) /* let it finish writing */
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* TD_RUN_CAPTURE_H */
