/*
 * signals.h - SIGTERM, SIGINT and SIGHUP reach the main thread, whichever
 * thread the kernel gives them to, at any moment of the daemon's life.
 *
 * A process-directed signal goes to any thread that does not block it. The
 * daemon's own threads block these three (they inherit the main thread's
 * mask), but a library may start threads before main() runs (OpenBLAS
 * starts its pool when it is loaded) and those block nothing: with the
 * default action there, a signal that came while the main thread was not
 * waiting for it (loading models, draining) killed the process. Here every
 * one of them runs a handler that writes the signal's number into a pipe,
 * and the main thread takes them from the pipe when it chooses.
 */
#ifndef SRV_SIGNALS_H
#define SRV_SIGNALS_H

#include <stddef.h>

/* Installs the handler for SIGTERM, SIGINT and SIGHUP (SA_RESTART) and
 * blocks them in the calling thread, so that every thread it starts later
 * blocks them too. Call once, on the main thread, before starting any
 * thread. Returns 0, or -1 with a message in err. */
int srv_signals_init(char *err, size_t errlen);

/* The next signal taken: with wait, blocks until one comes; without, 0 when
 * none has come. Signals that are pending for the process are let in for
 * the time of the call only (the calling thread blocks them otherwise).
 * Main thread only. */
int srv_signals_next(int wait);

#endif /* SRV_SIGNALS_H */
