/*
 * bench_engine.c - engine throughput on a transformer-base-shaped random
 * model (6+6 layers, d_model 512, 8 heads, ffn 2048, vocab 32000).
 *
 *   bench_engine --make-model DIR      write the random model (Marian layout)
 *   bench_engine --model DIR [--device cpu|cuda[:N]] [--threads N] [--src-len 24]
 *                [--max-length 32] [--repeat 3] [--dtype T] [--precision P]
 *       prints one JSON line per configuration (greedy / beam 4 at batch 1
 *       and 32): generated target tokens per second, best of --repeat runs.
 *   bench_engine --model DIR --ids FILE --batch N --beam N [--threads N] [--dtype T]
 *                [--repeat R]
 *       real sources: FILE has one sentence a line as token ids (`transformerd
 *       tokenize`), run in order in batches of N (the model's max_length);
 *       (--max-length: generated tokens incl. </s>, else the model's default);
 *       prints one JSON line: generated tokens (without </s>) per second of
 *       td_translate_batch time, best of R passes (bench/peers/run.sh).
 *       --prefix ID forces ID first in every hypothesis (a multilingual
 *       model's target language, bench/m2m/run.sh; it counts as a token);
 *       --out FILE writes the first pass's best hypotheses as ids, a line each.
 *
 * Random weights never emit </s>, so every hypothesis runs to max_length and
 * the token count is exact. bench/engine/run.sh runs this and transformers'
 * generate on the same model side by side and prints the ratios.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "translator.h"

#define D 512
#define FFN 2048
#define LAYERS 6
#define HEADS 8
#define VOCAB 32000
#define MAXPOS 512
#define PI 3.14159265358979323846

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static float randn(void)
{
    /* xorshift + Box-Muller: reproducible, no libc rand state */
    double u1, u2;
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    u1 = ((g_rng >> 11) + 1.0) / 9007199254740993.0;
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    u2 = (g_rng >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2));
}

typedef struct tspec {
    char name[192];
    int rows, cols; /* cols == 0: vector of rows */
    float std, mean;
} tspec;

static int add_linear(tspec *t, int n, const char *p, int out, int in)
{
    snprintf(t[n].name, sizeof t[n].name, "%s.weight", p);
    t[n].rows = out, t[n].cols = in, t[n].std = 0.02f, t[n].mean = 0;
    n++;
    snprintf(t[n].name, sizeof t[n].name, "%s.bias", p);
    t[n].rows = out, t[n].cols = 0, t[n].std = 0.02f, t[n].mean = 0;
    return n + 1;
}

static int add_ln(tspec *t, int n, const char *p)
{
    snprintf(t[n].name, sizeof t[n].name, "%s.weight", p);
    t[n].rows = D, t[n].cols = 0, t[n].std = 0, t[n].mean = 1;
    n++;
    snprintf(t[n].name, sizeof t[n].name, "%s.bias", p);
    t[n].rows = D, t[n].cols = 0, t[n].std = 0, t[n].mean = 0;
    return n + 1;
}

