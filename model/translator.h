/*
 * translator.h - the public C API of the transformerd engine (prefix td_).
 *
 * Load a model directory in the Hugging Face Marian layout once
 * (td_model_load), make one td_worker per thread that translates
 * (td_worker_init), and translate batches of token-id sequences
 * (td_translate_batch) with the same tokens, scores and cross-attention
 * weights as transformers' MarianMTModel.generate.
 *
 * Threading: a td_model is read-only after td_model_load and may be shared
 * by any number of workers on any threads. A td_worker belongs to one thread
 * at a time (it owns the backend queue, the KV caches and the scratch arena).
 *
 * Errors: functions that can fail return 0 on success and -1 with a
 * NUL-terminated message in the caller's err buffer. Nothing here calls
 * exit() or prints.
 */
#ifndef TD_TRANSLATOR_H
#define TD_TRANSLATOR_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Named limits of the engine. */
#define TD_MAX_BEAM 16            /* beams per sentence */
#define TD_MAX_GENERATED 512      /* generated tokens per sentence, whatever the
                                     model's positions allow (td_generated_cap) */
#define TD_MAX_LENGTH_PENALTY 10  /* |length_penalty| */
#define TD_MAX_ATTN_SELECT 64     /* entries of attention_layers / attention_heads */
#define TD_MAX_PREFIX 64          /* tokens of a forced target prefix */

typedef struct td_model td_model;
typedef struct td_worker td_worker;

typedef struct td_load_opts {
    const char *device;    /* "cpu" (default when NULL), "cuda" or "cuda:N" */
    int n_threads;         /* CPU threads for BLAS and op loops; 0 = all cores */
    const char *dtype;     /* storage of the weight matrices on the device:
                            * NULL/"auto" (the checkpoint's), "float32",
                            * "float16" (cuda only), "bfloat16" (cuda, or a
                            * CPU with AVX512-BF16 or AMX-BF16: rounded
                            * weights and activations, float32 sums),
                            * "int8" (cpu only: per-feature scales, int32
                            * sums) */
    const char *precision; /* GEMMs with half-precision weights on cuda:
                            * NULL/"full" (activations kept float32-accurate)
                            * or "half" (activations rounded to half) */
} td_load_opts;

/* Checks the option values that need no model or device (dtype and precision
 * names), so that a command line can reject them before loading anything.
 * 0, or -1 with a message. td_model_load checks them too. */
int td_load_opts_check(const td_load_opts *opts, char *err, size_t errlen);

/* What a directory holds, from its files' names and sizes only (nothing is
 * parsed): td_model_probe. The server, the command line and the memory
 * budget ask this, never a weight file's name. */
typedef struct td_probe {
    int has_config;          /* config.json */
    const char *format;      /* the weights' format ("safetensors"), or NULL: none */
    char weights[4200];      /* the weight file the load will read */
    uint64_t weight_bytes;   /* its size: what the weights take, about */
    char tokenizer[160];     /* the tokenizer files present, space-separated */
    char missing[160];       /* the first required file absent: "config.json", the
                                formats' weight files ("model.safetensors"), a tokenizer
                                file; "" when none */
} td_probe;

/* Probes dir: 1 when it holds a model td_model_load can try (config.json,
 * weights in a known format, every required tokenizer file), else 0 with
 * p->missing naming what is not there. */
int td_model_probe(const char *dir, td_probe *p);

/* The directory of dir's config and weights: dir/model for an Argos
 * Translate package (metadata.json and model/: td_tok_argos_package), whose
 * tokenizer is at its top (td_model_tokenizer_load takes dir itself), else
 * dir. Every td_model_* taking a model directory accepts a package. */
void td_model_files_dir(const char *dir, char *out, size_t n);

/* Loads config.json, generation_config.json and the weights (the first
 * format of the weight-format table, model/wformat.h, that dir holds) from dir,
 * validates every tensor against the config (names, shapes, finiteness) and
 * uploads the weights and position tables to the device. opts->device is
 * resolved by the device registry (backend/device.h), after the config and
 * the numerics have been checked; the engine itself never reads the name. */
