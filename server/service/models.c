/*
 * models.c - the model set (models.h): loading one model, the serving list
 * and the finishing list under one lock, reference counts, the memory
 * budget, and the manager thread that loads, reloads and frees.
 *
 * The life of a model: loaded and warmed on the manager thread (or the
 * main thread at start-up) with nobody else seeing it; published into the
 * serving list under the lock, with the set's reference; routed requests
 * take and put back references; replaced (reload) or unloaded, it moves to
 * the finishing list and the set's reference is dropped, so no new request
 * can find it; when its count reaches 0 (the last request completed) the
 * manager thread frees it: batcher (threads joined, nothing queued any
 * more), tokenizer, weights. Its bytes count against --max-memory from
 * the moment it is loaded until that free, so a reload needs room for a
 * second copy of the model while the first finishes.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "device.h"
#include "langcodes.h"
#include "cache.h"
#include "clock.h"
#include "argos.h"
#include "models.h"
#include "tokenizer.h"
#include "pool.h"
#include "segment.h"

struct srv_models {
    srv_server *s;
    pthread_mutex_t mu;  /* guards everything below */
    pthread_cond_t cv;   /* the manager: an operation queued, a reference dropped, stop */
    srv_model **serving; /* taking new requests, in configuration order */
    int n_serving;
    srv_model **finishing; /* replaced or unloaded: freed when their count is 0 */
    int n_finishing;
    int cap;             /* of both arrays */
    size_t used;         /* weights of serving + finishing */
    srv_pool *pool;      /* the engine workers every model shares (pool.h), made
                            with the first model */
    size_t worker_max;   /* the largest worker_bytes of serving + finishing: a
                            seat's worker at its maxima, whichever it serves */
    srv_model_op *q_head, *q_tail;
    int wake;            /* a put-away model has a request (model_wake) */
    int stop;
    int thread_on;
    pthread_t thread;
};

/* ---- names and languages ---------------------------------------------------- */

/* ISO 639-2/3 codes (tokenizer_config.json of OPUS-MT and ours: "eng",
 * "deu") to the 639-1 codes LibreTranslate and the directory names use. */
static const char *lang_code(const char *c)
{
    static const char *const t[][2] = {
        {"eng", "en"}, {"deu", "de"}, {"ger", "de"}, {"fra", "fr"}, {"fre", "fr"},
        {"spa", "es"}, {"ita", "it"}, {"por", "pt"}, {"nld", "nl"}, {"dut", "nl"},
        {"rus", "ru"}, {"zho", "zh"}, {"chi", "zh"}, {"jpn", "ja"}, {"ara", "ar"},
        {"pol", "pl"}, {"swe", "sv"}, {"ces", "cs"}, {"cze", "cs"}, {"fin", "fi"},
        {"ukr", "uk"}, {"dan", "da"}, {"ell", "el"}, {"gre", "el"}, {"hun", "hu"},
        {"ron", "ro"}, {"rum", "ro"}, {"tur", "tr"}, {"kor", "ko"}, {"hin", "hi"},
        {"nob", "nb"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i][0], c))
            return t[i][1];
    return c;
}

/* A language code as we accept it: 2..3 lower-case letters. */
static int is_code(const char *c)
{
    size_t n = strlen(c);
    if (n < 2 || n > 3)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)c[i]))
            return 0;
    return 1;
}

/* "SRC-TGT" into src and tgt (16 bytes each); -1 when malformed. */
static int split_langs(const char *langs, char *src, char *tgt)
{
    const char *dash = strchr(langs, '-');
    size_t a = dash ? (size_t)(dash - langs) : 0;
    if (!dash || a < 2 || a > 3 || strlen(dash + 1) < 2 || strlen(dash + 1) > 3)
        return -1;
    memcpy(src, langs, a);
    src[a] = 0;
    snprintf(tgt, 16, "%s", dash + 1);
    return is_code(src) && is_code(tgt) ? 0 : -1;
}

int srv_model_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

int srv_model_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > 127 || !strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!srv_model_name_char(name[i]))
            return 0;
    return 1;
}

int srv_model_langs_ok(const char *langs)
{
    char a[16], b[16];
    return strlen(langs) < 16 && split_langs(langs, a, b) == 0;
}

/* The pair from the directory's name: its last two parts when they look
 * like language codes ("opus-mt-en-de", "marian_en_de", "en-de"). */
static int langs_from_name(const char *name, char *src, char *tgt)
{
    char parts[8][16];
    int np = 0;
    for (const char *p = name; *p && np < 8;) {
        size_t k = strcspn(p, "-_");
        parts[np][0] = 0;
        if (k < sizeof parts[0]) {
            memcpy(parts[np], p, k);
            parts[np][k] = 0;
        }
        np++;
        p += k;
        if (*p)
            p++;
    }
    if (np < 2 || !is_code(parts[np - 2]) || !is_code(parts[np - 1]))
        return -1;
    snprintf(src, 16, "%s", parts[np - 2]);
    snprintf(tgt, 16, "%s", parts[np - 1]);
    return 0;
}

/* The pair from tokenizer_config.json's source_lang / target_lang (as
 * MarianTokenizer.save_pretrained writes them), in 639-1 where known. */
static int langs_from_tokenizer_config(const char *dir, char *src, char *tgt)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *s = json_object_get(root, "source_lang"), *t = json_object_get(root, "target_lang");
    int ok = json_is_string(s) && json_is_string(t);
    if (ok) {
        snprintf(src, 16, "%s", lang_code(json_string_value(s)));
        snprintf(tgt, 16, "%s", lang_code(json_string_value(t)));
        ok = is_code(src) && is_code(tgt);
    }
    json_decref(root);
    return ok ? 0 : -1;
}

/* The pair of an Argos Translate package: metadata.json's from_code and
 * to_code (refused there when absent or malformed). */