static int make_model(const char *dir)
{
    static tspec t[512];
    int n = 0;
    char p[160];
    snprintf(t[n].name, sizeof t[n].name, "model.shared.weight");
    t[n].rows = VOCAB, t[n].cols = D, t[n].std = 0.02f, n++;
    snprintf(t[n].name, sizeof t[n].name, "final_logits_bias");
    t[n].rows = 1, t[n].cols = VOCAB, t[n].std = 0, n++;
    for (int side = 0; side < 2; side++)
        for (int l = 0; l < LAYERS; l++) {
            const char *s = side ? "decoder" : "encoder";
            const char *proj[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
            for (int k = 0; k < 4; k++) {
                snprintf(p, sizeof p, "model.%s.layers.%d.self_attn.%s", s, l, proj[k]);
                n = add_linear(t, n, p, D, D);
            }
            snprintf(p, sizeof p, "model.%s.layers.%d.self_attn_layer_norm", s, l);
            n = add_ln(t, n, p);
            if (side) {
                for (int k = 0; k < 4; k++) {
                    snprintf(p, sizeof p, "model.%s.layers.%d.encoder_attn.%s", s, l, proj[k]);
                    n = add_linear(t, n, p, D, D);
                }
                snprintf(p, sizeof p, "model.%s.layers.%d.encoder_attn_layer_norm", s, l);
                n = add_ln(t, n, p);
            }
            snprintf(p, sizeof p, "model.%s.layers.%d.fc1", s, l);
            n = add_linear(t, n, p, FFN, D);
            snprintf(p, sizeof p, "model.%s.layers.%d.fc2", s, l);
            n = add_linear(t, n, p, D, FFN);
            snprintf(p, sizeof p, "model.%s.layers.%d.final_layer_norm", s, l);
            n = add_ln(t, n, p);
        }
    mkdir(dir, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_engine: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(f,
            "{\"model_type\": \"marian\", \"architectures\": [\"MarianMTModel\"],\n"
            " \"d_model\": %d, \"encoder_layers\": %d, \"decoder_layers\": %d,\n"
            " \"encoder_attention_heads\": %d, \"decoder_attention_heads\": %d,\n"
            " \"encoder_ffn_dim\": %d, \"decoder_ffn_dim\": %d, \"activation_function\": \"swish\",\n"
            " \"max_position_embeddings\": %d, \"scale_embedding\": true, \"vocab_size\": %d,\n"
            " \"decoder_vocab_size\": %d, \"share_encoder_decoder_embeddings\": true,\n"
            " \"pad_token_id\": %d, \"eos_token_id\": 0, \"decoder_start_token_id\": %d,\n"
            " \"forced_eos_token_id\": 0, \"tie_word_embeddings\": true}\n",
            D, LAYERS, LAYERS, HEADS, HEADS, FFN, FFN, MAXPOS, VOCAB, VOCAB, VOCAB - 1, VOCAB - 1);
    fclose(f);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"bad_words_ids\": [[%d]], \"decoder_start_token_id\": %d, \"eos_token_id\": 0,\n"
               " \"forced_eos_token_id\": 0, \"pad_token_id\": %d, \"num_beams\": 4, \"max_length\": 512}\n",
            VOCAB - 1, VOCAB - 1, VOCAB - 1);
    fclose(f);

    /* header */
    size_t hcap = 1 << 16, hlen = 0, off = 0;
    char *h = malloc(hcap);
    if (!h)
        return 1;
    hlen += (size_t)snprintf(h + hlen, hcap - hlen, "{");
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].rows * (size_t)(t[i].cols ? t[i].cols : 1);
        if (t[i].cols)
            hlen += (size_t)snprintf(h + hlen, hcap - hlen,
                                     "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                     i ? "," : "", t[i].name, t[i].rows, t[i].cols, off, off + 4 * cnt);
        else
            hlen += (size_t)snprintf(h + hlen, hcap - hlen,
                                     "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                     i ? "," : "", t[i].name, t[i].rows, off, off + 4 * cnt);
        off += 4 * cnt;
    }
    hlen += (size_t)snprintf(h + hlen, hcap - hlen, "}");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    if (!f)
        return 1;
    uint64_t hl = hlen;
    fwrite(&hl, 8, 1, f);
    fwrite(h, 1, hlen, f);
    free(h);
    float *buf = malloc((size_t)VOCAB * D * sizeof(float));
    if (!buf)
        return 1;
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].rows * (size_t)(t[i].cols ? t[i].cols : 1);
        for (size_t j = 0; j < cnt; j++)
            buf[j] = t[i].mean + t[i].std * randn();
        if (fwrite(buf, sizeof(float), cnt, f) != cnt) {
            fprintf(stderr, "bench_engine: short write to %s\n", path);
            return 1;
        }
    }
    free(buf);
    fclose(f);
    printf("wrote %s (%d tensors)\n", dir, n);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --ids mode: the sentences of path in batches of `batch`. */
