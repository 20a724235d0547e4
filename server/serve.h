/*
 * serve.h - `transformerd serve`: the daemon's entry point, which wires the
 * modules of server/ together (state, metrics, batchers, HTTP) and owns the
 * main thread: start-up, the wait for SIGTERM/SIGINT, and the drain.
 */
#ifndef SRV_SERVE_H
#define SRV_SERVE_H

/* Runs the daemon with the arguments after "serve". Returns the process's
 * exit status: 0 after a clean drain (or --help), 1 when the model cannot
 * be loaded or the socket bound, 2 for a bad option (docs/api.md). */
int srv_main(int argc, char **argv);

#endif /* SRV_SERVE_H */