static int langs_from_package(const char *dir, char *src, char *tgt)
{
    srv_argos_meta meta;
    char err[256];
    if (srv_argos_meta_read(dir, &meta, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", dir, err);
        return -1;
    }
    if (strlen(meta.from_code) >= 16 || strlen(meta.to_code) >= 16) {
        fprintf(stderr, "transformerd: %s: metadata.json: language codes of more than 15 "
                "bytes\n", dir);
        return -1;
    }
    snprintf(src, 16, "%.15s", meta.from_code);
    snprintf(tgt, 16, "%.15s", meta.to_code);
    return 0;
}

void srv_model_dir_langs(const char *dir, const char *name, const char *given, char *src,
                         char *tgt)
{
    if (given[0] && split_langs(given, src, tgt) == 0)
        return;
    if (td_tok_argos_package(dir) && langs_from_package(dir, src, tgt) == 0)
        return;
    if (langs_from_tokenizer_config(dir, src, tgt) == 0)
        return;
    if (langs_from_name(name, src, tgt) == 0)
        return;
    snprintf(src, 16, "und");
    snprintf(tgt, 16, "und");
}

/* The model's names and pair (srv_model_dir_langs). */
static void describe(srv_model *sm, const srv_model_spec *spec)
{
    snprintf(sm->name, sizeof sm->name, "%s", spec->name);
    snprintf(sm->dir, sizeof sm->dir, "%s", spec->dir);
    snprintf(sm->langs_given, sizeof sm->langs_given, "%s", spec->langs);
    sm->package = td_tok_argos_package(spec->dir);
    srv_model_dir_langs(spec->dir, spec->name, spec->langs, sm->src_lang, sm->tgt_lang);
}

/* ---- a model's device failure ---------------------------------------------- */

void srv_model_engine_error(srv_model *sm, int engine_rc, const char *msg)
{
    /* Requests are validated against the worker's limits before they are
     * queued, so an engine failure is host memory (TD_EINVAL: that batch
     * fails, nothing else) or the device (TD_EDEVICE). */
    if (engine_rc != TD_EDEVICE)
        return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&sm->failed_claim, &expected, 1))
        return;
    /* a long message is cut to the field (precision said, for -O3's check) */
    snprintf(sm->failed_msg, sizeof sm->failed_msg, "%.*s", (int)(sizeof sm->failed_msg - 1),
             msg ? msg : "");
    atomic_store(&sm->failed, 1);
    srv_metrics_model_ready(sm->metrics, 0);
    if (sm->b)
        srv_batcher_halt(sm->b, TD_EDEVICE, sm->failed_msg);
    fprintf(stderr, "transformerd: model %s: device error, readiness is now 503: %s\n", sm->name,
            sm->failed_msg);
}

const char *srv_model_failed(const srv_model *sm)
{
    return atomic_load(&sm->failed) ? sm->failed_msg : NULL;
}

/* ---- one model -------------------------------------------------------------- */

static void model_free(srv_model *sm)
{
    if (!sm)
        return;
    /* its cached sentences go before its address can be another model's */
    if (sm->set)
        srv_cache_drop_model(sm->set->s->cache, sm);
    srv_batcher_free(sm->b);
    td_tok_free(sm->tok);
    td_model_free(sm->m);
    free(sm);
    /* glibc keeps what a model freed in its arenas (workers' scratch is
     * above the mmap threshold once glibc has raised it): without a trim
     * RSS doubled over ~80 reloads under load while the models' own
     * figure stayed; malloc_trim hands the free pages of every arena back. */
    malloc_trim(0); /* model_free's */
}

/* The batcher of a model put away took a request (a submitting thread):
 * the manager loads it again (wake_models). */
static void model_wake(void *ud)
{
    srv_model *sm = ud;
    srv_models *ms = sm->set;
    atomic_store(&sm->wake, 1);
    pthread_mutex_lock(&ms->mu);
    ms->wake = 1;
    pthread_cond_signal(&ms->cv);
    pthread_mutex_unlock(&ms->mu);
}

/* 1 when name is one of the comma-separated list (NULL: none). */
static int name_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n))
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* The shared workers' arenas moved (a seat's thread). */
static void pool_scratch(long delta, void *ud)
{
    srv_metrics_scratch(ud, delta);
}

void srv_model_defaults(const td_model *m, int package, td_decode_opts *o)
{
    td_decode_opts_default(m, o);
    if (package) {
        /* argos-translate's translate_batch: beam 4, length penalty 0.2 */
        o->beam_size = 4;
        o->length_penalty = 0.2f;
    }
    if (o->beam_size < 1 || o->beam_size > TD_MAX_BEAM)
        o->beam_size = 4;
    o->num_hypotheses = 1;
}