static int run_ids(td_model *m, const char *path, int batch, int beam, int threads, int repeat,
                   const char *dtype, int max_length, int prefix, const char *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_engine: cannot open %s\n", path);
        return 1;
    }
    int cap = 1024, n = 0, max_len = 2;
    int32_t **src = malloc((size_t)cap * sizeof *src);
    int *len = malloc((size_t)cap * sizeof *len);
    char line[65536];
    while (src && len && fgets(line, sizeof line, f)) {
        if (n == cap) {
            cap *= 2;
            src = realloc(src, (size_t)cap * sizeof *src);
            len = realloc(len, (size_t)cap * sizeof *len);
            if (!src || !len)
                break;
        }
        int32_t *ids = malloc(sizeof line / 2 * sizeof *ids);
        int k = 0;
        for (char *tok = strtok(line, " \n"); tok && ids; tok = strtok(NULL, " \n"))
            ids[k++] = (int32_t)atoi(tok);
        if (!ids || k == 0) {
            free(ids);
            continue;
        }
        src[n] = ids;
        len[n++] = k;
        max_len = k > max_len ? k : max_len;
    }
    fclose(f);
    if (!src || !len || n == 0) {
        fprintf(stderr, "bench_engine: no sentences in %s\n", path);
        return 1;
    }
    char err[1024];
    td_worker_opts wo = {.max_batch = batch, .max_src_len = max_len, .max_beam = beam,
                         .max_length = max_length, .n_threads = threads};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, sizeof err)) {
        fprintf(stderr, "bench_engine: %s\n", err);
        return 1;
    }
    td_decode_opts o;
    td_decode_opts_default(m, &o);
    o.beam_size = beam;
    if (max_length > 0)
        o.max_length = max_length;
    const int32_t forced = prefix;
    if (prefix >= 0) {
        o.prefix = &forced;
        o.n_prefix = 1;
    }
    FILE *fo = NULL;
    if (out && !(fo = fopen(out, "w"))) {
        fprintf(stderr, "bench_engine: cannot write %s\n", out);
        return 1;
    }
    td_result *res = calloc((size_t)batch, sizeof *res);
    const int eos = td_model_config(m)->eos_token_id;
    double best = 1e30;
    long toks = 0;
    for (int r = 0; r < repeat; r++) {
        double t = 0;
        toks = 0;
        for (int i = 0; i < n; i += batch) {
            const int b = n - i < batch ? n - i : batch;
            double t0 = now();
            if (td_translate_batch(w, (const int32_t *const *)(src + i), len + i, b, &o, res, err,
                                   sizeof err)) {
                fprintf(stderr, "bench_engine: %s\n", err);
                return 1;
            }
            t += now() - t0;
            for (int j = 0; j < b; j++) {
                const td_hypothesis *h = &res[j].hyps[0];
                toks += h->n_tokens - (h->n_tokens > 0 && h->tokens[h->n_tokens - 1] == eos);
                for (int k = 0; fo && r == 0 && k < h->n_tokens; k++)
                    fprintf(fo, k ? " %d" : "%d", h->tokens[k]);
                if (fo && r == 0)
                    fputc('\n', fo);
                td_result_free(&res[j]);
            }
        }
        best = t < best ? t : best;
    }
    printf("{\"engine\": \"transformerd\", \"dtype\": \"%s\", \"batch\": %d, \"beam\": %d, "
           "\"threads\": %d, \"sentences\": %d, \"tokens\": %ld, \"seconds\": %.4f, "
           "\"tokens_per_s\": %.1f}\n",
           dtype ? dtype : "auto", batch, beam, threads, n, toks, best, (double)toks / best);
    if (fo)
        fclose(fo);
    td_worker_free(w);
    for (int i = 0; i < n; i++)
        free(src[i]);
    free(src), free(len), free(res);
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *device = "cpu", *dtype = NULL, *precision = NULL;
    const char *ids = NULL;
    int threads = 0, src_len = 24, max_length = 32, repeat = 3, batch = 32, beam = 4;
    int max_length_set = 0, prefix = -1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--make-model") && i + 1 < argc)
            return make_model(argv[i + 1]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
            dtype = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc)
            precision = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--src-len") && i + 1 < argc)
            src_len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-length") && i + 1 < argc)
            max_length = atoi(argv[++i]), max_length_set = 1;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--beam") && i + 1 < argc)
            beam = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefix") && i + 1 < argc)
            prefix = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "usage: bench_engine --make-model DIR | --model DIR [--device D] [--threads N] "
                            "[--src-len N] [--max-length N] [--repeat N] [--dtype T] "
                            "[--precision P] [--ids FILE --batch N --beam N [--prefix ID] "
                            "[--out FILE]]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "bench_engine: --model DIR (make one with --make-model DIR)\n");
        return 2;
    }
    char err[1024];
    td_model *m = NULL;
    td_load_opts lo = {.device = device, .n_threads = threads, .dtype = dtype,
                       .precision = precision};
    if (td_model_load(&m, model, &lo, err, sizeof err)) {
        fprintf(stderr, "bench_engine: %s\n", err);
        return 1;
    }
    if (ids) {
        if (batch < 1 || beam < 1 || repeat < 1) {
            fprintf(stderr, "bench_engine: --batch, --beam and --repeat must be >= 1\n");
            return 2;
        }
        int rc = run_ids(m, ids, batch, beam, threads, repeat, dtype, max_length_set ? max_length : 0,
                         prefix, out);
        td_model_free(m);
        return rc;
    }
    td_worker_opts wo = {.max_batch = 32, .max_src_len = src_len, .max_length = max_length,
                         .max_beam = 4, .n_threads = threads};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, sizeof err)) {
        fprintf(stderr, "bench_engine: %s\n", err);
        return 1;
    }
    /* deterministic sources: ids in [1, vocab - 1) (31999 for the random
     * model), </s> last; peer_transformers.py makes the same ones */
    static int32_t srcbuf[32][512];
    const int32_t *src[32];
    int len[32];
    const td_config *cfg = td_model_config(m);
    if (src_len < 2 || src_len > 512 || cfg->vocab_size < 3) {
        fprintf(stderr, "bench_engine: --src-len must be in [2, 512]\n");
        return 2;
    }
    for (int i = 0; i < 32; i++) {
        for (int j = 0; j < src_len - 1; j++)
            srcbuf[i][j] = 1 + (int32_t)((i * 7919 + j * 104729) % (cfg->vocab_size - 2));
        srcbuf[i][src_len - 1] = cfg->eos_token_id;
        src[i] = srcbuf[i];
        len[i] = src_len;
    }
    int batches[2] = {1, 32}, beams[2] = {1, 4};
    td_result res[32];
    for (int bi = 0; bi < 2; bi++)
        for (int be = 0; be < 2; be++) {
            td_decode_opts o;
            td_decode_opts_default(m, &o);
            o.beam_size = beams[be];
            o.max_length = max_length;
            double best = 1e30;
            long toks = 0;
            for (int r = 0; r < repeat; r++) {
                double t0 = now();
                if (td_translate_batch(w, src, len, batches[bi], &o, res, err, sizeof err)) {
                    fprintf(stderr, "bench_engine: %s\n", err);
                    return 1;
                }
                double dt = now() - t0;
                toks = 0;
                for (int i = 0; i < batches[bi]; i++) {
                    toks += res[i].hyps[0].n_tokens;
                    td_result_free(&res[i]);
                }
                if (dt < best)
                    best = dt;
            }
            printf("{\"engine\": \"transformerd\", \"device\": \"%s\", \"dtype\": \"%s\", "
                   "\"precision\": \"%s\", \"batch\": %d, "
                   "\"beam\": %d, \"threads\": %d, \"src_len\": %d, \"tokens\": %ld, "
                   "\"seconds\": %.4f, \"tokens_per_s\": %.1f}\n",
                   device, td_model_weight_dtype(m), precision ? precision : "full",
                   batches[bi], beams[be], threads, src_len, toks, best, (double)toks / best);
            fflush(stdout);
        }
    td_worker_free(w);
    td_model_free(m);
    return 0;
}
