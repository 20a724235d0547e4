/*
 * cache.c - the translation cache (cache.h): a hash table of entries on a
 * list by recency, under one lock; each entry holds its key (the model,
 * the options, the source ids and the attention selection) and its own
 * copy of the engine's result.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

typedef struct entry {
    struct entry *hnext;       /* the bucket's chain */
    struct entry *prev, *next; /* recency: head the most recent */
    uint64_t hash;
    const void *model;
    unsigned generation;
    int beam_size, num_hypotheses, max_length, return_attention;
    float length_penalty;
    int n_src, n_layers, n_heads, n_prefix; /* ids: src, layers, heads, prefix */
    size_t bytes;              /* what it counts against the bound */
    td_result res;
    int32_t ids[];             /* n_src source ids, then the layers, then the heads */
} entry;

struct srv_cache {
    pthread_mutex_t mu;
    entry **buckets;
    size_t n_buckets;          /* a power of two */
    long n_entries;
    entry *head, *tail;
    size_t bytes, max_bytes;
    uint64_t hits, misses, evictions;
};

/* ---- keys ------------------------------------------------------------------ */

/* The attention selection a key holds: none unless attention is asked. */
static void selection(const td_decode_opts *o, int *nl, int *nh)
{
    *nl = o->return_attention && o->attn_layers ? o->n_attn_layers : 0;
    *nh = o->return_attention && o->attn_heads ? o->n_attn_heads : 0;
}

/* The forced target prefix a key holds: a multilingual model's target
 * language (two targets of one source never share an entry). */
static int prefix_len(const td_decode_opts *o)
{
    return o->n_prefix > 0 ? o->n_prefix : 0;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL; /* FNV-1a */
    return h;
}

static uint64_t key_hash(const srv_cache_key *k)
{
    const td_decode_opts *o = k->opts;
    int nl, nh;
    selection(o, &nl, &nh);
    int v[6] = {o->beam_size, o->num_hypotheses, o->max_length, !!o->return_attention, nl, nh};
    uint64_t h = 1469598103934665603ULL;
    h = mix(h, &k->model, sizeof k->model);
    h = mix(h, &k->generation, sizeof k->generation);
    h = mix(h, v, sizeof v);
    h = mix(h, &o->length_penalty, sizeof o->length_penalty);
    h = mix(h, k->src, (size_t)k->n_src * sizeof *k->src);
    const int np = prefix_len(o);
    h = mix(h, &np, sizeof np);
    if (np)
        h = mix(h, o->prefix, (size_t)np * sizeof *o->prefix);
    if (nl)
        h = mix(h, o->attn_layers, (size_t)nl * sizeof *o->attn_layers);
    if (nh)
        h = mix(h, o->attn_heads, (size_t)nh * sizeof *o->attn_heads);
    return h;
}

static int key_equal(const entry *e, uint64_t hash, const srv_cache_key *k)
{
    const td_decode_opts *o = k->opts;
    int nl, nh;
    selection(o, &nl, &nh);
    if (e->hash != hash || e->model != k->model || e->generation != k->generation ||
        e->beam_size != o->beam_size || e->num_hypotheses != o->num_hypotheses ||
        e->max_length != o->max_length || e->return_attention != !!o->return_attention ||
        memcmp(&e->length_penalty, &o->length_penalty, sizeof e->length_penalty) != 0 ||
        e->n_src != k->n_src || e->n_layers != nl || e->n_heads != nh ||
        e->n_prefix != prefix_len(o))
        return 0;
    if (memcmp(e->ids, k->src, (size_t)k->n_src * sizeof *k->src) != 0)
        return 0;
    for (int i = 0; i < nl; i++)
        if (e->ids[e->n_src + i] != o->attn_layers[i])
            return 0;
    for (int i = 0; i < nh; i++)
        if (e->ids[e->n_src + nl + i] != o->attn_heads[i])
            return 0;
    /* the forced target prefix: a multilingual model's target language */
    for (int i = 0; i < e->n_prefix; i++)
        if (e->ids[e->n_src + nl + nh + i] != o->prefix[i])
            return 0;
    return 1;
}

/* ---- results ---------------------------------------------------------------- */

/* A deep copy of src into *dst; its bytes into *bytes. 0, or -1 when out
 * of memory (dst then holds nothing). */
static int result_copy(td_result *dst, const td_result *src, size_t *bytes)
{
    memset(dst, 0, sizeof *dst);
    size_t b = 0;
    int n = src->n_hyps;
    dst->hyps = calloc((size_t)(n > 0 ? n : 1), sizeof *dst->hyps);
    if (!dst->hyps)
        return -1;
    dst->n_hyps = n;
    b += (size_t)n * sizeof *dst->hyps;
    for (int i = 0; i < n; i++) {
        const td_hypothesis *h = &src->hyps[i];
        size_t tb = (size_t)h->n_tokens * sizeof *h->tokens;
        dst->hyps[i].tokens = malloc(tb ? tb : 1);
        if (!dst->hyps[i].tokens)
            goto oom;
        memcpy(dst->hyps[i].tokens, h->tokens, tb);
        dst->hyps[i].n_tokens = h->n_tokens;
        dst->hyps[i].score = h->score;
        b += tb;
    }
    if (src->attention) {
        size_t cells = (size_t)src->attn_n_layers * (size_t)src->attn_n_heads *
                       (size_t)src->attn_n_t * (size_t)src->attn_n_s;
        dst->attention = malloc(cells ? cells * sizeof(float) : 1);
        dst->attn_layer_ids = malloc((size_t)(src->attn_n_layers + 1) * sizeof(int));
        dst->attn_head_ids = malloc((size_t)(src->attn_n_heads + 1) * sizeof(int));
        if (!dst->attention || !dst->attn_layer_ids || !dst->attn_head_ids)
            goto oom;
        memcpy(dst->attention, src->attention, cells * sizeof(float));
        memcpy(dst->attn_layer_ids, src->attn_layer_ids,
               (size_t)src->attn_n_layers * sizeof(int));
        memcpy(dst->attn_head_ids, src->attn_head_ids, (size_t)src->attn_n_heads * sizeof(int));
        dst->attn_n_layers = src->attn_n_layers;
        dst->attn_n_heads = src->attn_n_heads;
        dst->attn_n_t = src->attn_n_t;
        dst->attn_n_s = src->attn_n_s;
        b += cells * sizeof(float) +
             (size_t)(src->attn_n_layers + src->attn_n_heads) * sizeof(int);
    }
    *bytes = b;
    return 0;
oom:
    td_result_free(dst);
    return -1;
}

