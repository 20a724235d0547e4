/*
 * test_batcher.c - the inflight scheduler's admission policy
 * (srv_inflight_admit_now in server/service/batcher.h), as a rule and in the real
 * batcher, the rule of --short-steps (srv_inflight_step_rows) and of
 * --urgent-steps (srv_inflight_urgent_rows), with the admission of urgent
 * texts (a streamed answer's first sentences) in the real batcher.
 *
 * The rule: a running decode takes queued texts in when every queued text
 * fits, when a quarter of its rows is free, or when it has put the
 * admission off SRV_ADMIT_MAX_DEFER steps; never when nothing fits.
 *
 * The batcher: a fixture model, greedy texts of random lengths submitted at
 * once (a deep queue), every admission decision of the running decode
 * recorded through the test hook. Each decision is held to the rule with
 * the deferrals counted here, step by step; all texts finish. Decisions
 * are counted in steps, never in time.
 *
 * Fairness: a text that comes while one large request (or one client's
 * many) is queued is taken in within a few admissions, not after them.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batcher.h"

START_TEST(test_rule)
{
    const int R = 32; /* rows */
    /* nothing fits: never */
    ck_assert(!srv_inflight_admit_now(0, 10, 31, R, 100));
    /* a shallow queue: at once, even with one free row */
    ck_assert(srv_inflight_admit_now(1, 1, 1, R, 0));
    ck_assert(srv_inflight_admit_now(3, 3, 3, R, 0));
    /* a deep queue: a quarter of the rows free ... */
    ck_assert(!srv_inflight_admit_now(1, 2, 7, R, 0));
    ck_assert(srv_inflight_admit_now(2, 9, 8, R, 0));
    ck_assert(!srv_inflight_admit_now(1, 9, 7, 29, 0)); /* 7 * 4 < 29 */
    ck_assert(srv_inflight_admit_now(1, 9, 8, 29, 0));
    /* ... or put off long enough */
    ck_assert(!srv_inflight_admit_now(1, 9, 1, R, SRV_ADMIT_MAX_DEFER - 1));
    ck_assert(srv_inflight_admit_now(1, 9, 1, R, SRV_ADMIT_MAX_DEFER));
}
END_TEST

/* --short-steps: every row, then N steps of the shortest quarter, in a
 * cycle; every row at every step while the decode is small or N is 0. */
START_TEST(test_short_steps_rule)
{
    int phase = 0;
    const int R = 64;
    for (int cycle = 0; cycle < 3; cycle++) {
        ck_assert_int_eq(srv_inflight_step_rows(R, 2, &phase), INT_MAX);
        ck_assert_int_eq(srv_inflight_step_rows(R, 2, &phase), R / SRV_SHORT_ROWS_DIVISOR);
        ck_assert_int_eq(srv_inflight_step_rows(R, 2, &phase), R / SRV_SHORT_ROWS_DIVISOR);
    }
    ck_assert_int_eq(srv_inflight_step_rows(R, 1, &phase), INT_MAX);
    ck_assert_int_eq(srv_inflight_step_rows(R, 1, &phase), R / SRV_SHORT_ROWS_DIVISOR);
    ck_assert_int_eq(srv_inflight_step_rows(R, 1, &phase), INT_MAX);
    /* a small decode steps every row and starts the cycle over */
    ck_assert_int_eq(srv_inflight_step_rows(SRV_SHORT_MIN_ROWS - 1, 1, &phase), INT_MAX);
    ck_assert_int_eq(phase, 0);
    ck_assert_int_eq(srv_inflight_step_rows(R, 1, &phase), INT_MAX);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(srv_inflight_step_rows(R, 0, &phase), INT_MAX);
}
END_TEST

/* --urgent-steps: every row, then N steps of the urgent rows only, in a
 * cycle; every row when none is urgent or N is 0 (the cycle starts over). */