int td_model_load(td_model **out, const char *dir, const td_load_opts *opts,
                  char *err, size_t errlen);

struct td_device; /* backend/device.h */

/* td_model_load on a device the caller resolved (td_device_resolve);
 * opts->device is ignored. The model and its workers create their backends
 * from dev (copied). */
int td_model_load_on(td_model **out, const char *dir, const struct td_device *dev,
                     const td_load_opts *opts, char *err, size_t errlen);
void td_model_free(td_model *m); /* accepts NULL */
/* Frees the model's weights (its config, device and backend stay: what a
 * tokenizer or a router reads of it still holds); no worker of it may
 * exist. td_model_reload reads them again from its directory: 0, or -1
 * with a message (the model then stays without weights). */
void td_model_unload(td_model *m);
int td_model_reload(td_model *m, char *err, size_t errlen);
const td_config *td_model_config(const td_model *m);
/* Bytes of weights resident on the device. */
size_t td_model_weight_bytes(const td_model *m);
/* The dtype the weight matrices are kept in: "float32", "float16",
 * "bfloat16" or "int8". */
const char *td_model_weight_dtype(const td_model *m);

/* Worst-case sizes a worker is built for; its memory is allocated once. */
typedef struct td_worker_opts {
    int max_batch;       /* sentences per call (default 32) */
    int max_src_len;     /* source tokens incl. </s> (default: max positions) */
    int max_length;      /* generated tokens incl. </s> (default: the model's) */
    int max_beam;        /* 1..TD_MAX_BEAM (default: the model's num_beams) */
    int n_threads;       /* CPU threads; 0 = all cores */
    int grow;            /* 0: device memory for the maxima above at init;
                            1: small at init, grown (between two decodes)
                            as sentences need it, td_worker_trim to shrink */
} td_worker_opts;

int td_worker_init(td_worker **out, const td_model *m,
                   const td_worker_opts *opts, char *err, size_t errlen);
void td_worker_free(td_worker *w); /* accepts NULL */
/* Binds w, which has no running decode, to model m (on the device w was
 * made for) with opts, as td_worker_init would have made it: a worker
 * shared by several models serves one at a time. The same model with the
 * same options costs nothing; a model of the same shape and numerics
 * (d_model, FFN width, vocabulary, heads, decoder layers, dtype) with the
 * same options keeps every buffer and the backend, grown as they are;
 * anything else reallocates the buffers (and the backend, for other
 * numerics) at the first capacities. 0, or -1 with a message: the worker
 * is then unusable (free it). */
int td_worker_bind(td_worker *w, const td_model *m, const td_worker_opts *opts, char *err,
                   size_t errlen);
/* Bytes of device memory the worker holds now (its scratch buffers). */
size_t td_worker_arena_bytes(const td_worker *w);
/* Bytes it would hold at its maxima (what opts.grow = 0 allocates). */
size_t td_worker_max_bytes(const td_worker *w);
/* A growing worker without a running decode goes back to its first
 * capacities; returns the bytes it gave back (0: nothing to give, or a
 * decode runs). On failure the worker is unusable: -1 (TD_EDEVICE). */
long td_worker_trim(td_worker *w, char *err, size_t errlen);
/* The longest source (tokens including </s>) the worker takes. */
int td_worker_max_src_len(const td_worker *w);

/* Decoding options of one call. Zero-initialise and set what you need;
 * td_decode_opts_default() fills the model's defaults. */
