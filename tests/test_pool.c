/*
 * test_pool.c - models sharing the engine workers (server/service/pool.h):
 * batchers of three fixture models (two of one shape, one of another) on
 * a pool of one seat, its worker bound to one model after the other.
 *
 *   - every text gets what a worker of its own model gives it alone
 *     (td_translate_batch), whichever model the seat served before;
 *   - fairness across models: while one model has a deep queue of long
 *     texts (each step slowed by the test hook), a text of another model
 *     finishes long before that queue is through (counted in texts, not
 *     time): the seat takes no more of the first model's texts once the
 *     other waits, finishes its running ones and goes to the other;
 *   - a parked model (put away) is not served: its texts queue, its
 *     on_wake is called once, and after srv_batcher_unpark they run;
 *   - a model's batcher freed while others go on (it detaches);
 *   - the seat's memory is counted once (srv_pool_scratch_bytes), and a
 *     batcher on a shared pool reports none of its own.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher.h"
#include "pool.h"

enum { N_MODELS = 3, MAX_BATCH = 8, SRC = 10, N_DEEP = 160, N_MIX = 12 };
static const char *const k_fixtures[N_MODELS] = {"marian_tied", "marian_tied_f16",
                                                 "ext_relative"};

typedef struct watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done[N_MODELS];
    int others_done_at; /* model 0's texts done when model 2's text after the
                           mixed ones finished */
    int bad;
    char why[256];
} watch;

typedef struct job_ud {
    watch *w;
    int model;
    const td_result *want; /* what the model's own worker gives the text */
} job_ud;

static td_model *g_m[N_MODELS];
static srv_batcher *g_b[N_MODELS];
static srv_pool *g_pool;
static atomic_int g_woken;

