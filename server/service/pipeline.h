/*
 * pipeline.h - the one text pipeline: texts -> sentences -> tokenized jobs
 * -> (the engine) -> texts. Every door that translates text uses it: the
 * HTTP dialects (server/api/translate.c), `transformerd translate`
 * (server/cli_translate.c) and the documents' segments.
 *
 * What it does, in order:
 *   srv_pipe_make    each text split into sentences (td_segment, unless
 *                    seg_lang is NULL; a text of one sentence stays one
 *                    unit, exactly as it is), the units tokenized under
 *                    the limit (refused, or cut for the command line),
 *                    the text of each unknown source piece kept for the
 *                    copy, and a glossary's terms found in each unit
 *                    (such a job captures attention, copy_opts);
 *   (the caller)     runs p->jobs[0 .. n_jobs) through the engine, however
 *                    it likes (a batcher, its own running decode), and
 *                    fills each job's res;
 *   srv_pipe_text    a text's translation: its sentences' hypotheses, each
 *                    unknown target token replaced by the source symbol
 *                    its attention points at, a glossary's terms placed
 *                    in the best hypothesis by the attention's word links
 *                    (glossary.h), joined between the text's own
 *                    separators;
 *   srv_pipe_align   the word alignment of a text for inline formatting.
 *
 * It knows no HTTP and no request: its errors are kinds (errors.h) with
 * the place they concern in a srv_pipe_fail, which each door words as it
 * speaks. Everything it holds comes from the caller's arena (srv_arena)
 * but the tokenizer's ids, the sentences and the results, which
 * srv_pipe_free frees.
 *
 * Threads: one thread at a time per srv_pipe; the engine may fill the jobs'
 * results from other threads (each its own job).
 */
#ifndef SRV_PIPELINE_H
#define SRV_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "batcher.h"
#include "errors.h"
#include "glossary.h"
#include "segment.h"
#include "spans.h"
#include "tokenizer.h"
#include "translator.h"

/* The caller's arena: alloc(ud, count, size) gives count x size zeroed
 * bytes, freed with the caller's call or line (NULL when out of memory or
 * on overflow). */
typedef struct srv_arena {
    void *(*alloc)(void *ud, size_t count, size_t size);
    void *ud;
} srv_arena;

/* An arena on the heap for a caller without one (the command line):
 * srv_arena{srv_heap_alloc, &heap}; srv_heap_free frees every block. */
typedef struct srv_heap {
    void *blocks;
} srv_heap;
void *srv_heap_alloc(void *heap, size_t count, size_t size);
void srv_heap_free(srv_heap *h);

/* The text of a source's unknown piece: at pos, len bytes. */
typedef struct srv_unk_text {
    int pos;             /* the source position; -1 ends a job's list */
    const char *text;
    size_t len;
} srv_unk_text;

/* A job's glossary terms: those found in its source unit (a copy, in the
 * arena), placed in its best hypothesis. */
typedef struct srv_gloss_job {
    srv_gloss_hit *hits; /* n, in the arena */
    int n;
    const char *unit;    /* the source the job was tokenized from */
    size_t unit_n;
} srv_gloss_job;

/* A text of more than one sentence (tokenizer/segment.h): each sentence is
 * a job of its own; its translation puts theirs back between the text's
 * own separators. */
typedef struct srv_split {
    int n;                   /* sentences (> 1); 0: the text is one job (or empty) */
    char *text;              /* a copy of the text (its separators), in the arena */
    size_t len;
    td_sentence *sent;       /* n: bytes of each sentence in text, malloc'd */
    int *job;                /* n: each sentence's job, -1 when empty (not run) */
} srv_split;

/* Where srv_pipe_make failed. */
typedef struct srv_pipe_fail {
    int text;          /* the text concerned (its index in the call), or -1 */
    int sentence;      /* its sentence, or -1 for the whole text */
    size_t c0, c1;     /* the sentence's characters in the text */
    int n_tokens;      /* SRV_ERR_TOO_LONG: the unit's tokens; TOO_MANY: the jobs */
    int limit;         /* the limit broken */
    char msg[256];     /* SRV_ERR_INTERNAL: the library's message */
} srv_pipe_fail;

