/*
 * test_op_record.c - a recording backend: the CPU backend's table with
 * every entry wrapped so that each call is written to a log (the op, its
 * sizes and its pointers) before it runs. A running decode is recorded step
 * by step; the checks are what capturing a decoder step into a CUDA graph
 * needs (a graph replays a fixed op sequence on fixed buffers):
 *   - the same decode launched again, and launched through
 *     td_run_step_shortest instead of td_run_step, issues the same ops with
 *     the same arguments, step for step (no first-time work, no
 *     launch-dependent path);
 *   - within a step, everything up to beam_step runs without a host wait
 *     (no download, sync or allocation): one capturable sequence;
 *   - a step's one transfer to the host is the beam_step op's output
 *     (2 rows + the sentences, int32), after beam_step and before the sync;
 *     a sentence's search state comes back only when it ends;
 *   - given a backend that captures (step_begin/step_end, backend.h), the
 *     bracket holds exactly those ops, the same as without it, and a
 *     failed capture is issued again once, with the same results.
 */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define LOG_MAX 200000
#define LINE 160

static char (*g_log)[LINE];
static int g_n;
static const td_backend_ops *g_real;

/* A backend that captures steps (the CUDA graphs' contract, backend.h):
 * g_capture 1: step_begin says it captures, the ops run as they come (the
 * same work); 2 besides, the first capture fails: its ops are swallowed
 * (a failed capture runs nothing) and step_end asks for them again. */
static int g_capture, g_fail_left, g_swallow;

/* The self-attention caches and their spare rotate at every reordering
 * (td_cache_reorder swaps pointers): a replay meets them in another order,
 * so the log names them as one pool ("cache+offset"); a CUDA graph of the
 * step must take them as parameters (or the step copy back instead). Every
 * other pointer is logged as it is. */
static const void *g_cache[2 * 64 + 1];
static int g_n_cache;
static size_t g_cache_bytes;

static const char *P(const void *p)
{
    static char ring[16][40];
    static int next;
    char *b = ring[next++ % 16];
    for (int i = 0; i < g_n_cache; i++) {
        const char *base = g_cache[i];
        if (p && (const char *)p >= base && (const char *)p < base + g_cache_bytes) {
            snprintf(b, 40, "cache+%td", (const char *)p - base);
            return b;
        }
    }
    snprintf(b, 40, "%p", p);
    return b;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void rec(const char *fmt, ...)
{
    ck_assert_int_lt(g_n, LOG_MAX);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_log[g_n++], LINE, fmt, ap);
    va_end(ap);
}