START_TEST(test_urgent_steps_rule)
{
    int phase = 0;
    for (int cycle = 0; cycle < 3; cycle++) {
        ck_assert_int_eq(srv_inflight_urgent_rows(3, 2, &phase), 0);
        ck_assert_int_eq(srv_inflight_urgent_rows(3, 2, &phase), 3);
        ck_assert_int_eq(srv_inflight_urgent_rows(2, 2, &phase), 2);
    }
    ck_assert_int_eq(srv_inflight_urgent_rows(3, 2, &phase), 0);
    ck_assert_int_eq(srv_inflight_urgent_rows(0, 2, &phase), 0);
    ck_assert_int_eq(phase, 0);
    ck_assert_int_eq(srv_inflight_urgent_rows(3, 1, &phase), 0);
    ck_assert_int_eq(srv_inflight_urgent_rows(3, 1, &phase), 3);
    ck_assert_int_eq(srv_inflight_urgent_rows(3, 0, &phase), 0);
    ck_assert_int_eq(phase, 0);
}
END_TEST

/* ---- the batcher --------------------------------------------------------- */

#define N_JOBS 120
#define MAX_BATCH 16

typedef struct watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    /* the admission decisions while the decode ran (under the batcher's
     * lock, one scheduler thread) */
    int decisions, deferred_now, grouped, by_count, by_rows, bad;
    char why[256];
} watch;

static void on_admit(void *ud, int fit, long queued, int free_rows, int rows, int admitted,
                     srv_job *const *taken)
{
    (void)taken;
    watch *w = ud;
    w->decisions++;
    if (w->bad)
        return;
    const int shallow = fit >= queued, quarter = free_rows * SRV_ADMIT_ROWS_DIVISOR >= rows;
    const int due = fit > 0 && (shallow || quarter || w->deferred_now >= SRV_ADMIT_MAX_DEFER);
    if (admitted != (due ? fit : 0)) {
        snprintf(w->why, sizeof w->why,
                 "decision %d: fit %d queued %ld free rows %d of %d, put off %d steps: took %d",
                 w->decisions, fit, queued, free_rows, rows, w->deferred_now, admitted);
        w->bad = 1;
        return;
    }
    if (admitted) {
        w->grouped += admitted >= 2;
        w->by_count += !shallow && !quarter;
        w->by_rows += !shallow && quarter;
        w->deferred_now = 0;
    } else if (fit > 0) {
        w->deferred_now++;
    }
}

static void job_done(srv_job *j, void *ud)
{
    watch *w = ud;
    ck_assert_int_eq(j->status, SRV_JOB_DONE);
    td_result_free(&j->res);
    pthread_mutex_lock(&w->mu);
    w->done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static uint64_t g_rng = 0x2545f4914f6cdd1dULL;
static int rnd(int n)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (int)(g_rng % (uint64_t)n);
}

/* A job of a random source of 2..15 tokens ending in </s> (src has room
 * for 16); its options are the caller's. */
static void random_job(srv_job *j, int32_t *src, const td_config *c)
{
    int n = 2 + rnd(14);
    for (int k = 0; k + 1 < n; k++)
        src[k] = 3 + rnd(c->vocab_size - 4);
    src[n - 1] = (int32_t)c->eos_token_id;
    memset(j, 0, sizeof *j);
    j->src = src;
    j->n_src = n;
}

typedef void (*admit_hook)(void *, int, long, int, int, int, srv_job *const *);

/* The marian_tied fixture (*m) behind a batcher of one greedy inflight
 * worker of max_batch rows, its admissions reported to hook(ud). */
static srv_batcher *new_batcher(td_model **m, int max_batch, int max_queue, admit_hook hook,
                                void *ud, int urgent_steps)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/marian_tied", TD_TEST_DATA);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(m, dir, &lo, err, sizeof err) == 0, "%s", err);
    srv_batcher_opts bo = {.model = *m,
                           .warm_up_token = (int32_t)td_model_config(*m)->eos_token_id,
                           .workers = 1,
                           .threads = 1,
                           .max_batch_size = max_batch,
                           .max_batch_tokens = 1 << 20,
                           .max_queue = max_queue,
                           .max_src_len = 16,
                           .max_length = 40,
                           .max_beam = 1,
                           .scheduler = SRV_SCHED_INFLIGHT,
                           .urgent_steps = urgent_steps,
                           .test_on_admit = hook,
                           .test_ud = ud};
    td_decode_opts_default(*m, &bo.warm_up);
    srv_batcher *b = NULL;
    ck_assert_msg(srv_batcher_init(&b, &bo, NULL, err, sizeof err) == 0, "%s", err);
    return b;
}