/* ---- the table and the list --------------------------------------------------- */

srv_cache *srv_cache_new(size_t max_bytes)
{
    if (max_bytes == 0)
        return NULL;
    srv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->n_buckets = 1024;
    c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    c->max_bytes = max_bytes;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void list_unlink(srv_cache *c, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void list_push(srv_cache *c, entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

/* Takes e out of the table and the list and frees it. */
static void remove_entry(srv_cache *c, entry *e)
{
    entry **p = &c->buckets[e->hash & (c->n_buckets - 1)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    list_unlink(c, e);
    c->bytes -= e->bytes;
    c->n_entries--;
    td_result_free(&e->res);
    free(e);
}

/* Twice the buckets once there are two entries a bucket (a failed growth
 * leaves the chains longer, nothing else). */
static void maybe_grow(srv_cache *c)
{
    if ((size_t)c->n_entries < 2 * c->n_buckets)
        return;
    size_t n = c->n_buckets * 2;
    entry **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < c->n_buckets; i++)
        for (entry *e = c->buckets[i], *next; e; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(c->buckets);
    c->buckets = b;
    c->n_buckets = n;
}

static entry *find(srv_cache *c, uint64_t hash, const srv_cache_key *k)
{
    for (entry *e = c->buckets[hash & (c->n_buckets - 1)]; e; e = e->hnext)
        if (key_equal(e, hash, k))
            return e;
    return NULL;
}

int srv_cache_get(srv_cache *c, const srv_cache_key *k, td_result *out)
{
    if (!c)
        return 0;
    uint64_t hash = key_hash(k);
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, hash, k);
    size_t b;
    int hit = e && result_copy(out, &e->res, &b) == 0;
    if (hit) {
        list_unlink(c, e);
        list_push(c, e);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void srv_cache_put(srv_cache *c, const srv_cache_key *k, const td_result *res)
{
    if (!c)
        return;
    int nl, nh;
    selection(k->opts, &nl, &nh);
    const int np = prefix_len(k->opts);
    size_t tail = (size_t)(k->n_src + nl + nh + np) * sizeof(int32_t);
    entry *e = calloc(1, sizeof *e + tail);
    size_t rb = 0;
    if (!e)
        return;
    if (result_copy(&e->res, res, &rb) != 0) {
        free(e);
        return;
    }
    const td_decode_opts *o = k->opts;
    e->hash = key_hash(k);
    e->model = k->model;
    e->generation = k->generation;
    e->beam_size = o->beam_size;
    e->num_hypotheses = o->num_hypotheses;
    e->max_length = o->max_length;
    e->return_attention = !!o->return_attention;
    e->length_penalty = o->length_penalty;
    e->n_src = k->n_src;
    e->n_layers = nl;
    e->n_heads = nh;
    memcpy(e->ids, k->src, (size_t)k->n_src * sizeof *k->src);
    for (int i = 0; i < nl; i++)
        e->ids[k->n_src + i] = o->attn_layers[i];
    for (int i = 0; i < nh; i++)
        e->ids[k->n_src + nl + i] = o->attn_heads[i];
    e->n_prefix = np;
    for (int i = 0; i < np; i++)
        e->ids[k->n_src + nl + nh + i] = o->prefix[i];
    e->bytes = sizeof *e + tail + rb;
    pthread_mutex_lock(&c->mu);
    entry *old = e->bytes <= c->max_bytes ? find(c, e->hash, k) : NULL;
    if (e->bytes > c->max_bytes || old) {
        /* larger than the whole cache, or stored meanwhile by another worker */
        pthread_mutex_unlock(&c->mu);
        td_result_free(&e->res);
        free(e);
        return;
    }
    while (c->tail && c->bytes + e->bytes > c->max_bytes) {
        remove_entry(c, c->tail);
        c->evictions++;
    }
    size_t bi = e->hash & (c->n_buckets - 1);
    e->hnext = c->buckets[bi];
    c->buckets[bi] = e;
    list_push(c, e);
    c->bytes += e->bytes;
    c->n_entries++;
    maybe_grow(c);
    pthread_mutex_unlock(&c->mu);
}

void srv_cache_drop_model(srv_cache *c, const void *model)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    for (entry *e = c->head, *next; e; e = next) {
        next = e->next;
        if (e->model == model)
            remove_entry(c, e);
    }
    pthread_mutex_unlock(&c->mu);
}

void srv_cache_stats_get(srv_cache *c, srv_cache_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    s->hits = c->hits;
    s->misses = c->misses;
    s->evictions = c->evictions;
    s->bytes = c->bytes;
    s->max_bytes = c->max_bytes;
    s->entries = c->n_entries;
    pthread_mutex_unlock(&c->mu);
}

void srv_cache_free(srv_cache *c)
{
    if (!c)
        return;
    while (c->head)
        remove_entry(c, c->head);
    free(c->buckets);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
