/*
 * models.h - the daemon's model set: the models that take requests, routed
 * by name or language pair, each reference-counted; loading one (its
 * batcher, workers and memory), reloading it next to the running one,
 * loading and unloading at run time within --max-memory, and the thread
 * that does the slow part of that (the model manager).
 *
 * Promise: a request routed to a model holds it (srv_models_get*) until it
 * puts it back (srv_model_put); a reload switches new requests to the new
 * weights in one step under the set's lock, while the requests that hold
 * the old model, queued or running, finish on it; the old model is freed
 * by the manager thread after its last reference is put back. A model that
 * fails to load leaves the one serving untouched. The bytes of every
 * loaded model (serving or finishing) stay within --max-memory (when set).
 *
 * Threads: _get*, _put, _pairs, _snapshot, _unload, _submit and _failed may
 * be called from any thread (HTTP threads, the main thread); the set's lock
 * is held only for pointer and counter work, never across a load, a
 * warm-up or a free. The loads, reloads and frees run on the manager
 * thread; the model's done callbacks are called there. _load_initial,
 * _start, _stop, _drain and _free belong to the main thread (serve.c).
 */
#ifndef SRV_MODELS_H
#define SRV_MODELS_H

#include <stddef.h>

#include "errors.h"
#include "state.h"

typedef struct srv_models srv_models;

/* What to load: a name, a directory and optionally the language pair
 * ("" = from tokenizer_config.json's source_lang/target_lang, else from the
 * directory's name: "xx-yy", "opus-mt-xx-yy", "marian_xx_yy"). */
typedef struct srv_model_spec {
    char name[128];
    char dir[4096];
    char langs[40]; /* "SRC-TGT" or "" */
    int scanned;    /* found under --models-dir (not named by --model): a start-up load
                       that fails leaves it out, said why, instead of stopping the daemon */
} srv_model_spec;

/* A model's name: 1..127 characters of A-Z a-z 0-9 . _ - (names go into
 * URL paths and metric labels). */
int srv_model_name_char(char c);
int srv_model_name_ok(const char *name);
/* "SRC-TGT" of two 2- or 3-letter lower-case codes. */
int srv_model_langs_ok(const char *langs);

/* The model set of s (s->o must be filled). NULL when out of memory. */
srv_models *srv_models_new(srv_server *s);

/* Loads a model of the start-up configuration and adds it to the set (the
 * main thread, before ready). -1 with err (the loader's message, or the
 * budget's) on failure. */
int srv_models_load_initial(srv_models *ms, const srv_model_spec *spec, char *err,
                            size_t errlen);

/* Adds sm, made by the caller without srv_models_load_initial (a harness
 * with no batcher: the request fuzzer), as a serving model; the set frees
 * it with malloc's free in srv_models_free unless the caller takes it out
 * first. -1 when out of memory. */
int srv_models_adopt(srv_models *ms, srv_model *sm);

/* The model named name (NULL: the first of the set), with a reference
 * the caller puts back; NULL when there is none. */
srv_model *srv_models_get(srv_models *ms, const char *name);

/* The model from src to tgt, with a reference; NULL when no model
 * translates that pair. Codes compare by language (langcodes.h: "de" and
 * "deu_Latn" are one): a bilingual model of the pair first, in the set's
 * order, then a multilingual one that has both languages. */
srv_model *srv_models_get_pair(srv_models *ms, const char *src, const char *tgt);

/* A model's default decoding options, the daemon's and `transformerd
 * translate`'s: its generation config's (td_decode_opts_default), an Argos
 * package's (package: td_tok_argos_package) as argos-translate decodes
 * (beam 4, length penalty 0.2), one hypothesis. */
void srv_model_defaults(const td_model *m, int package, td_decode_opts *o);

/* A model directory's language pair (src, tgt: 16 bytes each) as the
 * daemon names it: given ("src-tgt", or ""), else an Argos package's
 * metadata.json, else tokenizer_config.json, else the model's name's last
 * two parts ("opus-mt-en-de"), else "und". `transformerd translate` splits
 * sentences in the same source language as the daemon. */
void srv_model_dir_langs(const char *dir, const char *name, const char *given, char *src,
                         char *tgt);

/* The number of sm's tokenizer language that code names (langcodes.h),
 * or -1 (always for a bilingual model). */
int srv_model_lang(const srv_model *sm, const char *code);

/* Whether sm translates src to tgt: its pair, or (multilingual) two
 * different languages it has. */
int srv_model_serves(const srv_model *sm, const char *src, const char *tgt);

/* Drops a reference taken by _get, _get_pair or _snapshot. Accepts NULL. */
void srv_model_put(srv_model *sm);

/* A copy of what routing needs of one serving model. */
typedef struct srv_pair {
    char name[128];
    char src[16], tgt[16];  /* "mul" for a multilingual model */
    int n_langs;            /* its languages when multilingual (languages.h lists
                               them), else 0 */
    int max_beam;
} srv_pair;