static void *r_alloc(td_backend *be, size_t bytes)
{
    rec("alloc %zu", bytes);
    return g_real->alloc(be, bytes);
}
static void r_dealloc(td_backend *be, void *p)
{
    rec("dealloc %s", P(p));
    if (!g_swallow)
        g_real->dealloc(be, p);
}
static void r_upload(td_backend *be, void *dst, const void *src, size_t bytes)
{
    rec("upload %s %s %zu", P(dst), P(src), bytes);
    if (!g_swallow)
        g_real->upload(be, dst, src, bytes);
}
static void r_download(td_backend *be, void *dst, const void *src, size_t bytes)
{
    rec("download %s %s %zu", P(dst), P(src), bytes);
    if (!g_swallow)
        g_real->download(be, dst, src, bytes);
}
static void r_copy(td_backend *be, void *dst, const void *src, size_t bytes)
{
    rec("copy %s %s %zu", P(dst), P(src), bytes);
    if (!g_swallow)
        g_real->copy(be, dst, src, bytes);
}
static void r_memset0(td_backend *be, void *dst, size_t bytes)
{
    rec("memset0 %s %zu", P(dst), bytes);
    if (!g_swallow)
        g_real->memset0(be, dst, bytes);
}
static int r_sync(td_backend *be, char *err, size_t errlen)
{
    rec("sync");
    return g_real->sync(be, err, errlen);
}
static void r_linear(td_backend *be, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                     int64_t n, const td_weight *w, const td_weight *bias)
{
    rec("linear %s %lld %s %lld %lld %s %s", P(y), (long long)ld_y, P(x), (long long)ld_x, (long long)n, P(w), P(bias));
    if (!g_swallow)
        g_real->linear(be, y, ld_y, x, ld_x, n, w, bias);
}
static void r_bias_act(td_backend *be, float *x, int64_t n, int64_t d, const td_weight *bias,
                       td_activation act)
{
    rec("bias_act %s %lld %lld %s %d", P(x), (long long)n, (long long)d, P(bias), (int)act);
    if (!g_swallow)
        g_real->bias_act(be, x, n, d, bias, act);
}
static void r_layer_norm(td_backend *be, float *y, const float *x, const float *res,
                         float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                         const td_weight *beta, float eps)
{
    rec("layer_norm %s %s %s %s %lld %lld %s", P(y), P(x), P(res), P(sum_out), (long long)n, (long long)d, P(gamma));
    if (!g_swallow)
        g_real->layer_norm(be, y, x, res, sum_out, n, d, gamma, beta, eps);
}
static void r_add(td_backend *be, float *y, const float *x, int64_t n, int64_t d)
{
    rec("add %s %s %lld %lld", P(y), P(x), (long long)n, (long long)d);
    if (!g_swallow)
        g_real->add(be, y, x, n, d);
}
static void r_embed(td_backend *be, float *y, const td_weight *table, const int32_t *ids,
                    int64_t n, float scale, const float *pos, const int32_t *positions)
{
    rec("embed %s %s %s %lld %s", P(y), P(table), P(ids), (long long)n, P(positions));
    if (!g_swallow)
        g_real->embed(be, y, table, ids, n, scale, pos, positions);
}
static void r_rope(td_backend *be, float *x, int n_seq, int n_t, int64_t ld, int64_t seq_stride,
                   int n_heads, int head_dim, int pos0, const float *cos_sin)
{
    rec("rope %s %d %d %d", P(x), n_seq, n_t, pos0);
    if (!g_swallow)
        g_real->rope(be, x, n_seq, n_t, ld, seq_stride, n_heads, head_dim, pos0, cos_sin);
}
static void r_rope_rows(td_backend *be, float *x, int64_t n, int64_t ld, int n_heads,
                        int head_dim, const int32_t *pos, const float *cos_sin)
{
    rec("rope_rows %s %lld %s", P(x), (long long)n, P(pos));
    if (!g_swallow)
        g_real->rope_rows(be, x, n, ld, n_heads, head_dim, pos, cos_sin);
}
static void r_attention(td_backend *be, const td_attn_args *a)
{
    rec("attention %s %s %d %d %d %s %s %d %s", P(a->q), P(a->out), a->n_seq, a->n_q, a->n_k, P(a->kv_len), P(a->q_pos), a->causal, P(a->probs));
    if (!g_swallow)
        g_real->attention(be, a);
}
static void r_logprobs_topk(td_backend *be, float *logits, int64_t n, int64_t vocab,
                            const int32_t *suppress, int n_suppress, int force_eos,
                            const int32_t *force_rows, int eos_id, const float *row_bias, int k,
                            float *out_val, int32_t *out_idx)
{
    rec("logprobs_topk %s %lld %s %s %d %s", P(logits), (long long)n, P(force_rows), P(row_bias), k, P(out_val));
    if (!g_swallow)
        g_real->logprobs_topk(be, logits, n, vocab, suppress, n_suppress, force_eos, force_rows,
                          eos_id, row_bias, k, out_val, out_idx);
}
static void r_gather_rows(td_backend *be, float *dst, const float *src, const int32_t *index,
                          int64_t n, int64_t row_elems, int64_t ld, const int32_t *row_len)
{
    rec("gather_rows %s %s %s %lld %lld %lld %s", P(dst), P(src), P(index), (long long)n, (long long)row_elems, (long long)ld, P(row_len));
    if (!g_swallow)
        g_real->gather_rows(be, dst, src, index, n, row_elems, ld, row_len);
}
static void r_scatter_rows(td_backend *be, float *dst, int64_t ld_dst, const float *src,
                           int64_t ld_src, const int32_t *index, int64_t n, int64_t row_elems)
{
    rec("scatter_rows %s %s %s %lld %lld", P(dst), P(src), P(index), (long long)n, (long long)row_elems);
    if (!g_swallow)
        g_real->scatter_rows(be, dst, ld_dst, src, ld_src, index, n, row_elems);
}
static void r_beam_step(td_backend *be, const td_beam_args *a)
{
    rec("beam_step %s %lld %d %s %d %s %s %s", P(a->val), (long long)a->n_rows, a->ks, P(a->sent), a->n_sent, P(a->st_f), P(a->st_i), P(a->out));
    if (!g_swallow)
        g_real->beam_step(be, a);
}