typedef struct srv_pipe {
    /* set by the caller before srv_pipe_make */
    const td_tokenizer *tok;
    srv_arena arena;
    const char *seg_lang;        /* the sentence split's language; NULL: each text one unit */
    int src_lang;                /* a multilingual model's source language number, else -1 */
    int max_tokens;              /* a unit's limit in tokens, </s> counted */
    int cut_long;                /* 1: a unit over it is cut (td_tok's TRUNCATE); 0: refused */
    int raw_unknown;             /* 1: the model's raw output, no unknown symbol copied */
    int max_jobs;                /* more jobs than this: SRV_ERR_TOO_MANY (0: no bound) */
    const td_decode_opts *opts;  /* every job's, but for those that copy (copy_opts) */
    const srv_gloss_dict *gloss_dict; /* a glossary's dictionary for the pair translated
                                         (srv_pipe_glossary), or NULL: none */
    /* made by srv_pipe_make */
    int n_texts;
    int *text_job;          /* per text: its job, or -1 for an empty text (not run) or
                               a text of several sentences (split[text]) */
    srv_split *split;       /* per text, or NULL when no text was split */
    srv_job *jobs;          /* one per text (or sentence) that runs, in input order */
    int n_jobs;
    int32_t **src;          /* per job, malloc'd by the tokenizer */
    srv_unk_text **unk;     /* per job: its unknown pieces' text (NULL: none); NULL
                               with raw_unknown */
    srv_gloss_job *gloss;   /* per job: the glossary's terms in it; NULL without
                               gloss_dict */
    td_decode_opts copy_opts; /* a job with unknown pieces or glossary terms whose opts
                                 ask no attention: every layer and head captured for
                                 the copy or the placement */
    long tokens_in;
    int n_cut;              /* units cut (cut_long), and the first one's counts: */
    int cut_text, cut_full, cut_to;
} srv_pipe;

/* Sets p->gloss_dict: g's dictionary from src to tgt (canonical codes,
 * langcodes.h). SRV_OK (g NULL: none), or SRV_ERR_INVALID when g has no
 * dictionary for the pair: pairs (n bytes) then lists those it has
 * ("en->de, de->en"), for the door's message. */
srv_err srv_pipe_glossary(srv_pipe *p, const srv_glossary *g, const char *src, const char *tgt,
                          char *pairs, size_t n);

/* Splits and tokenizes n texts into p's jobs (the fields "made by" above).
 * Returns SRV_OK, or SRV_ERR_TOO_LONG (a unit over max_tokens, not
 * cut_long), SRV_ERR_TOO_MANY (more jobs than max_jobs), SRV_ERR_NOMEM or
 * SRV_ERR_INTERNAL (the segmenter's or tokenizer's message) with *f
 * saying where. An empty or whitespace-only unit gets no job. */
srv_err srv_pipe_make(srv_pipe *p, const char *const *texts, const size_t *lens, int n,
                      srv_pipe_fail *f);

/* Frees what p holds outside the arena: the jobs' results and source ids,
 * the sentences. p may be freed after, or made again. */
void srv_pipe_free(srv_pipe *p);

/* Text i's split, or NULL when it is one job (or empty). */
const srv_split *srv_pipe_split_of(const srv_pipe *p, int text);

/* After every job is done: hypotheses of text i (1 for an empty text; the
 * fewest of its sentences'). */
int srv_pipe_n_hyps(const srv_pipe *p, int text);
int srv_pipe_split_n_hyps(const srv_pipe *p, const srv_split *sp);

/* Hypothesis hyp of job as text (malloc'd), each unknown target token
 * (<unk>, which detokenizes to nothing) replaced by the text of the unknown
 * source piece it copies: for hypothesis 0 the one it attends to most (the
 * captured attention summed over layers and heads), for the others the one
 * of the same rank when the counts agree; for hypothesis 0 of a job with
 * glossary terms and attention, the terms placed (srv_gloss_place). Without
 * unknown source pieces (or raw_unknown) nor terms, exactly the detokenized
 * ids. *offsets (when not NULL):
 * each token's [start, end) in bytes of the text returned (a copy is its
 * token's span). NULL when out of memory. */
char *srv_pipe_decode(const srv_pipe *p, int job, int hyp, size_t **offsets);

/* Hypothesis hyp of every sentence of sp between the text's own
 * separators (malloc'd; NULL when out of memory). ranges (2n, or NULL):
 * each sentence's bytes in it; *score: the sentences' scores weighted by
 * their tokens. */
char *srv_pipe_join(const srv_pipe *p, const srv_split *sp, int hyp, size_t *ranges,
                    double *score);

/* Text i's translation, hypothesis hyp (malloc'd; "" for an empty text),
 * or NULL when out of memory. */
char *srv_pipe_text(const srv_pipe *p, int text, int hyp);

/* Text i's word alignment (spans.h): one block per sentence that captured
 * attention, its source tokens' bytes in src (src_n: the text as given to
 * srv_pipe_make), its best hypothesis's tokens' bytes in
 * srv_pipe_text(p, i, 0), the attention of the last captured layer
 * averaged over the captured heads. The number of blocks into *out
 * (malloc'd; srv_align_free), 0 when none captured, -1 out of memory. */
int srv_pipe_align(const srv_pipe *p, int text, const char *src, size_t src_n, srv_align **out);

#endif /* SRV_PIPELINE_H */