START_TEST(test_deep_queue)
{
    td_model *m = NULL;
    watch w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    srv_batcher *b = new_batcher(&m, MAX_BATCH, N_JOBS, on_admit, &w, 4);
    const td_config *c = td_model_config(m);
    /* greedy, lengths 1..40: sentences finish one or two at a time */
    static td_decode_opts opts[40];
    for (int k = 0; k < 40; k++) {
        td_decode_opts_default(m, &opts[k]);
        opts[k].beam_size = opts[k].num_hypotheses = 1;
        opts[k].max_length = k + 1;
    }
    static srv_job jobs[N_JOBS];
    static int32_t src[N_JOBS][16];
    for (int i = 0; i < N_JOBS; i++) {
        random_job(&jobs[i], src[i], c);
        jobs[i].opts = &opts[rnd(40)];
    }
    srv_completion comp = {.done = job_done, .ud = &w};
    /* all at once: the queue is deep from the first admission on */
    ck_assert_int_eq(srv_batcher_submit(b, jobs, N_JOBS, 1e18, &comp), SRV_SUBMIT_OK);
    pthread_mutex_lock(&w.mu);
    while (w.done < N_JOBS)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    srv_batcher_drain(b, 1e18);
    srv_batcher_free(b);
    td_model_free(m);
    ck_assert_msg(!w.bad, "%s", w.why);
    printf("test_batcher: %d decisions while running, %d groups of 2+, admitted by the quarter "
           "rule %d, by the step count %d\n", w.decisions, w.grouped, w.by_rows, w.by_count);
    /* the policy was exercised: decisions while running, groups of several,
     * admissions by the quarter rule and by the step count */
    ck_assert_int_gt(w.decisions, N_JOBS / 4);
    ck_assert_int_gt(w.grouped, 0);
    ck_assert_int_gt(w.by_rows, 0);
    ck_assert_int_gt(w.by_count, 0);
}
END_TEST

/* ---- urgent texts ------------------------------------------------------------ */

typedef struct urgent_watch {
    watch base;          /* its lock and the count of texts done */
    const srv_job *jobs; /* the submitted jobs, two of them urgent */
    int order[64];       /* indexes of the jobs in the order they finished */
    int admitted_early;  /* texts admitted while an urgent one was unfinished */
} urgent_watch;

static void urgent_done(srv_job *j, void *ud)
{
    urgent_watch *w = ud;
    pthread_mutex_lock(&w->base.mu);
    if (w->base.done < 64)
        w->order[w->base.done] = (int)(j - w->jobs);
    pthread_mutex_unlock(&w->base.mu);
    job_done(j, &w->base);
}

static void on_admit_urgent(void *ud, int fit, long queued, int free_rows, int rows,
                            int admitted, srv_job *const *taken)
{
    (void)fit, (void)queued, (void)free_rows, (void)rows, (void)taken;
    urgent_watch *w = ud;
    pthread_mutex_lock(&w->base.mu);
    int urgent_done = 0;
    for (int k = 0; k < w->base.done && k < 64; k++)
        urgent_done += w->jobs[w->order[k]].urgent;
    if (urgent_done < 2)
        w->admitted_early += admitted;
    pthread_mutex_unlock(&w->base.mu);
}

/* A batcher of MAX_BATCH rows whose admissions and finished jobs w
 * watches (with the marian_tied fixture in *m). */
static srv_batcher *urgent_start(urgent_watch *w, td_model **m, int n)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->base.mu, NULL);
    pthread_cond_init(&w->base.cv, NULL);
    return new_batcher(m, MAX_BATCH, n, on_admit_urgent, w, 4);
}

/* The n jobs in one submit, waited for; the batcher and model freed. */
static void urgent_run(urgent_watch *w, srv_batcher *b, td_model *m, srv_job *jobs, int n)
{
    w->jobs = jobs;
    srv_completion comp = {.done = urgent_done, .ud = w};
    ck_assert_int_eq(srv_batcher_submit(b, jobs, n, 1e18, &comp), SRV_SUBMIT_OK);
    pthread_mutex_lock(&w->base.mu);
    while (w->base.done < n)
        pthread_cond_wait(&w->base.cv, &w->base.mu);
    pthread_mutex_unlock(&w->base.mu);
    srv_batcher_drain(b, 1e18);
    srv_batcher_free(b);
    td_model_free(m);
}

