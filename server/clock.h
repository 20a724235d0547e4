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

/* The CLOCK_REALTIME time d seconds from now (d >= 0), for
 * pthread_cond_timedwait on a condition variable of the default clock. */
static inline struct timespec srv_realtime_in(double d)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long whole = (long)d;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((d - (double)whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif /* SRV_CLOCK_H */
