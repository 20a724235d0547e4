/*
 * signals.c - see signals.h.
 */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

static const int k_signals[] = {SIGTERM, SIGINT, SIGHUP};

/* Written by the handler (any thread), read by the main thread. */
static int g_pipe[2] = {-1, -1};

/* Async-signal-safe: one byte into a non-blocking pipe. A full pipe (64 KiB
 * of signals nobody took) drops the byte: the daemon is going down by then. */
static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(g_pipe[1], &b, 1);
    (void)r;
    errno = saved;
}

static void signal_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++)
        sigaddset(set, k_signals[i]);
}

int srv_signals_init(char *err, size_t errlen)
{
    if (pipe(g_pipe) != 0) {
        snprintf(err, errlen, "cannot make the signal pipe: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(g_pipe[i], F_GETFL);
        if (fl < 0 || fcntl(g_pipe[i], F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(g_pipe[i], F_SETFD, FD_CLOEXEC) != 0) {
            snprintf(err, errlen, "cannot set up the signal pipe: %s", strerror(errno));
            return -1;
        }
    }
    sigset_t set;
    signal_set(&set);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
        snprintf(err, errlen, "cannot block the signals");
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++)
        if (sigaction(k_signals[i], &sa, NULL) != 0) {
            snprintf(err, errlen, "cannot install the handler of signal %d: %s", k_signals[i],
                     strerror(errno));
            return -1;
        }
    return 0;
}

int srv_signals_next(int wait)
{
    sigset_t open;
    pthread_sigmask(SIG_SETMASK, NULL, &open);
    for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++)
        sigdelset(&open, k_signals[i]);
    for (;;) {
        unsigned char b;
        if (read(g_pipe[0], &b, 1) == 1)
            return b;
        /* the signals are open only inside pselect: one pending for the
         * process is delivered there (the handler fills the pipe, pselect
         * answers EINTR) */
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(g_pipe[0], &rd);
        struct timespec zero = {0, 0};
        int r = pselect(g_pipe[0] + 1, &rd, NULL, NULL, wait ? NULL : &zero, &open);
        if (r == 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}