/* n random sources of 8 tokens whose translations alone (options o) have
 * min_tokens tokens or more. */
static void long_sources(td_model *m, const td_decode_opts *o, int min_tokens,
                         int32_t (*src)[8], int n)
{
    const td_config *c = td_model_config(m);
    td_worker *tw;
    char err[256];
    td_worker_opts wo = {.max_batch = 1, .max_length = o->max_length, .max_beam = 1,
                         .max_src_len = 16, .n_threads = 1};
    ck_assert_msg(td_worker_init(&tw, m, &wo, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < n; i++) {
        int n_tokens = -1, tries = 0;
        while (n_tokens < min_tokens) {
            ck_assert_int_lt(tries++, 2000);
            for (int j = 0; j < 7; j++)
                src[i][j] = 3 + rnd(c->vocab_size - 4);
            src[i][7] = (int32_t)c->eos_token_id;
            const int32_t *p = src[i];
            int len = 8;
            td_result r;
            ck_assert_msg(td_translate_batch(tw, &p, &len, 1, o, &r, err, sizeof err) == 0,
                          "%s", err);
            n_tokens = r.hyps[0].n_tokens;
            td_result_free(&r);
        }
    }
    td_worker_free(tw);
}

/* A streamed answer's first sentences (urgent) are admitted in a group of
 * their own and decode before anything else joins: submitted with 30 texts
 * that would each finish in 1..6 steps, the two urgent texts (16 to 24
 * steps, fewer than SRV_URGENT_MAX_DEFER) still finish first, and no
 * admission takes a text before both are done. Counted in admissions and
 * finishing order, never in time. */
START_TEST(test_urgent_first)
{
    static urgent_watch w;
    enum { N = 32 };
    td_model *m = NULL;
    srv_batcher *b = urgent_start(&w, &m, N);
    const td_config *c = td_model_config(m);
    static td_decode_opts opts[7];
    for (int k = 0; k < 7; k++) {
        td_decode_opts_default(m, &opts[k]);
        opts[k].beam_size = opts[k].num_hypotheses = 1;
        opts[k].max_length = k == 0 ? 24 : k;
    }
    static srv_job jobs[N];
    static int32_t src[N][16], long_src[2][8];
    /* the urgent texts run 16 to 24 steps (fewer than the deferral's
     * bound): the others wait for them throughout */
    long_sources(m, &opts[0], 16, long_src, 2);
    for (int i = 0; i < N; i++) {
        random_job(&jobs[i], src[i], c);
        jobs[i].opts = &opts[i < 2 ? 0 : 1 + rnd(6)];
        jobs[i].urgent = i < 2;
        if (i < 2) {
            jobs[i].src = long_src[i];
            jobs[i].n_src = 8;
        }
    }
    urgent_run(&w, b, m, jobs, N);
    ck_assert_msg(w.order[0] < 2 && w.order[1] < 2,
                  "the urgent texts finish first: the first two done are %d and %d",
                  w.order[0], w.order[1]);
    ck_assert_int_eq(w.admitted_early, 0);
}
END_TEST

/* Other texts wait for urgent ones SRV_URGENT_MAX_DEFER steps at most: two
 * urgent texts that run 36 to 40 steps, then 10 others in the queue; some
 * of those join before the urgent ones are done. */
START_TEST(test_urgent_bounded)
{
    static urgent_watch w;
    enum { N = 12 };
    td_model *m = NULL;
    srv_batcher *b = urgent_start(&w, &m, N);
    static td_decode_opts opts;
    td_decode_opts_default(m, &opts);
    opts.beam_size = opts.num_hypotheses = 1;
    opts.max_length = 40;
    static srv_job jobs[N];
    static int32_t src[N][8];
    long_sources(m, &opts, 36, src, 2);
    long_sources(m, &opts, 0, src + 2, N - 2);
    for (int i = 0; i < N; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].src = src[i];
        jobs[i].n_src = 8;
        jobs[i].opts = &opts;
        jobs[i].urgent = i < 2;
    }
    urgent_run(&w, b, m, jobs, N);
    ck_assert_int_gt(w.admitted_early, 0);
}
END_TEST