static int r_step_begin(td_backend *be)
{
    (void)be;
    rec("step_begin");
    g_swallow = g_capture == 2 && g_fail_left > 0;
    return 1;
}
static int r_step_end(td_backend *be)
{
    (void)be;
    rec("step_end");
    if (!g_swallow)
        return 0;
    g_swallow = 0;
    g_fail_left--;
    return 1;
}

static td_backend_ops recording(const td_backend_ops *real)
{
    td_backend_ops o = *real; /* destroy and the weights' entries: not in a decode */
    o.alloc = r_alloc;
    o.dealloc = r_dealloc;
    o.upload = r_upload;
    o.download = r_download;
    o.copy = r_copy;
    o.memset0 = r_memset0;
    o.sync = r_sync;
    o.linear = r_linear;
    o.bias_act = r_bias_act;
    o.layer_norm = r_layer_norm;
    o.add = r_add;
    o.embed = r_embed;
    o.rope = r_rope;
    o.rope_rows = r_rope_rows;
    o.attention = r_attention;
    o.logprobs_topk = r_logprobs_topk;
    o.gather_rows = r_gather_rows;
    o.scatter_rows = r_scatter_rows;
    o.beam_step = r_beam_step;
    o.reserve_linear = NULL;
    o.step_begin = g_capture ? r_step_begin : NULL;
    o.step_end = g_capture ? r_step_end : NULL;
    return o;
}

/* A decode's log: each step's first line (steps[k]) and the end; its
 * results written out (tokens and score bits of each hypothesis). */
typedef struct trace {
    char (*log)[LINE];
    int n, steps[64], n_steps;
    char results[4096];
} trace;

#define N_SENT 3

/* Three sentences of different lengths, beams and max_lengths (so that
 * they end at different steps and the rows are compacted), recorded from
 * td_run_add to the last td_run_take; shortest: step through
 * td_run_step_shortest(INT_MAX) instead of td_run_step. */
static trace record_decode(td_worker *w, int shortest, int capture)
{
    static const int32_t s0[] = {5, 9, 13, 2, 0}, s1[] = {7, 3, 0}, s2[] = {11, 4, 8, 6, 12, 1, 0};
    const int32_t *src[N_SENT] = {s0, s1, s2};
    int len[N_SENT] = {5, 3, 7};
    td_decode_opts o[N_SENT];
    const td_decode_opts *op[N_SENT];
    for (int i = 0; i < N_SENT; i++) {
        td_decode_opts_default(w->m, &o[i]);
        o[i].beam_size = i == 1 ? 1 : 2 + i;
        o[i].num_hypotheses = 1;
        o[i].max_length = 4 + 3 * i;
        op[i] = &o[i];
    }
    static trace tr; /* large: not on the stack */
    memset(&tr, 0, sizeof tr);
    g_capture = capture;
    g_fail_left = capture == 2;
    g_swallow = 0;
    tr.log = malloc(sizeof(*tr.log) * LOG_MAX);
    ck_assert_ptr_nonnull(tr.log);
    g_log = tr.log;
    g_n = 0;
    const int L = w->m->cfg.decoder_layers;
    ck_assert_int_le(L, 64);
    g_n_cache = 0;
    for (int l = 0; l < L; l++) {
        g_cache[g_n_cache++] = w->self_k[l];
        g_cache[g_n_cache++] = w->self_v[l];
    }
    g_cache[g_n_cache++] = w->cache_tmp;
    g_cache_bytes = (size_t)w->cap.rows * w->cap.len * w->m->cfg.d_model * sizeof(float);
    const td_backend_ops *real = w->be->ops;
    td_backend_ops rec_ops = recording(real);
    g_real = real;
    w->be->ops = &rec_ops;
    char err[512];
    td_seq seq[N_SENT];
    ck_assert_msg(td_run_add(w, src, len, N_SENT, op, seq, err, sizeof err) == 0, "%s", err);
    int got = 0;
    while (got < N_SENT) {
        ck_assert_int_lt(tr.n_steps, 64);
        tr.steps[tr.n_steps++] = g_n;
        int k = shortest ? td_run_step_shortest(w, INT_MAX, err, sizeof err)
                         : td_run_step(w, err, sizeof err);
        ck_assert_msg(k >= 0, "%s", err);
        td_seq q;
        td_result r;
        while (td_run_take(w, &q, &r) == 1) {
            size_t at = strlen(tr.results);
            for (int h = 0; h < r.n_hyps; h++) {
                uint32_t bits;
                memcpy(&bits, &r.hyps[h].score, sizeof bits);
                at += (size_t)snprintf(tr.results + at, sizeof tr.results - at, "[%d:%08x",
                                       (int)(q - seq[0]), bits);
                for (int u = 0; u < r.hyps[h].n_tokens; u++)
                    at += (size_t)snprintf(tr.results + at, sizeof tr.results - at, " %d",
                                           r.hyps[h].tokens[u]);
                at += (size_t)snprintf(tr.results + at, sizeof tr.results - at, "]");
            }
            td_result_free(&r);
            got++;
        }
    }
    w->be->ops = real;
    tr.n = g_n;
    return tr;
}

