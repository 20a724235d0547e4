/*
 * errors.h - what a service operation's failure is, as a kind: each door
 * (an HTTP dialect, the command line) says it in its own words and status
 * (server/api/request.c maps them for the dialects). The service itself
 * speaks no protocol.
 */
#ifndef SRV_ERRORS_H
#define SRV_ERRORS_H

typedef enum srv_err {
    SRV_OK = 0,
    SRV_ERR_NOMEM,       /* out of memory */
    SRV_ERR_INTERNAL,    /* a library's or the engine's failure, with its message */
    SRV_ERR_TOO_LONG,    /* a text or sentence over the token limit */
    SRV_ERR_TOO_MANY,    /* more sentences to translate than the limit */
    SRV_ERR_INVALID,     /* the input is not what it must be (a file of another format) */
    SRV_ERR_NOT_FOUND,   /* what it names does not exist (a model) */
    SRV_ERR_CONFLICT,    /* the state forbids it (a name taken, the last model, a change
                            while it ran) */
    SRV_ERR_NO_ROOM,     /* over the memory budget (--max-memory) */
    SRV_ERR_UNUSABLE,    /* well-formed but unusable (a model directory that does not load) */
    SRV_ERR_BUSY,        /* a queue is full: retry later */
    SRV_ERR_UNAVAILABLE, /* the service is shutting down */
} srv_err;

#endif /* SRV_ERRORS_H */
