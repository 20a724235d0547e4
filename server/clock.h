/*
 * clock.h - the daemon's one clock: monotonic seconds.
 *
 * Every deadline and duration in server/ (request deadlines, queue waits,
 * batch times, the drain) is a difference of srv_now() values, so a change
 * of the wall clock cannot expire or extend a request. Any thread may call
 * it. The bottom of server/: it includes nothing of the daemon.
 */
#ifndef SRV_CLOCK_H
#define SRV_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC (an arbitrary origin; only differences mean
 * anything). */
static inline double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* SRV_CLOCK_H */