static void job_done(srv_job *j, void *ud)
{
    job_ud *u = ud;
    watch *w = u->w;
    pthread_mutex_lock(&w->mu);
    const td_result *a = &j->res, *b = u->want;
    int same = j->status == SRV_JOB_DONE && a->n_hyps == b->n_hyps &&
               a->hyps[0].n_tokens == b->hyps[0].n_tokens &&
               !memcmp(a->hyps[0].tokens, b->hyps[0].tokens,
                       (size_t)a->hyps[0].n_tokens * sizeof(int32_t));
    if (!same && !w->bad) {
        w->bad = 1;
        snprintf(w->why, sizeof w->why, "model %d: status %d, not its own worker's tokens",
                 u->model, j->status);
    }
    if (j->status == SRV_JOB_DONE)
        td_result_free(&j->res);
    if (u->model == 2 && w->done[2] == N_MIX) /* its text after the mixed ones */
        w->others_done_at = w->done[0];
    w->done[u->model]++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void on_wake(void *ud)
{
    (void)ud;
    atomic_fetch_add(&g_woken, 1);
}

static void make_src(int32_t *src, int n, int seed, const td_config *c)
{
    for (int k = 0; k + 1 < n; k++)
        src[k] = 3 + (seed * 31 + k * 7) % (c->vocab_size - 4);
    src[n - 1] = (int32_t)c->eos_token_id;
}

static void wait_done(watch *w, int model, int n)
{
    pthread_mutex_lock(&w->mu);
    while (w->done[model] < n)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static void setup(void)
{
    char err[512];
    const srv_pool_opts po = {.seats = 1, .max_batch = MAX_BATCH};
    ck_assert_msg(srv_pool_init(&g_pool, &po, err, sizeof err) == 0, "%s", err);
    for (int k = 0; k < N_MODELS; k++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/fixtures/%s", TD_TEST_DATA, k_fixtures[k]);
        td_load_opts lo = {.device = "cpu", .n_threads = 1};
        ck_assert_msg(td_model_load(&g_m[k], dir, &lo, err, sizeof err) == 0, "%s", err);
        srv_batcher_opts bo = {.model = g_m[k],
                               .pool = g_pool,
                               .warm_up_token = (int32_t)td_model_config(g_m[k])->eos_token_id,
                               .workers = 1,
                               .threads = 1,
                               .max_batch_size = MAX_BATCH,
                               .max_batch_tokens = 1 << 20,
                               .max_queue = 4096,
                               .max_src_len = SRC,
                               .max_length = 40,
                               .max_beam = 2,
                               .grow = 1,
                               .scheduler = SRV_SCHED_INFLIGHT,
                               .on_wake = on_wake,
                               /* model 0's steps are slow: its queue lasts */
                               .test_step_delay_ms = k == 0 ? 2 : 0};
        td_decode_opts_default(g_m[k], &bo.warm_up);
        ck_assert_msg(srv_batcher_init(&g_b[k], &bo, NULL, err, sizeof err) == 0, "%s", err);
    }
}

/* The expected results: each text alone on a worker of its own model. */
static void expected(int k, int32_t (*src)[SRC], const int *len, const td_decode_opts *o,
                     td_result *want, int n)
{
    char err[512];
    td_worker *w;
    td_worker_opts wo = {.max_batch = 1, .max_src_len = SRC, .max_length = 40, .max_beam = 2,
                         .n_threads = 1};
    ck_assert_msg(td_worker_init(&w, g_m[k], &wo, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < n; i++) {
        const int32_t *s = src[i];
        ck_assert_msg(td_translate_batch(w, &s, &len[i], 1, o, &want[i], err, sizeof err) == 0,
                      "%s", err);
    }
    td_worker_free(w);
}

START_TEST(test_shared_seat)
{
    setup();
    watch w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    td_decode_opts o[N_MODELS];
    static int32_t src[N_MODELS][N_DEEP][SRC];
    static int len[N_MODELS][N_DEEP];
    static td_result want[N_MODELS][N_DEEP];
    static srv_job jobs[N_MODELS][N_DEEP];
    job_ud ud[N_MODELS][N_DEEP];
    for (int k = 0; k < N_MODELS; k++) {
        td_decode_opts_default(g_m[k], &o[k]);
        o[k].beam_size = 1 + k % 2;
        o[k].num_hypotheses = 1;
        o[k].max_length = 40;
        for (int i = 0; i < N_DEEP; i++) {
            len[k][i] = 3 + (i + k) % (SRC - 3);
            make_src(src[k][i], len[k][i], i + 100 * k, td_model_config(g_m[k]));
        }
        expected(k, src[k], len[k], &o[k], want[k], N_DEEP);
        for (int i = 0; i < N_DEEP; i++) {
            memset(&jobs[k][i], 0, sizeof jobs[k][i]);
            jobs[k][i].src = src[k][i];
            jobs[k][i].n_src = len[k][i];
            jobs[k][i].opts = &o[k];
            ud[k][i] = (job_ud){.w = &w, .model = k, .want = &want[k][i]};
        }
    }
    /* models taking turns on the seat, texts a few at a time */
    for (int i = 0; i < N_MIX; i++)
        for (int k = 0; k < N_MODELS; k++) {
            srv_completion c = {.done = job_done, .ud = &ud[k][i]};
            ck_assert_int_eq(srv_batcher_submit(g_b[k], &jobs[k][i], 1, 1e18, &c),
                             SRV_SUBMIT_OK);
        }
    for (int k = 0; k < N_MODELS; k++)
        wait_done(&w, k, N_MIX);
    ck_assert_msg(!w.bad, "%s", w.why);
    ck_assert_uint_gt(srv_pool_scratch_bytes(g_pool), 0);
    ck_assert_uint_eq(srv_batcher_scratch_bytes(g_b[0]), 0); /* the pool's, counted once */
    /* fairness: model 0's deep queue, then one text of model 2 */
    for (int i = N_MIX; i < N_DEEP; i++) {
        srv_completion c = {.done = job_done, .ud = &ud[0][i]};
        ck_assert_int_eq(srv_batcher_submit(g_b[0], &jobs[0][i], 1, 1e18, &c), SRV_SUBMIT_OK);
    }
    wait_done(&w, 0, N_MIX + 2 * MAX_BATCH); /* model 0 has the seat */
    srv_completion c2 = {.done = job_done, .ud = &ud[2][N_MIX]};
    ck_assert_int_eq(srv_batcher_submit(g_b[2], &jobs[2][N_MIX], 1, 1e18, &c2), SRV_SUBMIT_OK);
    wait_done(&w, 2, N_MIX + 1);
    wait_done(&w, 0, N_DEEP);
    printf("test_pool: model 2's text done after %d of model 0's %d texts\n", w.others_done_at,
           N_DEEP);
    ck_assert_msg(w.others_done_at < N_DEEP / 2,
                  "model 2 waited for %d of model 0's %d texts", w.others_done_at, N_DEEP);
    ck_assert_msg(!w.bad, "%s", w.why);
    /* model 1 put away: its text waits, unserved, until it is unparked */
    ck_assert_int_eq(srv_batcher_park(g_b[1]), 1);
    srv_completion c1 = {.done = job_done, .ud = &ud[1][N_MIX]};
    ck_assert_int_eq(srv_batcher_submit(g_b[1], &jobs[1][N_MIX], 1, 1e18, &c1), SRV_SUBMIT_OK);
    ck_assert_int_eq(atomic_load(&g_woken), 1);
    for (int i = N_MIX + 1; i < N_MIX + 5; i++) { /* the others go on meanwhile */
        srv_completion c = {.done = job_done, .ud = &ud[2][i]};
        ck_assert_int_eq(srv_batcher_submit(g_b[2], &jobs[2][i], 1, 1e18, &c), SRV_SUBMIT_OK);
    }
    wait_done(&w, 2, N_MIX + 5);
    pthread_mutex_lock(&w.mu);
    ck_assert_int_eq(w.done[1], N_MIX);
    pthread_mutex_unlock(&w.mu);
    ck_assert_int_eq(srv_batcher_queue_depth(g_b[1]), 1);
    char err[256];
    ck_assert_int_eq(srv_batcher_unpark(g_b[1], err, sizeof err), 0);
    wait_done(&w, 1, N_MIX + 1);
    /* model 2's batcher freed; the others are still served */
    srv_batcher_drain(g_b[2], 1e18);
    srv_batcher_free(g_b[2]);
    g_b[2] = NULL;
    srv_completion c0 = {.done = job_done, .ud = &ud[1][N_MIX + 1]};
    ck_assert_int_eq(srv_batcher_submit(g_b[1], &jobs[1][N_MIX + 1], 1, 1e18, &c0),
                     SRV_SUBMIT_OK);
    wait_done(&w, 1, N_MIX + 2);
    ck_assert_msg(!w.bad, "%s", w.why);
    for (int k = 0; k < N_MODELS; k++) {
        if (g_b[k]) {
            srv_batcher_drain(g_b[k], 1e18);
            srv_batcher_free(g_b[k]);
        }
        for (int i = 0; i < N_DEEP; i++)
            td_result_free(&want[k][i]);
    }
    srv_pool_free(g_pool);
    for (int k = 0; k < N_MODELS; k++)
        td_model_free(g_m[k]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_shared_seat);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