/* The limits and the batcher of a loaded model, as the options say. */
static int model_workers(srv_server *s, srv_model *sm, char *err, size_t errlen)
{
    const srv_opts *o = &s->o;
    const td_config *c = td_model_config(sm->m);
    srv_model_defaults(sm->m, sm->package, &sm->defaults);
    /* Each worker is allocated for max_batch x max_beam rows of max_length
     * tokens, so the beam limit is a flag rather than always TD_MAX_BEAM. */
    sm->max_beam = o->max_beam > 0 ? o->max_beam : sm->defaults.beam_size;
    if (sm->defaults.beam_size > sm->max_beam) {
        fprintf(stderr, "transformerd: model %s: its default beam_size %d exceeds --max-beam %d; "
                        "requests without beam_size use %d\n",
                sm->name, sm->defaults.beam_size, sm->max_beam, sm->max_beam);
        sm->defaults.beam_size = sm->max_beam;
    }
    int maxpos = c->max_position_embeddings;
    sm->max_input_tokens = o->max_input_tokens > 0 && o->max_input_tokens < maxpos
                               ? o->max_input_tokens
                               : maxpos;
    sm->max_length = td_generated_cap(c);
    srv_models *ms = s->models;
    if (!ms->pool) { /* the first model: the daemon's workers */
        const srv_pool_opts po = {.seats = o->workers,
                                  .max_batch = o->max_batch_size,
                                  .nice = o->worker_nice,
                                  .scratch_idle_s = o->scratch_full ? 0 : o->scratch_idle_s,
                                  .on_scratch = pool_scratch,
                                  .scratch_ud = s->metrics};
        if (srv_pool_init(&ms->pool, &po, err, errlen) != 0)
            return -1;
    }
    const srv_batcher_opts bo = {.model = sm->m,
                                 .pool = ms->pool,
                                 .warm_up = sm->defaults,
                                 .warm_up_token = td_tok_eos_id(sm->tok),
                                 .workers = o->workers,
                                 .threads = o->threads,
                                 .max_batch_size = o->max_batch_size,
                                 .max_batch_tokens = o->max_batch_tokens,
                                 .batch_delay_ms = o->batch_delay_ms,
                                 .max_queue = o->max_queue,
                                 .max_src_len = sm->max_input_tokens,
                                 .max_length = sm->max_length,
                                 .max_beam = sm->max_beam,
                                 .scheduler = o->scheduler,
                                 .worker_nice = o->worker_nice,
                                 .short_steps = o->short_steps,
                                 .urgent_steps = o->urgent_steps,
                                 .grow = !o->scratch_full,
                                 .scratch_idle_s = o->scratch_idle_s,
                                 .on_wake = model_wake,
                                 .wake_ud = sm,
                                 .fault = o->test_fault,
                                 .test_step_delay_ms = o->test_step_delay_ms};
    if (srv_batcher_init(&sm->b, &bo, sm->metrics, err, errlen) != 0)
        return -1;
    sm->workers = srv_pool_seats(ms->pool);
    sm->worker_bytes = srv_batcher_worker_bytes(sm->b);
    sm->weight_bytes = td_model_weight_bytes(sm->m);
    sm->bytes = sm->weight_bytes; /* the workers are the pool's (worker_max) */
    return 0;
}

/* Loads, sizes and warms one model; nobody else sees it yet. */
/* A signature of the files in dir: every entry's name, device, inode, size
 * and modification and change times (symbolic links followed), independent
 * of the order readdir gives them. Replacing a file (a rename over it, a
 * copy, a new link) changes it; 0 when dir cannot be read. */
static uint64_t dir_signature(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t sig = 0x9e3779b97f4a7c15u;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint64_t f[7] = {0};
        if (stat(path, &st) == 0) {
            f[0] = (uint64_t)st.st_dev;
            f[1] = (uint64_t)st.st_ino;
            f[2] = (uint64_t)st.st_size;
            f[3] = (uint64_t)st.st_mtim.tv_sec;
            f[4] = (uint64_t)st.st_mtim.tv_nsec;
            f[5] = (uint64_t)st.st_ctim.tv_sec;
            f[6] = (uint64_t)st.st_ctim.tv_nsec;
        }
        uint64_t h = 0xcbf29ce484222325u; /* FNV-1a of the name, then the fields */
        for (const unsigned char *c = (const unsigned char *)e->d_name; *c; c++)
            h = (h ^ *c) * 0x100000001b3u;
        for (int i = 0; i < 7; i++)
            for (int k = 0; k < 8; k++)
                h = (h ^ ((f[i] >> (8 * k)) & 0xff)) * 0x100000001b3u;
        sig += h; /* order-free */
    }
    closedir(d);
    return sig;
}