static int starts(const char *line, const char *op)
{
    size_t n = strlen(op);
    return !strncmp(line, op, n) && (line[n] == ' ' || line[n] == 0);
}

/* The structure of step k of tr (see the file comment). */
static void check_step(const trace *tr, int k)
{
    const int a = tr->steps[k], b = k + 1 < tr->n_steps ? tr->steps[k + 1] : tr->n;
    int beam = -1, sync = -1, topk = -1, downloads = 0;
    for (int i = a; i < b; i++) {
        const char *l = tr->log[i];
        ck_assert_msg(!starts(l, "alloc") && !starts(l, "dealloc") && !starts(l, "memset0"),
                      "step %d allocates: %s", k, l);
        if (starts(l, "logprobs_topk"))
            topk = i;
        if (starts(l, "beam_step")) {
            ck_assert_int_eq(beam, -1);
            beam = i;
        }
        if (starts(l, "sync") && sync < 0)
            sync = i;
        if (sync < 0 && starts(l, "download"))
            downloads++;
        if (beam < 0)
            ck_assert_msg(!starts(l, "download") && !starts(l, "sync"),
                          "step %d waits for the host before beam_step: %s", k, l);
    }
    ck_assert_msg(topk >= 0 && beam > topk && sync > beam, "step %d: topk %d beam %d sync %d", k,
                  topk, beam, sync);
    ck_assert_int_eq(downloads, 1);
    ck_assert_msg(starts(tr->log[sync - 1], "download"), "step %d: %s before the sync", k,
                  tr->log[sync - 1]);
    /* its size: 2 * rows + sentences int32, the rows and sentences beam_step was given */
    long long rows = 0, n_sent = 0;
    size_t bytes = 0;
    ck_assert_int_eq(sscanf(tr->log[beam], "%*s %*s %lld %*d %*s %lld", &rows, &n_sent), 2);
    ck_assert_int_eq(sscanf(tr->log[sync - 1], "%*s %*s %*s %zu", &bytes), 1);
    ck_assert_int_eq((long long)bytes, (2 * rows + n_sent) * (long long)sizeof(int32_t));
}

static void load(td_model **m, td_worker **w)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/marian_tied", TD_TEST_DATA);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(m, dir, &lo, err, sizeof err) == 0, "%s", err);
    td_worker_opts wo = {.max_batch = 4, .max_length = 16, .max_beam = 4, .n_threads = 1};
    ck_assert_msg(td_worker_init(w, *m, &wo, err, sizeof err) == 0, "%s", err);
}

static int is_bracket(const char *l) { return starts(l, "step_begin") || starts(l, "step_end"); }

/* tr less its bracket lines equals ref, line for line. */
static void same_but_brackets(const trace *ref, const trace *tr)
{
    int j = 0;
    for (int i = 0; i < tr->n; i++) {
        if (is_bracket(tr->log[i]))
            continue;
        ck_assert_int_lt(j, ref->n);
        ck_assert_msg(!strcmp(ref->log[j], tr->log[i]), "op %d: %s, captured %s", j,
                      ref->log[j], tr->log[i]);
        j++;
    }
    ck_assert_int_eq(j, ref->n);
}