/* Urgent texts overtake the texts they decode with: 14 texts that run 12
 * to 16 steps and, behind them in the queue, two urgent ones that run 20
 * to 24 steps; with the urgent rows stepped four more times after each step of
 * all rows, both are done before any of the 14 (without, after all). */
START_TEST(test_urgent_overtake)
{
    static urgent_watch w;
    enum { N = 16, EARLY = 14 };
    td_model *m = NULL;
    srv_batcher *b = urgent_start(&w, &m, N);
    static td_decode_opts opts[2]; /* [0] the urgent texts', [1] the others' */
    for (int k = 0; k < 2; k++) {
        td_decode_opts_default(m, &opts[k]);
        opts[k].beam_size = opts[k].num_hypotheses = 1;
        opts[k].max_length = k == 0 ? 24 : 16;
    }
    static srv_job jobs[N];
    static int32_t src[N][8];
    /* sources whose translations alone run at least max_length - 4 steps */
    long_sources(m, &opts[1], opts[1].max_length - 4, src, EARLY);
    long_sources(m, &opts[0], opts[0].max_length - 4, src + EARLY, N - EARLY);
    for (int i = 0; i < N; i++) {
        const td_decode_opts *o = &opts[i >= EARLY ? 0 : 1];
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].src = src[i];
        jobs[i].n_src = 8;
        jobs[i].opts = o;
        jobs[i].urgent = i >= EARLY;
    }
    /* one submit: all 16 join at the first step (the group up to the last
     * urgent text), so the outcome does not depend on thread timing */
    urgent_run(&w, b, m, jobs, N);
    ck_assert_msg(jobs[w.order[0]].urgent && jobs[w.order[1]].urgent,
                  "the urgent texts finish first: the first two done are %d and %d",
                  w.order[0], w.order[1]);
}
END_TEST

/* ---- fairness -------------------------------------------------------------- */

typedef struct fair_watch {
    watch base; /* its lock and the count of texts done (job_done) */
    int decisions;
    /* under the batcher's lock (its one scheduler thread) */
    const srv_job *late;  /* the late request's job */
    int armed;            /* set (under mu) just before the late submit */
    int admissions_after; /* admissions since armed, up to the late job's */
    int late_taken;
} fair_watch;

static void on_admit_fair(void *ud, int fit, long queued, int free_rows, int rows, int admitted,
                          srv_job *const *taken)
{
    (void)fit, (void)queued, (void)free_rows, (void)rows;
    fair_watch *w = ud;
    pthread_mutex_lock(&w->base.mu);
    w->decisions++;
    pthread_cond_broadcast(&w->base.cv);
    if (w->armed && !w->late_taken && admitted > 0) {
        w->admissions_after++;
        for (int i = 0; i < admitted; i++)
            w->late_taken |= taken[i] == w->late;
    }
    pthread_mutex_unlock(&w->base.mu);
}

/* n_req requests of per_req greedy texts from one owner, queued while a
 * decode of 8 rows runs; then one text from another owner. Returns how
 * many admissions it took for that text to be taken in (counted from just
 * before its submit). */
static int late_admissions(int n_req, int per_req)
{
    static fair_watch w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.base.mu, NULL);
    pthread_cond_init(&w.base.cv, NULL);
    const int total = n_req * per_req + 1;
    td_model *m = NULL;
    srv_batcher *b = new_batcher(&m, 8, total, on_admit_fair, &w, 4);
    const td_config *c = td_model_config(m);
    static td_decode_opts opts;
    td_decode_opts_default(m, &opts);
    opts.beam_size = opts.num_hypotheses = 1;
    opts.max_length = 24;
    srv_job *jobs = calloc((size_t)total, sizeof *jobs);
    int32_t(*src)[8] = calloc((size_t)total, sizeof *src);
    for (int i = 0; i < total; i++) {
        for (int j = 0; j < 7; j++)
            src[i][j] = 3 + rnd(c->vocab_size - 4);
        src[i][7] = (int32_t)c->eos_token_id;
        jobs[i].src = src[i];
        jobs[i].n_src = 8;
        jobs[i].opts = &opts;
    }
    srv_completion big = {.done = job_done, .ud = &w.base, .owner = 1};
    for (int r = 0; r < n_req; r++)
        ck_assert_int_eq(srv_batcher_submit(b, jobs + r * per_req, per_req, 1e18, &big),
                         SRV_SUBMIT_OK);
    /* the decode runs and the queue is deep: a few decisions made */
    pthread_mutex_lock(&w.base.mu);
    while (w.decisions < 3)
        pthread_cond_wait(&w.base.cv, &w.base.mu);
    w.late = &jobs[total - 1];
    w.armed = 1;
    pthread_mutex_unlock(&w.base.mu);
    srv_completion other = {.done = job_done, .ud = &w.base, .owner = 2};
    ck_assert_int_eq(srv_batcher_submit(b, &jobs[total - 1], 1, 1e18, &other), SRV_SUBMIT_OK);
    pthread_mutex_lock(&w.base.mu);
    while (w.base.done < total)
        pthread_cond_wait(&w.base.cv, &w.base.mu);
    pthread_mutex_unlock(&w.base.mu);
    srv_batcher_drain(b, 1e18);
    srv_batcher_free(b);
    td_model_free(m);
    free(jobs);
    free(src);
    ck_assert(w.late_taken);
    return w.admissions_after;
}