typedef struct td_decode_opts {
    int beam_size;          /* 1 = greedy; 1..TD_MAX_BEAM */
    int num_hypotheses;     /* 1..beam_size */
    float length_penalty;   /* score = sum log p / length^length_penalty */
    int max_length;         /* generated tokens including </s>; this is
                               transformers' max_length - 1 (transformers
                               counts the decoder start token) */
    int return_attention;   /* capture cross-attention of the best hypothesis */
    const int *attn_layers; /* decoder layers (negative: from the end); NULL = all */
    int n_attn_layers;
    const int *attn_heads;  /* heads; NULL = all */
    int n_attn_heads;
    /* A forced target prefix: the first n_prefix generated tokens of every
     * hypothesis are prefix[0..n_prefix) (decoder ids, 0..TD_MAX_PREFIX,
     * fewer than max_length), as generate's forced_bos_token_id forces a
     * multilingual model's target language (M2M100, NLLB: one token). At a
     * forced step every other token is -inf and the forced one has log-prob
     * 0, so it adds nothing to the sum of log-probs but counts in the
     * length that length_penalty divides by, as in transformers. The forced
     * </s> of the last step (forced_eos_token_id) wins over the prefix.
     * The tokens are part of the hypotheses (td_hypothesis.tokens). Copied
     * by td_run_add. */
    const int32_t *prefix;
    int n_prefix;
} td_decode_opts;

void td_decode_opts_default(const td_model *m, td_decode_opts *o);

/* The most generated tokens (incl. </s>) any worker or request of this model
 * may use: max_position_embeddings, at most TD_MAX_GENERATED. The default
 * of a request (td_decode_opts_default) is the model's max_length - 1 within
 * this cap. */
int td_generated_cap(const td_config *c);

/* What a worker (or a service in front of its workers) accepts. */
typedef struct td_decode_limits {
    int max_beam;    /* beam_size at most this (<= TD_MAX_BEAM) */
    int max_length;  /* max_length at most this (<= td_generated_cap) */
} td_decode_limits;

/* The one check of decoding options, used by td_translate_batch with the
 * worker's limits and by the daemon for its 400 answers: beam_size,
 * num_hypotheses, max_length, length_penalty and the attention selection.
 * Returns 0, or -1 with the failing option's name (its JSON field name, e.g.
 * "beam_size") in *param (when param is not NULL) and a message in err. */
int td_decode_opts_check(const td_config *c, const td_decode_limits *lim,
                         const td_decode_opts *o, const char **param, char *err,
                         size_t errlen);

typedef struct td_hypothesis {
    int32_t *tokens;     /* generated ids, without the decoder start token,
                            with the final </s> when one was generated */
    int n_tokens;
    float score;         /* sum of log-probs / n_tokens^length_penalty */
} td_hypothesis;

typedef struct td_result {
    td_hypothesis *hyps; /* best first */
    int n_hyps;
    /* Cross-attention of hyps[0] when requested:
     * attention[((l*n_heads + h)*n_t + t)*n_s + s] for the selected layers
     * and heads (in the order asked), t < n_t = hyps[0].n_tokens, s < n_s =
     * the source length. Row t is the attention used to predict token t. */
    float *attention;
    int attn_n_layers, attn_n_heads, attn_n_t, attn_n_s;
    int *attn_layer_ids; /* resolved (non-negative) layer ids */
    int *attn_head_ids;
} td_result;

/* td_translate_batch's failures: the request (or host memory), or the
 * device. After TD_EDEVICE the worker's device may be unusable (a CUDA error
 * can poison the whole context): a service stops sending work to it. */
#define TD_EINVAL (-1)
#define TD_EDEVICE (-2)

/* Translates n sentences. src[i] has src_len[i] ids (each in
 * [0, vocab_size), normally ending with </s>). Fills results[0..n) (caller
 * owns them; free each with td_result_free). Returns 0; TD_EINVAL with a
 * message (bad options, too many sentences or tokens for this worker, out of
 * host memory); or TD_EDEVICE with the backend's message (a failed kernel,
 * GEMM or transfer). On failure no result needs freeing. */
int td_translate_batch(td_worker *w, const int32_t *const *src,
                       const int *src_len, int n, const td_decode_opts *opts,
                       td_result *results, char *err, size_t errlen);