static int model_load(srv_models *ms, const srv_model_spec *spec, srv_model **out, char *err,
                      size_t errlen)
{
    srv_server *s = ms->s;
    const srv_opts *o = &s->o;
    *out = NULL;
    srv_model *sm = calloc(1, sizeof *sm);
    if (!sm) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    describe(sm, spec);
    sm->generation = 1;
    /* before the files are read: a change while they are is seen later */
    sm->files_sig = dir_signature(spec->dir);
    sm->preload = name_listed(o->preload, sm->name);
    atomic_store(&sm->resident, 1);
    sm->metrics = srv_metrics_model(s->metrics, sm->name);
    char e2[512];
    td_device dev;
    if (td_device_resolve(o->device, &dev, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s", e2);
        goto fail;
    }
    snprintf(sm->device, sizeof sm->device, "%s", dev.name);
    td_load_opts lo = {.n_threads = o->threads, .dtype = o->dtype, .precision = o->precision};
    if (td_model_load_on(&sm->m, spec->dir, &dev, &lo, e2, sizeof e2) != 0 ||
        td_model_tokenizer_load(sm->m, spec->dir, &sm->tok, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%.400s: %s", spec->dir, e2);
        goto fail;
    }
    /* a multilingual model (its tokenizer has language tokens) serves
     * every pair of its languages, each request naming both */
    sm->n_langs = td_tok_n_langs(sm->tok);
    if (sm->n_langs > 0) {
        snprintf(sm->src_lang, sizeof sm->src_lang, "mul");
        snprintf(sm->tgt_lang, sizeof sm->tgt_lang, "mul");
    }
    /* what is resident, not what the checkpoint says */
    snprintf(sm->dtype, sizeof sm->dtype, "%s", td_model_weight_dtype(sm->m));
    if (model_workers(s, sm, err, errlen) != 0)
        goto fail;
    /* the sentence splitter's ICU data for the source language, loaded now
     * rather than by the first request (tokenizer/segment.h) */
    td_sentence *warm_sent = NULL;
    if (td_segment(sm->src_lang, "A. B.", 5, &warm_sent, err, errlen) < 0)
        goto fail;
    free(warm_sent);
    *out = sm;
    return 0;
fail:
    model_free(sm);
    return -1;
}

/* The model's series: its labels and memory, once it serves. */
static void model_series(const srv_model *sm, int serving)
{
    const td_config *c = td_model_config(sm->m);
    const srv_model_info info = {.model = sm->name,
                                 .source = sm->src_lang,
                                 .target = sm->tgt_lang,
                                 .device = sm->device,
                                 .dtype = sm->dtype,
                                 .d_model = c->d_model,
                                 .encoder_layers = c->encoder_layers,
                                 .decoder_layers = c->decoder_layers};
    srv_metrics_model_state(sm->metrics, serving ? &info : NULL, sm->weight_bytes,
                            (size_t)sm->workers * sm->worker_bytes);
}

/* ---- the set ------------------------------------------------------------------ */

srv_models *srv_models_new(srv_server *s)
{
    srv_models *ms = calloc(1, sizeof *ms);
    if (!ms)
        return NULL;
    ms->s = s;
    ms->cap = 8;
    ms->serving = calloc((size_t)ms->cap, sizeof *ms->serving);
    ms->finishing = calloc((size_t)ms->cap, sizeof *ms->finishing);
    if (!ms->serving || !ms->finishing) {
        free(ms->serving);
        free(ms->finishing);
        free(ms);
        return NULL;
    }
    pthread_mutex_init(&ms->mu, NULL);
    pthread_cond_init(&ms->cv, NULL);
    return ms;
}

/* Room for one more model in both lists (under the lock); -1 when out of
 * memory. */
static int grow(srv_models *ms)
{
    if (ms->n_serving < ms->cap && ms->n_finishing < ms->cap)
        return 0;
    int cap = ms->cap * 2;
    srv_model **a = realloc(ms->serving, (size_t)cap * sizeof *a);
    if (a)
        ms->serving = a;
    srv_model **b = a ? realloc(ms->finishing, (size_t)cap * sizeof *b) : NULL;
    if (b)
        ms->finishing = b;
    if (!a || !b)
        return -1;
    ms->cap = cap;
    return 0;
}

static int find_serving(const srv_models *ms, const char *name)
{
    for (int i = 0; i < ms->n_serving; i++)
        if (!name || !strcmp(ms->serving[i]->name, name))
            return i;
    return -1;
}

/* What the budget counts (under the lock): the loaded models' weights and
 * the shared workers at the largest of the models' maxima. */
static size_t reserved(const srv_models *ms)
{
    return ms->used + (ms->pool ? (size_t)srv_pool_seats(ms->pool) : 0) * ms->worker_max;
}

/* The budget's refusal of a model of `need` bytes of weights whose worker
 * takes worker_bytes at its maxima (under the lock): 0, or -1 with the
 * message. */
static int over_budget(const srv_models *ms, const char *name, size_t need, size_t worker_bytes,
                       const char *what, char *msg, size_t n)
{
    long budget = ms->s->o.max_memory;
    size_t seats = ms->pool ? (size_t)srv_pool_seats(ms->pool) : (size_t)ms->s->o.workers;
    size_t more = worker_bytes > ms->worker_max ? seats * (worker_bytes - ms->worker_max) : 0;
    if (budget <= 0 || reserved(ms) + need + more <= (size_t)budget)
        return 0;
    snprintf(msg, n,
             "model %s needs %zu bytes (%s); %zu of --max-memory %ld bytes are in use by the "
             "loaded models and the workers (a reloaded model counts twice until its old copy "
             "finishes)",
             name, need + more, what, reserved(ms), budget);
    return -1;
}

/* Under the lock: the largest worker of the loaded models again (one was
 * freed). */
static void worker_max_again(srv_models *ms)
{
    ms->worker_max = 0;
    for (int i = 0; i < ms->n_serving; i++)
        if (ms->serving[i]->worker_bytes > ms->worker_max)
            ms->worker_max = ms->serving[i]->worker_bytes;
    for (int i = 0; i < ms->n_finishing; i++)
        if (ms->finishing[i]->worker_bytes > ms->worker_max)
            ms->worker_max = ms->finishing[i]->worker_bytes;
}

/* Drops a reference with the set's lock held: the manager cannot be
 * between its check and its wait, so a plain signal is enough. */
static void put_locked(srv_model *sm)
{
    if (atomic_fetch_sub(&sm->refs, 1) == 1)
        pthread_cond_signal(&sm->set->cv);
}

/* Publishes sm (loaded, not yet seen) as serving, in place of the model
 * at index `replace` (moved to finishing) or appended (-1). Under the
 * lock; room was made by grow(). */
static void publish(srv_models *ms, srv_model *sm, int replace)
{
    sm->set = ms;
    atomic_store(&sm->refs, 1); /* the set's */
    ms->used += sm->bytes;
    if (sm->worker_bytes > ms->worker_max)
        ms->worker_max = sm->worker_bytes;
    if (replace < 0) {
        ms->serving[ms->n_serving++] = sm;
        return;
    }
    srv_model *old = ms->serving[replace];
    ms->serving[replace] = sm;
    ms->finishing[ms->n_finishing++] = old;
    put_locked(old);
}

static srv_model *take(srv_model *sm)
{
    if (sm)
        atomic_fetch_add(&sm->refs, 1);
    return sm;
}

srv_model *srv_models_get(srv_models *ms, const char *name)
{
    pthread_mutex_lock(&ms->mu);
    int i = find_serving(ms, name);
    srv_model *sm = take(i >= 0 ? ms->serving[i] : NULL);
    pthread_mutex_unlock(&ms->mu);
    return sm;
}

srv_model *srv_models_get_pair(srv_models *ms, const char *src, const char *tgt)
{
    srv_model *sm = NULL;
    pthread_mutex_lock(&ms->mu);
    /* a model made for the pair before one that knows many */
    for (int pass = 0; pass < 2 && !sm; pass++)
        for (int i = 0; i < ms->n_serving && !sm; i++)
            if ((ms->serving[i]->n_langs > 0) == pass &&
                srv_model_serves(ms->serving[i], src, tgt))
                sm = take(ms->serving[i]);
    pthread_mutex_unlock(&ms->mu);
    return sm;
}

int srv_model_lang(const srv_model *sm, const char *code)
{
    return sm->n_langs > 0 ? srv_lang_in_tok(sm->tok, code) : -1;
}

int srv_model_serves(const srv_model *sm, const char *src, const char *tgt)
{
    if (sm->n_langs == 0)
        return srv_lang_same(sm->src_lang, src) && srv_lang_same(sm->tgt_lang, tgt);
    int s = srv_model_lang(sm, src), t = srv_model_lang(sm, tgt);
    return s >= 0 && t >= 0 && s != t;
}

void srv_model_put(srv_model *sm)
{
    if (!sm)
        return;
    srv_models *ms = sm->set; /* sm may be freed once the count is 0 */
    if (atomic_fetch_sub(&sm->refs, 1) == 1) {
        pthread_mutex_lock(&ms->mu);
        pthread_cond_signal(&ms->cv);
        pthread_mutex_unlock(&ms->mu);
    }
}

int srv_models_pairs(srv_models *ms, srv_pair *out, int max)
{
    pthread_mutex_lock(&ms->mu);
    int n = ms->n_serving;
    for (int i = 0; i < n && i < max; i++) {
        const srv_model *sm = ms->serving[i];
        snprintf(out[i].name, sizeof out[i].name, "%s", sm->name);
        snprintf(out[i].src, sizeof out[i].src, "%s", sm->src_lang);
        snprintf(out[i].tgt, sizeof out[i].tgt, "%s", sm->tgt_lang);
        out[i].n_langs = sm->n_langs;
        out[i].max_beam = sm->max_beam;
    }
    pthread_mutex_unlock(&ms->mu);
    return n;
}

void srv_models_pairs_text(srv_models *ms, char *out, size_t n)
{
    size_t k = 0;
    out[0] = 0;
    pthread_mutex_lock(&ms->mu);
    for (int i = 0; i < ms->n_serving && k < n; i++) {
        const srv_model *sm = ms->serving[i];
        if (sm->n_langs > 0)
            k += (size_t)snprintf(out + k, n - k, "%s%s (%d languages)", i ? ", " : "",
                                  sm->name, sm->n_langs);
        else
            k += (size_t)snprintf(out + k, n - k, "%s%s (%s->%s)", i ? ", " : "", sm->name,
                                  sm->src_lang, sm->tgt_lang);
    }
    pthread_mutex_unlock(&ms->mu);
}

int srv_models_snapshot(srv_models *ms, srv_model **out, int max)
{
    pthread_mutex_lock(&ms->mu);
    int n = 0;
    for (int i = 0; i < ms->n_serving && n < max; i++)
        out[n++] = take(ms->serving[i]);
    pthread_mutex_unlock(&ms->mu);
    return n;
}

void srv_models_workers(srv_models *ms, srv_workers_info *w)
{
    pthread_mutex_lock(&ms->mu);
    w->seats = ms->pool ? srv_pool_seats(ms->pool) : 0;
    w->scratch_bytes = ms->pool ? srv_pool_scratch_bytes(ms->pool) : 0;
    w->max_bytes = (size_t)w->seats * ms->worker_max;
    pthread_mutex_unlock(&ms->mu);
}

void srv_models_memory(srv_models *ms, size_t *used, size_t *budget)
{
    pthread_mutex_lock(&ms->mu);
    *used = reserved(ms);
    pthread_mutex_unlock(&ms->mu);
    *budget = ms->s->o.max_memory > 0 ? (size_t)ms->s->o.max_memory : 0;
}

int srv_models_failed(srv_models *ms, char *why, size_t n)
{
    int found = 0;
    pthread_mutex_lock(&ms->mu);
    for (int i = 0; i < ms->n_serving && !found; i++) {
        const char *msg = srv_model_failed(ms->serving[i]);
        if (msg && why)
            snprintf(why, n, "model %s: the device failed: %s", ms->serving[i]->name, msg);
        found = msg != NULL;
    }
    pthread_mutex_unlock(&ms->mu);
    return found;
}

srv_err srv_models_unload(srv_models *ms, const char *name, int *inflight, char *msg, size_t n)
{
    *inflight = 0;
    pthread_mutex_lock(&ms->mu);
    int i = find_serving(ms, name);
    srv_err status = i < 0                 ? SRV_ERR_NOT_FOUND
                     : ms->n_serving == 1  ? SRV_ERR_CONFLICT
                     : grow(ms) != 0       ? SRV_ERR_NOMEM
                                           : SRV_OK;
    if (status == SRV_ERR_NOT_FOUND)
        snprintf(msg, n, "no model named '%s' is loaded", name);
    else if (status == SRV_ERR_CONFLICT)
        snprintf(msg, n, "model %s is the only model: unloading it would leave nothing to serve",
                 name);
    else if (status == SRV_ERR_NOMEM)
        snprintf(msg, n, "out of memory");
    srv_model *sm = status == SRV_OK ? ms->serving[i] : NULL;
    /* its name's series (the server's metrics own them): sm itself may be
     * freed by the manager as soon as the lock is released */
    srv_metrics *series = sm ? sm->metrics : NULL;
    if (sm) {
        memmove(&ms->serving[i], &ms->serving[i + 1],
                (size_t)(ms->n_serving - i - 1) * sizeof *ms->serving);
        ms->n_serving--;
        ms->finishing[ms->n_finishing++] = sm;
        *inflight = atomic_load(&sm->refs) - 1;
        put_locked(sm);
        snprintf(msg, n, "model %s no longer takes requests; %d request(s) finish on it", name,
                 *inflight);
    }
    pthread_mutex_unlock(&ms->mu);
    if (series) {
        srv_metrics_model_unloaded(series);
        fprintf(stderr, "transformerd: %s\n", msg);
    }
    return status;
}

/* ---- the manager thread ------------------------------------------------------ */

static void op_error(srv_model_op *op, srv_err err, const char *code, const char *param,
                     const char *msg)
{
    op->err = err;
    snprintf(op->code, sizeof op->code, "%s", code);
    snprintf(op->param, sizeof op->param, "%s", param ? param : "");
    snprintf(op->msg, sizeof op->msg, "%s", msg);
}

/* The bytes a directory's checkpoint will take at least (its weight file,
 * td_model_probe), checked before the load so that a model that cannot fit
 * is refused before it takes memory; the exact bytes are checked after the
 * load. */
static size_t checkpoint_bytes(const char *dir)
{
    td_probe pr;
    td_model_probe(dir, &pr);
    return pr.format ? (size_t)pr.weight_bytes : 0;
}

/* Loads spec and publishes it in place of `old` (a reload) or as a new
 * model (old NULL); the outcome into op. */
static void load_and_publish(srv_models *ms, srv_model_op *op, const srv_model_spec *spec,
                             srv_model *old)
{
    char msg[1024];
    pthread_mutex_lock(&ms->mu);
    int refused = over_budget(ms, spec->name, checkpoint_bytes(spec->dir), 0,
                              "at least its weight file", msg, sizeof msg);
    pthread_mutex_unlock(&ms->mu);
    if (refused) {
        op_error(op, SRV_ERR_NO_ROOM, "insufficient_memory", NULL, msg);
        return;
    }
    srv_model *sm = NULL;
    if (model_load(ms, spec, &sm, msg, sizeof msg) != 0) {
        op_error(op, SRV_ERR_UNUSABLE, "load_failed", NULL, msg);
        return;
    }
    pthread_mutex_lock(&ms->mu);
    char what[128];
    snprintf(what, sizeof what, "weights %zu; the %d shared worker(s) at %zu each when larger",
             sm->weight_bytes, sm->workers, sm->worker_bytes);
    int i = find_serving(ms, spec->name);
    srv_err status = over_budget(ms, sm->name, sm->bytes, sm->worker_bytes, what, msg, sizeof msg)
                         ? SRV_ERR_NO_ROOM
                     : old && (i < 0 || ms->serving[i] != old)
                         ? SRV_ERR_CONFLICT /* unloaded (or replaced) while this one loaded */
                     : !old && i >= 0 ? SRV_ERR_CONFLICT
                     : grow(ms) != 0  ? SRV_ERR_NOMEM
                                      : SRV_OK;
    if (status == SRV_ERR_CONFLICT)
        snprintf(msg, sizeof msg, "model %s changed while this one was loading (unloaded, or "
                                  "loaded by another request)", spec->name);
    if (status == SRV_ERR_NOMEM)
        snprintf(msg, sizeof msg, "out of memory");
    if (status == SRV_OK) {
        sm->generation = old ? old->generation + 1 : 1;
        publish(ms, sm, old ? i : -1);
    }
    pthread_mutex_unlock(&ms->mu);
    /* an old generation put away is never loaded again: what waits on it
     * is answered (its texts were tokenized for the old files); the name's
     * series is resident again */
    if (status == SRV_OK && old && !atomic_load(&old->resident) && old->b) {
        srv_metrics_model_resident(sm->metrics, 1); /* loaded again, whole */
        (void)srv_batcher_retire(old->b);
    }
    if (status != SRV_OK) {
        model_free(sm);
        op_error(op, status, status == SRV_ERR_NO_ROOM    ? "insufficient_memory"
                             : status == SRV_ERR_CONFLICT ? "conflict"
                                                          : "internal",
                 NULL, msg);
        return;
    }
    model_series(sm, 1);
    op->err = SRV_OK;
    snprintf(op->name, sizeof op->name, "%s", sm->name);
    op->generation = sm->generation;
    op->bytes = sm->bytes;
    snprintf(op->msg, sizeof op->msg,
             "model %s (%s -> %s) %s from %.700s: generation %u, weights %zu bytes, a worker of "
             "it %zu bytes at most (%d shared)",
             sm->name, sm->src_lang, sm->tgt_lang, old ? "reloaded" : "loaded", sm->dir,
             sm->generation, sm->weight_bytes, sm->worker_bytes, sm->workers);
    if (ms->thread_on) /* at run time (start-up has its own lines) */
        fprintf(stderr, "transformerd: %s\n", op->msg);
}

int srv_models_adopt(srv_models *ms, srv_model *sm)
{
    pthread_mutex_lock(&ms->mu);
    int rc = grow(ms);
    if (rc == 0)
        publish(ms, sm, -1);
    pthread_mutex_unlock(&ms->mu);
    return rc;
}

int srv_models_load_initial(srv_models *ms, const srv_model_spec *spec, char *err,
                            size_t errlen)
{
    srv_model_op op;
    memset(&op, 0, sizeof op);
    load_and_publish(ms, &op, spec, NULL);
    if (op.err == SRV_OK)
        return 0;
    snprintf(err, errlen, "%s", op.err == SRV_ERR_CONFLICT ? "two models have this name (name "
                                                             "one with --model NAME=DIR)"
                                                           : op.msg);
    return -1;
}

/* The spec a loaded model was made from: what a reload loads again. */
static void spec_of(srv_model_spec *spec, const srv_model *sm)
{
    snprintf(spec->name, sizeof spec->name, "%s", sm->name);
    snprintf(spec->dir, sizeof spec->dir, "%s", sm->dir);
    snprintf(spec->langs, sizeof spec->langs, "%s", sm->langs_given);
}

static void run_reload(srv_models *ms, srv_model_op *op, const char *name)
{
    srv_model *old = srv_models_get(ms, name);
    if (!old) {
        char msg[256];
        snprintf(msg, sizeof msg, "no model named '%s' is loaded", name);
        op_error(op, SRV_ERR_NOT_FOUND, "model_not_found", "model", msg);
        return;
    }
    srv_model_spec spec;
    spec_of(&spec, old);
    load_and_publish(ms, op, &spec, old);
    if (op->err != SRV_OK)
        fprintf(stderr, "transformerd: model %s: reload failed, the loaded one keeps serving: %s\n",
                name, op->msg);
    srv_model_put(old);
}

static void run_op(srv_models *ms, srv_model_op *op)
{
    op->err = SRV_ERR_INTERNAL;
    switch (op->kind) {
    case SRV_OP_LOAD: {
        char msg[256];
        srv_model *have = srv_models_get(ms, op->spec.name);
        srv_model_put(have);
        if (have) {
            snprintf(msg, sizeof msg, "a model named '%s' is already loaded", op->spec.name);
            op_error(op, SRV_ERR_CONFLICT, "model_exists", "name", msg);
            return;
        }
        load_and_publish(ms, op, &op->spec, NULL);
        return;
    }
    case SRV_OP_RELOAD:
        run_reload(ms, op, op->spec.name);
        return;
    case SRV_OP_RELOAD_ALL: {
        srv_pair pairs[64];
        int n = srv_models_pairs(ms, pairs, 64), failed = 0;
        for (int i = 0; i < n && i < 64; i++) {
            run_reload(ms, op, pairs[i].name);
            failed += op->err != SRV_OK;
        }
        op->err = failed ? SRV_ERR_INTERNAL : SRV_OK;
        snprintf(op->msg, sizeof op->msg, "%d of %d model(s) reloaded", n - failed, n);
        return;
    }
    }
}

/* Frees the finishing models nobody holds any more (the lock is held; it
 * is released around each free). */
static void reap(srv_models *ms)
{
    for (int i = 0; i < ms->n_finishing;) {
        srv_model *sm = ms->finishing[i];
        if (atomic_load(&sm->refs) > 0) {
            i++;
            continue;
        }
        ms->finishing[i] = ms->finishing[--ms->n_finishing];
        pthread_mutex_unlock(&ms->mu);
        char name[sizeof sm->name];
        snprintf(name, sizeof name, "%s", sm->name);
        unsigned gen = sm->generation;
        size_t bytes = sm->bytes;
        model_free(sm);
        fprintf(stderr, "transformerd: model %s generation %u freed (%zu bytes)\n", name, gen,
                bytes);
        pthread_mutex_lock(&ms->mu);
        /* counted until it is freed (and its pages handed back) */
        ms->used -= bytes;
        worker_max_again(ms);
        i = 0;
    }
}

/* --model-idle-unload: a model idle that long is put away (its workers
 * stopped and freed, its weights freed: srv_batcher_park, td_model_unload);
 * its entry, tokenizer and budget stay, so routing, /v1/models and the
 * budget see it as before. Under ms->mu, released around the work. */
static void put_away_idle(srv_models *ms)
{
    const int after = ms->s->o.model_idle_unload;
    for (int i = 0; after > 0 && i < ms->n_serving; i++) {
        srv_model *sm = ms->serving[i];
        if (sm->preload || !sm->b || !atomic_load(&sm->resident) || srv_model_failed(sm))
            continue;
        atomic_fetch_add(&sm->refs, 1);
        pthread_mutex_unlock(&ms->mu);
        double idle = srv_batcher_idle_s(sm->b);
        if (idle >= after && srv_batcher_park(sm->b)) {
            td_model_unload(sm->m);
            malloc_trim(0); /* the freed pages back to the system (model_free) */
            atomic_store(&sm->resident, 0);
            srv_metrics_model_resident(sm->metrics, 0);
            fprintf(stderr, "transformerd: model %s put away after %.0f s idle (%.1f MiB of "
                    "weights freed); the next request loads it again\n", sm->name, idle,
                    (double)sm->weight_bytes / (1 << 20));
        }
        pthread_mutex_lock(&ms->mu);
        put_locked(sm);
    }
}

/* wake_models of a model whose directory changed since it was loaded (the
 * documented update: new files renamed in, then a reload): its weights are
 * not loaded under its old tokenizer and configuration; the whole model is
 * loaded again as a reload does (a new generation, its cache entries gone
 * with the old one), and the requests that waited on the old one are
 * answered to send again (srv_batcher_retire). When the new files do not
 * load, the old ones are gone too: the model fails as when its weights
 * cannot be read again. Not under the lock. */
static void reload_changed(srv_models *ms, srv_model *sm)
{
    fprintf(stderr, "transformerd: model %s: its files in %s changed while it was put away; "
            "loading all of it again\n", sm->name, sm->dir);
    srv_model_op op;
    memset(&op, 0, sizeof op);
    op.kind = SRV_OP_RELOAD;
    spec_of(&op.spec, sm);
    load_and_publish(ms, &op, &op.spec, sm);
    if (op.err == SRV_OK)
        return;
    char msg[600];
    snprintf(msg, sizeof msg, "loading it again from its changed files: %.500s", op.msg);
    fprintf(stderr, "transformerd: model %s: %s\n", sm->name, msg);
    srv_model_engine_error(sm, TD_EDEVICE, msg);
    srv_batcher_fail_queued(sm->b, TD_EDEVICE, msg);
}

/* The models put away that have a request: their weights loaded again and
 * their workers started; the queued requests run. A model that cannot be
 * loaded again fails (device_error) and so do its queued requests. */
static void wake_models(srv_models *ms)
{
    ms->wake = 0;
    for (int i = 0; i < ms->n_serving; i++) {
        srv_model *sm = ms->serving[i];
        if (!atomic_exchange(&sm->wake, 0))
            continue;
        atomic_fetch_add(&sm->refs, 1);
        pthread_mutex_unlock(&ms->mu);
        double t0 = srv_now();
        char err[512];
        if (dir_signature(sm->dir) != sm->files_sig) {
            reload_changed(ms, sm);
            pthread_mutex_lock(&ms->mu);
            put_locked(sm);
            i = -1;
            continue;
        }
        int rc = td_model_reload(sm->m, err, sizeof err);
        if (rc == 0)
            rc = srv_batcher_unpark(sm->b, err, sizeof err);
        if (rc == 0) {
            atomic_store(&sm->resident, 1);
            srv_metrics_model_resident(sm->metrics, 1);
            fprintf(stderr, "transformerd: model %s loaded again for a request in %.2f s\n",
                    sm->name, srv_now() - t0);
        } else {
            char msg[600];
            snprintf(msg, sizeof msg, "loading it again: %s", err);
            fprintf(stderr, "transformerd: model %s: %s\n", sm->name, msg);
            srv_model_engine_error(sm, TD_EDEVICE, msg);
            srv_batcher_fail_queued(sm->b, TD_EDEVICE, msg);
        }
        pthread_mutex_lock(&ms->mu);
        put_locked(sm);
        i = -1; /* the set may have changed while unlocked */
    }
}

static void *manager_main(void *arg)
{
    srv_models *ms = arg;
    const int idle_unload = ms->s->o.model_idle_unload;
    pthread_mutex_lock(&ms->mu);
    for (;;) {
        reap(ms);
        if (ms->stop)
            break;
        if (ms->wake) {
            wake_models(ms);
            continue;
        }
        srv_model_op *op = ms->q_head;
        if (!op && idle_unload > 0) {
            put_away_idle(ms);
            if (ms->stop || ms->wake || ms->q_head)
                continue;
            /* looked at again in a second (at most) */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&ms->cv, &ms->mu, &ts);
            continue;
        }
        if (!op) {
            pthread_cond_wait(&ms->cv, &ms->mu);
            continue;
        }
        ms->q_head = op->next;
        if (!ms->q_head)
            ms->q_tail = NULL;
        pthread_mutex_unlock(&ms->mu);
        run_op(ms, op);
        op->done(op, op->ud);
        pthread_mutex_lock(&ms->mu);
    }
    pthread_mutex_unlock(&ms->mu);
    return NULL;
}

int srv_models_start(srv_models *ms)
{
    ms->thread_on = pthread_create(&ms->thread, NULL, manager_main, ms) == 0;
    return ms->thread_on ? 0 : -1;
}

void srv_models_submit(srv_models *ms, srv_model_op *op)
{
    op->next = NULL;
    pthread_mutex_lock(&ms->mu);
    int refused = ms->stop || !ms->thread_on;
    if (!refused) {
        if (ms->q_tail)
            ms->q_tail->next = op;
        else
            ms->q_head = op;
        ms->q_tail = op;
        pthread_cond_signal(&ms->cv);
    }
    pthread_mutex_unlock(&ms->mu);
    if (refused) {
        op_error(op, SRV_ERR_UNAVAILABLE, "draining", NULL, "the server is shutting down");
        op->done(op, op->ud);
    }
}

void srv_models_stop(srv_models *ms)
{
    if (!ms)
        return;
    pthread_mutex_lock(&ms->mu);
    ms->stop = 1;
    pthread_cond_signal(&ms->cv);
    srv_model_op *q = ms->q_head;
    ms->q_head = ms->q_tail = NULL;
    pthread_mutex_unlock(&ms->mu);
    if (ms->thread_on)
        pthread_join(ms->thread, NULL);
    ms->thread_on = 0;
    while (q) {
        srv_model_op *next = q->next;
        op_error(q, SRV_ERR_UNAVAILABLE, "draining", NULL, "the server is shutting down");
        q->done(q, q->ud);
        q = next;
    }
}

void srv_models_drain(srv_models *ms, double deadline_s)
{
    pthread_mutex_lock(&ms->mu);
    int n = ms->n_serving + ms->n_finishing;
    srv_model **all = malloc((size_t)(n > 0 ? n : 1) * sizeof *all);
    int k = 0;
    for (int i = 0; all && i < ms->n_serving; i++)
        all[k++] = take(ms->serving[i]);
    for (int i = 0; all && i < ms->n_finishing; i++)
        all[k++] = take(ms->finishing[i]);
    pthread_mutex_unlock(&ms->mu);
    for (int i = 0; i < k; i++)
        srv_batcher_drain(all[i]->b, deadline_s);
    for (int i = 0; i < k; i++)
        srv_model_put(all[i]);
    free(all);
}

void srv_models_free(srv_models *ms)
{
    if (!ms)
        return;
    srv_models_stop(ms);
    for (int i = 0; i < ms->n_serving; i++)
        model_free(ms->serving[i]);
    for (int i = 0; i < ms->n_finishing; i++)
        model_free(ms->finishing[i]);
    srv_pool_free(ms->pool); /* every model detached */
    free(ms->serving);
    free(ms->finishing);
    pthread_cond_destroy(&ms->cv);
    pthread_mutex_destroy(&ms->mu);
    free(ms);
}

size_t srv_model_resident_bytes(const srv_model *sm)
{
    if (!atomic_load(&sm->resident))
        return 0;
    return sm->weight_bytes + srv_batcher_scratch_bytes(sm->b);
}
