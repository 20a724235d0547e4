/*
 * serve.h - `transformerd serve`: the daemon's entry point, which wires the
 * modules of server/ together (state, metrics, batchers, HTTP) and owns the
 * main thread: start-up, the wait for SIGTERM/SIGINT, and the drain.
 */
#ifndef SRV_SERVE_H
#define SRV_SERVE_H

#include "call.h"
#include "state.h"

/* Runs the daemon with the arguments after "serve". Returns the process's
 * exit status: 0 after a clean drain (or --help), 1 when the model cannot
 * be loaded or the socket bound, 2 for a bad option (docs/api.md). */
int srv_main(int argc, char **argv);

/* The service without a transport, for a command that calls its API
 * itself: serve's options (argc, argv), every model loaded, the detector,
 * the file store and the model manager started, then run(s, h, ud) with the
 * API's handler; everything drained and stopped after. Returns run's
 * status, or srv_main's for a bad option (2) or a model that does not load
 * (1). */
typedef int (*srv_local_fn)(srv_server *s, const srv_call_handler *h, void *ud);
int srv_run_local(int argc, char **argv, srv_local_fn run, void *ud);

#endif /* SRV_SERVE_H */