/* One request of 150 texts holds the model for nobody: a text that comes
 * while it is queued is taken in at the next admission or the one after
 * (one may run between arming and submitting), not after the 150. */
START_TEST(test_fair_one_large_request)
{
    int a = late_admissions(1, 150);
    printf("test_batcher: behind one request of 150 texts, the late text waited %d admissions\n",
           a);
    ck_assert_msg(a <= 3, "the late text waited %d admissions", a);
}
END_TEST

/* Nor do many requests of one client (40 of 5 texts): they share one place
 * in the fair order, so the other client's text is not behind 40 texts at
 * each place. */
START_TEST(test_fair_one_owner_many_requests)
{
    int a = late_admissions(40, 5);
    printf("test_batcher: behind 40 requests of one owner, the late text waited %d admissions\n",
           a);
    ck_assert_msg(a <= 3, "the late text waited %d admissions", a);
}
END_TEST

/* srv_batcher_feed, the next part of a file admitted before, is not held
 * to max_queue, which refuses a new submit: a parked batcher (nothing
 * taken) with its queue full. */
START_TEST(test_feed_past_full)
{
    td_model *m = NULL;
    watch w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    srv_batcher *b = new_batcher(&m, 4, 2, NULL, NULL, 0);
    const td_config *c = td_model_config(m);
    static td_decode_opts opts;
    td_decode_opts_default(m, &opts);
    opts.beam_size = opts.num_hypotheses = 1;
    opts.max_length = 4;
    static srv_job jobs[4];
    static int32_t src[4][16];
    for (int i = 0; i < 4; i++) {
        random_job(&jobs[i], src[i], c);
        jobs[i].opts = &opts;
    }
    /* parked once the warm-up is over */
    for (int k = 0; !srv_batcher_park(b); k++) {
        ck_assert_int_lt(k, 6000);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    srv_completion comp = {.done = job_done, .ud = &w};
    ck_assert_int_eq(srv_batcher_submit(b, jobs, 2, 1e18, &comp), SRV_SUBMIT_OK);
    ck_assert_int_eq(srv_batcher_submit(b, jobs + 2, 1, 1e18, &comp), SRV_SUBMIT_FULL);
    ck_assert_int_eq(srv_batcher_feed(b, jobs + 2, 1, 1e18, &comp), SRV_SUBMIT_OK);
    ck_assert_int_eq(srv_batcher_queue_depth(b), 3);
    char err[256];
    ck_assert_int_eq(srv_batcher_unpark(b, err, sizeof err), 0);
    pthread_mutex_lock(&w.mu);
    while (w.done < 3)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    srv_batcher_drain(b, 1e18);
    srv_batcher_free(b);
    td_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batcher");
    TCase *tc = tcase_create("admission");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rule);
    tcase_add_test(tc, test_short_steps_rule);
    tcase_add_test(tc, test_urgent_steps_rule);
    tcase_add_test(tc, test_urgent_first);
    tcase_add_test(tc, test_urgent_overtake);
    tcase_add_test(tc, test_urgent_bounded);
    tcase_add_test(tc, test_deep_queue);
    tcase_add_test(tc, test_fair_one_large_request);
    tcase_add_test(tc, test_fair_one_owner_many_requests);
    tcase_add_test(tc, test_feed_past_full);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