/* The serving models' names and pairs, in the set's order, into out (at
 * most max); returns how many serve (may exceed max). */
int srv_models_pairs(srv_models *ms, srv_pair *out, int max);

/* "en-de (en->de), de-en (de->en)": the pairs, for error messages. */
void srv_models_pairs_text(srv_models *ms, char *out, size_t n);

/* Every serving model, each with a reference (put each back), into out
 * (at most max); returns how many were taken. */
int srv_models_snapshot(srv_models *ms, srv_model **out, int max);

/* Bytes of every loaded model (serving and finishing), and the budget
 * (--max-memory, 0 = none). */
void srv_models_memory(srv_models *ms, size_t *used, size_t *budget);

/* The engine workers every model shares (pool.h). */
typedef struct srv_workers_info {
    int seats;            /* --workers */
    size_t scratch_bytes; /* their arenas now (grown as requests need, trimmed when idle) */
    size_t max_bytes;     /* seats x the largest loaded model's worker at its maxima: what
                             --max-memory counts for them */
} srv_workers_info;
void srv_models_workers(srv_models *ms, srv_workers_info *w);

/* The host memory model sm holds now: its weights and its workers'
 * buffers while resident (0 when put away). */
size_t srv_model_resident_bytes(const srv_model *sm);

/* The first serving model whose device failed: its name and message into
 * why ("model NAME: the device failed: ..."); 0 when none failed. */
int srv_models_failed(srv_models *ms, char *why, size_t n);

/* ---- run-time changes (the model manager) ------------------------------- */

typedef enum srv_model_op_kind {
    SRV_OP_LOAD = 0,  /* a new model: spec (name, dir under --models-dir, langs) */
    SRV_OP_RELOAD,    /* the model spec.name again from its directory */
    SRV_OP_RELOAD_ALL /* every serving model (SIGHUP), one after another */
} srv_model_op_kind;

typedef struct srv_model_op srv_model_op;
typedef void (*srv_model_op_done_fn)(srv_model_op *op, void *ud);

/* One operation for the manager thread. The submitter fills kind, spec,
 * done and ud; the manager writes the outcome before done. */
struct srv_model_op {
    srv_model_op_kind kind;
    srv_model_spec spec;
    srv_model_op_done_fn done; /* required; called once, on the manager thread (or in
                                  _stop for operations that never ran) */
    void *ud;
    /* the outcome */
    srv_err err;       /* SRV_OK, or the kind of failure (errors.h) */
    char code[32];     /* the error object's code ("" on success) */
    char param[16];    /* the field an error is about, or "" */
    char msg[1024];    /* the error's message, or the loaded model's summary */
    char name[128];    /* the model loaded or reloaded */
    unsigned generation;
    size_t bytes;
    srv_model_op *next; /* the manager's queue */
};

/* Starts the manager thread. -1 when it cannot start. */
int srv_models_start(srv_models *ms);

/* Queues op for the manager thread; its done will be called. */
void srv_models_submit(srv_models *ms, srv_model_op *op);

/* Unloads the model named name: it takes no new request from now on (a
 * request naming it gets 400), the requests that hold it finish on it,
 * and it is freed after the last. Returns SRV_OK (*inflight: the requests
 * still holding it), SRV_ERR_NOT_FOUND (no such model), SRV_ERR_CONFLICT
 * (the last model: the daemon would serve nothing) or SRV_ERR_NOMEM, with
 * msg. */
srv_err srv_models_unload(srv_models *ms, const char *name, int *inflight, char *msg, size_t n);

/* Stops the manager thread: the operation it runs finishes, queued ones
 * are answered SRV_ERR_UNAVAILABLE. */
void srv_models_stop(srv_models *ms);

/* srv_batcher_drain of every loaded model (serving and finishing). */
void srv_models_drain(srv_models *ms, double deadline_s);

/* Frees every model and the set (after _stop, _drain, and the HTTP layer's
 * stop). Accepts NULL. */
void srv_models_free(srv_models *ms);

/* The device-failed policy, given the engine code of a job that failed on
 * sm (any thread, e.g. a job's completion on a scheduler thread):
 * TD_EDEVICE presumes the device unusable (a CUDA error can poison the
 * whole context): sm is failed for good (readiness 503 device_error, new
 * translations refused, see srv_model_failed) and its batcher is halted so
 * that queued jobs fail without touching the device, so that an
 * orchestrator replaces the process. Any other code (host memory) fails
 * only that batch. The first device error's message is kept. */
void srv_model_engine_error(srv_model *sm, int engine_rc, const char *msg);

/* The message of the device error that failed sm, or NULL while it has
 * not failed. Any thread. */
const char *srv_model_failed(const srv_model *sm);

#endif /* SRV_MODELS_H */