START_TEST(test_same_ops_each_launch)
{
    td_model *m = NULL;
    td_worker *w = NULL;
    load(&m, &w);
    trace first = record_decode(w, 0, 0), again = record_decode(w, 0, 0),
          shortest = record_decode(w, 1, 0);
    ck_assert_int_ge(first.n_steps, 8); /* the longest sentence's max_length: 10 */
    const trace *other[2] = {&again, &shortest};
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(other[t]->n, first.n);
        ck_assert_int_eq(other[t]->n_steps, first.n_steps);
        for (int i = 0; i < first.n; i++)
            ck_assert_msg(!strcmp(first.log[i], other[t]->log[i]), "op %d: %s, then %s", i,
                          first.log[i], other[t]->log[i]);
        ck_assert_str_eq(first.results, other[t]->results);
    }
    int finish_reads = 0;
    for (int k = 0; k < first.n_steps; k++)
        check_step(&first, k);
    /* the search state comes back once per sentence (two downloads each:
     * floats and lists), after its step's sync */
    for (int i = 0; i < first.n; i++)
        finish_reads += starts(first.log[i], "download");
    ck_assert_int_eq(finish_reads, first.n_steps + 2 * N_SENT);
    free(first.log);
    free(again.log);
    free(shortest.log);
    td_worker_free(w);
    td_model_free(m);
}
END_TEST

/* A backend that captures steps: the bracket holds each step's ops from
 * the first after its uploads to beam_step, the same ops as without it;
 * a failed capture is issued again, once, and the results are the same. */
START_TEST(test_capture_bracket)
{
    td_model *m = NULL;
    td_worker *w = NULL;
    load(&m, &w);
    trace eager = record_decode(w, 0, 0), cap = record_decode(w, 0, 1),
          failed = record_decode(w, 0, 2);
    same_but_brackets(&eager, &cap);
    ck_assert_str_eq(eager.results, cap.results);
    ck_assert_str_eq(eager.results, failed.results);
    ck_assert(eager.results[0] != 0);
    for (int k = 0; k < cap.n_steps; k++) {
        const int a = cap.steps[k], b = k + 1 < cap.n_steps ? cap.steps[k + 1] : cap.n;
        int begin = -1, end = -1;
        for (int i = a; i < b; i++) {
            if (starts(cap.log[i], "step_begin")) {
                ck_assert_int_eq(begin, -1);
                begin = i;
            }
            if (starts(cap.log[i], "step_end")) {
                ck_assert_int_eq(end, -1);
                end = i;
            }
        }
        ck_assert_msg(begin > a && end > begin, "step %d: bracket %d..%d", k, begin, end);
        for (int i = a; i < begin; i++)
            ck_assert_msg(starts(cap.log[i], "upload"), "step %d before the bracket: %s", k,
                          cap.log[i]);
        for (int i = begin + 1; i < end; i++)
            ck_assert_msg(!starts(cap.log[i], "upload") && !starts(cap.log[i], "download") &&
                              !starts(cap.log[i], "sync") && !starts(cap.log[i], "alloc") &&
                              !starts(cap.log[i], "dealloc") && !starts(cap.log[i], "memset0"),
                          "step %d captures a host wait: %s", k, cap.log[i]);
        ck_assert_msg(starts(cap.log[end - 1], "beam_step"), "step %d: %s ends the bracket", k,
                      cap.log[end - 1]);
        ck_assert_msg(starts(cap.log[end + 1], "download"), "step %d: %s after the bracket", k,
                      cap.log[end + 1]);
    }
    /* the failed capture: its ops, then the same ops again, unbracketed */
    const int a = failed.steps[0];
    int begin = a, end;
    while (!starts(failed.log[begin], "step_begin"))
        begin++;
    for (end = begin; !starts(failed.log[end], "step_end"); end++)
        ;
    const int len = end - begin - 1;
    ck_assert_int_gt(len, 10);
    for (int i = 0; i < len; i++)
        ck_assert_str_eq(failed.log[begin + 1 + i], failed.log[end + 1 + i]);
    ck_assert(starts(failed.log[end + 1 + len], "download"));
    free(eager.log);
    free(cap.log);
    free(failed.log);
    td_worker_free(w);
    td_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("op_record");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, test_same_ops_each_launch);
    tcase_add_test(tc, test_capture_bracket);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