void td_result_free(td_result *r); /* accepts NULL and zeroed results */

/* ---- the running decode (in-flight batching) -------------------------------
 * A worker keeps one running decode. Sentences join it between two steps
 * (td_run_add: their encoder runs as one batch and their rows join the live
 * rows), every td_run_step advances every live row by one token, and a
 * sentence that has finished is handed out by td_run_take, while the others
 * go on. Each sentence keeps its own options: beam size, max_length,
 * length_penalty, num_hypotheses, attention selection. A sentence's tokens,
 * score and attention do not depend on what runs next to it or on the step
 * at which it joined (docs/decisions.md).
 *
 * Capacity is the worker's (td_worker_opts): max_batch sentences (slots,
 * held from td_run_add to td_run_take), max_batch * max_beam rows (a
 * sentence holds beam_size rows while it runs), max_src_len source tokens
 * each. Nothing is allocated per step; a sentence allocates its result (and
 * its attention history when it asks for attention).
 *
 * td_translate_batch is td_run_add of the whole batch, then steps until
 * every sentence is taken; it needs a worker without a running decode.
 * Same thread rules as the worker: one thread at a time. */

typedef uint64_t td_seq; /* a sentence's handle in the running decode, never 0 */

/* How many more sentences of beam_size beams fit now (free slots and rows). */
int td_run_room(const td_worker *w, int beam_size);
/* The free slots (sentences) and decoder rows now. */
void td_run_free(const td_worker *w, int *slots, int *rows);
/* Sentences admitted and not yet taken (running or waiting to be taken). */
int td_run_live(const td_worker *w);
/* Decoder rows in use. */
int td_run_rows(const td_worker *w);

/* Admits n sentences, opts[i] the options of sentence i (copied, with the
 * arrays they point to). Returns 0 with their handles in seq[0..n) (seq may
 * be NULL); TD_EINVAL with a message (bad options or sources, or no room:
 * nothing is admitted); or TD_EDEVICE (the caller should td_run_reset). */
int td_run_add(td_worker *w, const int32_t *const *src, const int *src_len, int n,
               const td_decode_opts *const *opts, td_seq *seq, char *err, size_t errlen);

/* One decoder step for every live row. Returns the number of finished
 * sentences waiting for td_run_take (>= 0), or TD_EDEVICE with the
 * backend's message (the caller should td_run_reset). A growing worker
 * (opts.grow) lengthens its caches before the step a sentence needs it
 * for; TD_EINVAL when that memory cannot be had (nothing changed; the
 * caller should fail the running sentences or td_run_reset). */
int td_run_step(td_worker *w, char *err, size_t errlen);

/* One decoder step for the live sentences with the shortest sources only:
 * the first of the row order (live sentences by source length, shortest
 * first, admission order among equals; a sentence admitted since the last
 * step takes its place in that order after the next step) whose rows fit
 * max_rows, at least one sentence. The others keep their state and go on at
 * a later step, so a scheduler can step short sentences more often than
 * long ones; what each sentence computes is the same. td_run_step is
 * td_run_step_shortest(w, INT_MAX, ...). Returns as td_run_step. */
int td_run_step_shortest(td_worker *w, int max_rows, char *err, size_t errlen);

/* Marks a sentence urgent: from the next step on it comes first in the row
 * order, before the shortest, so that td_run_step_shortest with
 * td_run_urgent_rows as max_rows steps the urgent sentences only (a
 * streamed answer's first sentences, stepped more often than the others).
 * What it computes does not change. Returns 0, or -1 for an unknown (or
 * already taken) handle. */
int td_run_urge(td_worker *w, td_seq seq);
/* The rows of the urgent sentences at the front of the row order (0 when
 * none; one admitted since the last step is not there yet). */
int td_run_urgent_rows(const td_worker *w);

/* Hands out the oldest finished sentence: 1 with its handle and result
 * (the caller owns it: td_result_free); -1 with its handle when its result
 * could not be built (out of host memory; *res is zeroed); 0 when none
 * waits. */
int td_run_take(td_worker *w, td_seq *seq, td_result *res);

/* Cancels a sentence: its rows leave at the next step (or at once when it
 * has finished and waits), nothing is handed out for it. Returns 0, or -1
 * for an unknown (or already taken) handle. */
int td_run_cancel(td_worker *w, td_seq seq);

/* Drops every sentence (after a device error, or to start over). */
void td_run_reset(td_worker *w);

/* ---- text ---------------------------------------------------------------- */

struct td_tokenizer; /* tokenizer/tokenizer.h */
struct td_tok_ids;   /* tokenizer/tokenizer.h: td_tok_encode_batch's output */

/* Loads the model directory's tokenizer (source.spm, target.spm,
 * vocab.json) checked against the model's vocabularies. */
int td_model_tokenizer_load(const td_model *m, const char *dir, struct td_tokenizer **out,
                            char *err, size_t errlen);

typedef struct td_text_result {
    char *text;            /* best translation, malloc'd */
    td_result r;           /* ids, scores, attention as td_translate_batch */
    int32_t *src_ids;      /* the tokenized source (with </s>) */
    int n_src;
    int n_src_full;        /* tokens before truncation (= n_src when not cut) */
} td_text_result;

/* Tokenizes n texts, translates them in batches of at most the worker's
 * max_batch (sorted by length to cut padding, results in input order) and
 * detokenizes the best hypothesis of each. A text longer than the worker's
 * max_src_len tokens is an error naming its index (nothing is returned).
 * It is td_tok_encode_batch(TD_LONG_SOURCE_ERROR) + td_translate_tokenized:
 * the engine's text in, text out, without sentences or the copy of symbols
 * the model cannot write (the reference the engine's tests hold to
 * transformers). The daemon and `transformerd translate` translate text
 * through server/service/pipeline.c, which adds both. Free each result
 * with td_text_result_free. */
int td_translate_text(td_worker *w, const struct td_tokenizer *tok, const char *const *texts,
                      const size_t *lens, int n, const td_decode_opts *opts,
                      td_text_result *results, char *err, size_t errlen);

/* The engine part of td_translate_text: n sources tokenized by
 * td_tok_encode_batch (each at most td_worker_max_src_len tokens, else an
 * error naming the text), translated in length-sorted batches, the best
 * hypotheses detokenized with tok. The ids of src[i] move into
 * results[i].src_ids (src[i].ids is NULL afterwards, also on failure; the
 * results then need no freeing). A source with nothing but </s> (an empty
 * or whitespace-only text, td_tok_is_empty) is not run: its result is ""
 * with one hypothesis of score 0 and no tokens. Returns 0 or -1 with a
 * message. */
int td_translate_tokenized(td_worker *w, const struct td_tokenizer *tok, struct td_tok_ids *src,
                           int n, const td_decode_opts *opts, td_text_result *results,
                           char *err, size_t errlen);
void td_text_result_free(td_text_result *r); /* accepts NULL */

/* td_translate_text for a multilingual model (M2M100, NLLB-200): every
 * source tokenized as "src_lang pieces </s>", every hypothesis begins with
 * tgt_lang's token, forced (a target prefix: generate's
 * forced_bos_token_id; opts->prefix, when set, follows it). The languages
 * are the tokenizer's (td_tok_n_langs, td_tok_lang in tokenizer.h), named
 * by their codes ("de", "deu_Latn"). Both are required for a model with
 * languages and must be NULL for one without (then this is
 * td_translate_text). A code the model lacks is an error naming it. The
 * hypotheses' tokens include the language token; the text does not. */
int td_translate_text_lang(td_worker *w, const struct td_tokenizer *tok, const char *src_lang,
                           const char *tgt_lang, const char *const *texts, const size_t *lens,
                           int n, const td_decode_opts *opts, td_text_result *results,
                           char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TD_TRANSLATOR_H */
