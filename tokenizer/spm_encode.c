/*
 * spm_encode.c - the segmenters of google/sentencepiece over normalized text:
 * unigram (unigram_model.cc, EncodeOptimized), BPE (bpe_model.cc), char and
 * word models, and the processor's PopulateSentencePieceText that turns the
 * (piece, id) result into ids (byte fallback, unknown runs merged).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "spm_internal.h"

static const char kSpaceSymbol[] = "\xe2\x96\x81"; /* U+2581 */
static const float kUnkPenalty = 10.0f;

/* Length of the next BPE/char symbol: PrefixMatcher::PrefixMatch. */
static size_t symbol_len(const spm_model *m, const char *s, size_t len, bool *freeze)
{
    if (m->has_user) {
        size_t u = spm_user_match(&m->user, s, len);
        if (u > 0) {
            *freeze = true;
            return u;
        }
    }
    *freeze = false;
    size_t n = spm_one_char_len((unsigned char)s[0]);
    return n < len ? n : len;
}

/* ---- encode output (PopulateSentencePieceText) ------------------------------ */

typedef struct idout {
    const spm_model *m;
    int32_t *v;
    size_t n, cap;
    bool prev_unk;
    bool oom;
    const char *base;   /* the normalized text, for spans */
    size_t *spans;      /* (cap, 2) offset and length of each id's text, or NULL */
    bool want_spans;
} idout;

static void push_id(idout *o, int32_t id, const char *w, size_t len)
{
    if (o->oom)
        return;
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 64;
        int32_t *nv = ncap <= (size_t)INT_MAX ? realloc(o->v, ncap * sizeof *nv) : NULL;
        if (!nv) {
            o->oom = true;
            return;
        }
        o->v = nv;
        if (o->want_spans) {
            size_t *ns = realloc(o->spans, ncap * 2 * sizeof *ns);
            if (!ns) {
                o->oom = true;
                return;
            }
            o->spans = ns;
        }
        o->cap = ncap;
    }
    if (o->want_spans) {
        o->spans[2 * o->n] = (size_t)(w - o->base);
        o->spans[2 * o->n + 1] = len;
    }
    o->v[o->n++] = id;
}

/* One (piece, id) of the model's EncodeResult: unknown pieces become byte
 * pieces under byte_fallback, else a run of unknowns yields one unk id. */
static void emit(idout *o, const char *w, size_t len, int id)
{
    const spm_model *m = o->m;
    int type = spm_ptype(m, id);
    bool is_unk = type == SPM_UNKNOWN;
    if (type == SPM_CONTROL) {
        push_id(o, id, w, len);
    } else if (is_unk && m->p.byte_fallback) {
        for (size_t i = 0; i < len; i++)
            push_id(o, m->byte_id[(unsigned char)w[i]], w + i, 1);
    } else if (!(is_unk && o->prev_unk)) {
        push_id(o, id, w, len);
    } else if (o->want_spans && o->n > 0 && !o->oom) {
        /* a run of unknowns is one piece whose text grows (the reference
         * appends w to the previous piece) */
        o->spans[2 * (o->n - 1) + 1] = (size_t)(w + len - o->base) - o->spans[2 * (o->n - 1)];
    }
    o->prev_unk = is_unk;
}

/* ---- unigram: unigram::Model::EncodeOptimized ------------------------------- */

typedef struct best_node {
    float score;      /* best path score ending here */
    int32_t id;
    int64_t starts_at; /* -1: not reached */
} best_node;

static int encode_unigram(const spm_model *m, const char *s, size_t size, idout *o)
{
    best_node *best = malloc((size + 1) * sizeof *best);
    if (!best)
        return -1;
    for (size_t i = 0; i <= size; i++)
        best[i] = (best_node){0.0f, -1, -1};
    const float unk_score = m->min_score - kUnkPenalty;
    const spm_trie *t = &m->normal;
    size_t starts_at = 0;
    while (starts_at < size) {
        const float till_here = best[starts_at].score;
        bool has_single_node = false;
        size_t mblen = spm_one_char_len((unsigned char)s[starts_at]);
        if (mblen > size - starts_at)
            mblen = size - starts_at;
        uint32_t node = 0;
        for (size_t key_pos = starts_at; key_pos < size;) {
            int64_t c = spm_trie_next(t, node, (unsigned char)s[key_pos]);
            if (c < 0)
                break;
            node = (uint32_t)c;
            key_pos++;
            int32_t id = t->value[node];
            if (id < 0 || spm_ptype(m, id) == SPM_UNUSED)
                continue;
            best_node *target = &best[key_pos];
            size_t length = key_pos - starts_at;
            /* unigram_model.cc computes the candidate as double, but the
             * released library behaves as if it compared after rounding to
             * float (checked against the Python wheel on exact ties such
             * as "ハ|ハハハハ" vs "ハハハハ|ハ"): compare in float, keep the
             * first (leftmost-start) candidate on ties. */
            double score = spm_ptype(m, id) == SPM_USER_DEFINED
                               ? (double)((float)length * m->max_score) - 0.1
                               : (double)m->p.pieces[id].score;
            double cand = score + (double)till_here;
            if (target->starts_at == -1 || (float)cand > target->score) {
                target->score = (float)cand;
                target->starts_at = (int64_t)starts_at;
                target->id = id;
            }
            if (!has_single_node && length == mblen)
                has_single_node = true;
        }
        if (!has_single_node) {
            best_node *target = &best[starts_at + mblen];
            float cand = unk_score + till_here;
            if (target->starts_at == -1 || cand > target->score) {
                target->score = cand;
                target->starts_at = (int64_t)starts_at;
                target->id = m->unk_id;
            }
        }
        starts_at += mblen;
    }
    /* Backtrack, then emit in text order. Reuse best[].starts_at of the path
     * ends as a forward chain: pos -> next end. */
    size_t count = 0;
    int64_t end = (int64_t)size;
    int64_t next = -1;
    while (end > 0) {
        int64_t st = best[end].starts_at;
        if (st < 0 || st >= end)
            break; /* unreachable for valid state; keeps a corrupt model safe */
        best[end].starts_at = next; /* now: link to the following end */
        next = end;
        end = st;
        count++;
    }
    /* Walk forward from the first end. */
    int64_t cur = next;
    size_t prev_end = 0;
    if (end == 0) {
        for (size_t k = 0; k < count; k++) {
            size_t e = (size_t)cur;
            emit(o, s + prev_end, e - prev_end, best[e].id);
            prev_end = e;
            cur = best[e].starts_at;
        }
    }
    free(best);
    return 0;
}

/* ---- BPE: bpe::Model::SampleEncode with alpha = 0 ---------------------------- */

typedef struct bpe_sym {
    int64_t prev, next; /* -1 at the ends */
    size_t off, len;    /* bytes of normalized text; len 0 once merged away */
    bool freeze;        /* a user-defined symbol: never merged */
} bpe_sym;

typedef struct bpe_pair {
    int64_t left, right;
    float score;
    size_t size; /* merged length when queued; stale when sizes moved on */
} bpe_pair;

/* Agenda order of the reference's SymbolPairComparator: higher score first,
 * then the leftmost pair. */
static bool pair_before(const bpe_pair *a, const bpe_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct bpe_heap {
    bpe_pair *v;
    size_t n, cap;
} bpe_heap;

static int heap_push(bpe_heap *h, bpe_pair p)
{
    if (h->n == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 256;
        bpe_pair *nv = realloc(h->v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        h->v = nv;
        h->cap = ncap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &h->v[up]))
            break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = p;
    return 0;
}

static bpe_pair heap_pop(bpe_heap *h)
{
    bpe_pair top = h->v[0];
    bpe_pair last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && pair_before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!pair_before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

/* rev_merge of the reference: merged string -> the two symbols it was last
 * queued from, for pieces of type UNUSED (resegmented back). Keys compare by
 * content; all strings live in the normalized text. */
typedef struct rev_entry {
    size_t off, len;   /* key; len 0 = empty slot */
    size_t loff, llen; /* left part */
    size_t roff, rlen; /* right part */
} rev_entry;

typedef struct rev_map {
    rev_entry *v;
    size_t cap, n;
} rev_map;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static rev_entry *rev_slot(const rev_map *r, const char *text, const char *s, size_t n)
{
    for (size_t i = hash_bytes(s, n) & (r->cap - 1);; i = (i + 1) & (r->cap - 1)) {
        rev_entry *e = &r->v[i];
        if (e->len == 0 || (e->len == n && memcmp(text + e->off, s, n) == 0))
            return e;
    }
}

static int rev_put(rev_map *r, const char *text, rev_entry in)
{
    if ((r->n + 1) * 2 > r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 64;
        rev_entry *nv = calloc(ncap, sizeof *nv);
        if (!nv)
            return -1;
        rev_map nr = {nv, ncap, 0};
        for (size_t i = 0; i < r->cap; i++) {
            if (r->v[i].len) {
                *rev_slot(&nr, text, text + r->v[i].off, r->v[i].len) = r->v[i];
                nr.n++;
            }
        }
        free(r->v);
        *r = nr;
    }
    rev_entry *e = rev_slot(r, text, text + in.off, in.len);
    if (e->len == 0)
        r->n++;
    *e = in;
    return 0;
}

typedef struct bpe_ctx {
    const spm_model *m;
    const char *text;
    bpe_sym *sym;
    bpe_heap heap;
    rev_map rev;
    bool oom;
} bpe_ctx;

/* MaybeAddNewSymbolPair. */
static void bpe_maybe_add(bpe_ctx *c, int64_t left, int64_t right)
{
    if (left < 0 || right < 0 || c->sym[left].freeze || c->sym[right].freeze)
        return;
    const bpe_sym *l = &c->sym[left], *r = &c->sym[right];
    size_t size = l->len + r->len;
    int32_t id = spm_trie_find(&c->m->normal, c->text + l->off, size);
    if (id < 0)
        return;
    bpe_pair p = {left, right, c->m->p.pieces[id].score, size};
    if (heap_push(&c->heap, p) < 0)
        c->oom = true;
    if (spm_ptype(c->m, id) == SPM_UNUSED) {
        rev_entry e = {l->off, size, l->off, l->len, r->off, r->len};
        if (rev_put(&c->rev, c->text, e) < 0)
            c->oom = true;
    }
}

/* The reference's resegment: unused pieces are split back into the symbols
 * they were merged from. Depth is bounded by the piece length. */
static void bpe_resegment(bpe_ctx *c, idout *o, size_t off, size_t len)
{
    const spm_model *m = c->m;
    int id = spm_piece_to_id(m, c->text + off, len);
    if (spm_ptype(m, id) == SPM_UNUSED && c->rev.cap > 0) {
        rev_entry *e = rev_slot(&c->rev, c->text, c->text + off, len);
        if (e->len != 0) {
            rev_entry copy = *e;
            bpe_resegment(c, o, copy.loff, copy.llen);
            bpe_resegment(c, o, copy.roff, copy.rlen);
            return;
        }
    }
    emit(o, c->text + off, len, id);
}

static int encode_bpe(const spm_model *m, const char *s, size_t size, idout *o)
{
    bpe_ctx c = {.m = m, .text = s};
    size_t nsym = 0;
    c.sym = malloc((size > 0 ? size : 1) * sizeof *c.sym);
    if (!c.sym)
        return -1;
    for (size_t pos = 0; pos < size;) {
        bpe_sym *y = &c.sym[nsym];
        y->len = symbol_len(m, s + pos, size - pos, &y->freeze);
        y->off = pos;
        y->prev = (int64_t)nsym - 1;
        pos += y->len;
        y->next = pos < size ? (int64_t)nsym + 1 : -1;
        nsym++;
    }
    for (size_t i = 1; i < nsym; i++)
        bpe_maybe_add(&c, (int64_t)i - 1, (int64_t)i);
    while (c.heap.n > 0 && !c.oom) {
        bpe_pair top = heap_pop(&c.heap);
        bpe_sym *l = &c.sym[top.left], *r = &c.sym[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size)
            continue; /* stale */
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0)
            c.sym[r->next].prev = top.left;
        r->len = 0;
        bpe_maybe_add(&c, l->prev, top.left);
        bpe_maybe_add(&c, top.left, l->next);
    }
    if (!c.oom && nsym > 0) {
        for (int64_t i = 0; i != -1; i = c.sym[i].next)
            bpe_resegment(&c, o, c.sym[i].off, c.sym[i].len);
    }
    free(c.sym);
    free(c.heap.v);
    free(c.rev.v);
    return c.oom ? -1 : 0;
}

/* ---- char and word models ---------------------------------------------------- */

static void encode_char(const spm_model *m, const char *s, size_t size, idout *o)
{
    for (size_t pos = 0; pos < size;) {
        bool freeze;
        size_t n = symbol_len(m, s + pos, size - pos, &freeze);
        emit(o, s + pos, n, spm_piece_to_id(m, s + pos, n));
        pos += n;
    }
}

/* SplitIntoWords with treat_ws_as_suffix = allow_ws_only_pieces = false, as
 * word::Model calls it: every U+2581 starts a new word. */
static void encode_word(const spm_model *m, const char *s, size_t size, idout *o)
{
    size_t start = 0;
    for (size_t pos = 0; pos < size;) {
        size_t n = spm_one_char_len((unsigned char)s[pos]);
        if (n > size - pos)
            n = size - pos;
        if (pos > 0 && n == 3 && memcmp(s + pos, kSpaceSymbol, 3) == 0) {
            emit(o, s + start, pos - start, spm_piece_to_id(m, s + start, pos - start));
            start = pos;
        }
        pos += n;
    }
    if (size > 0)
        emit(o, s + start, size - start, spm_piece_to_id(m, s + start, size - start));
}

/* ---- public ------------------------------------------------------------------ */

/* Shared by spm_encode and spm_encode_pieces. */
static int encode_impl(const spm_model *m, const char *text, size_t len, int32_t **ids, int *n,
                       char **norm_out, size_t *norm_len, size_t **spans_out)
{
    *ids = NULL;
    *n = 0;
    char *norm;
    size_t nlen;
    if (spm_normalize(m, text, len, &norm, &nlen) < 0)
        return -1;
    idout o = {.m = m, .base = norm, .want_spans = spans_out != NULL};
    int rc = 0;
    switch (m->p.model_type) {
    case SPM_BPE: rc = encode_bpe(m, norm, nlen, &o); break;
    case SPM_CHAR: encode_char(m, norm, nlen, &o); break;
    case SPM_WORD: encode_word(m, norm, nlen, &o); break;
    default: rc = encode_unigram(m, norm, nlen, &o); break;
    }
    if (rc < 0 || o.oom) {
        free(norm);
        free(o.v);
        free(o.spans);
        return -1;
    }
    if (!o.v) {
        o.v = malloc(sizeof *o.v);
        if (o.want_spans && !o.spans)
            o.spans = malloc(2 * sizeof *o.spans);
        if (!o.v || (o.want_spans && !o.spans)) {
            free(norm);
            free(o.v);
            free(o.spans);
            return -1;
        }
    }
    if (norm_len)
        *norm_len = nlen;
    if (norm_out)
        *norm_out = norm;
    else
        free(norm);
    if (spans_out)
        *spans_out = o.spans;
    *ids = o.v;
    *n = (int)o.n;
    return 0;
}

int spm_encode(const spm_model *m, const char *text, size_t len, int32_t **ids, int *n)
{
    return encode_impl(m, text, len, ids, n, NULL, NULL, NULL);
}

int spm_encode_pieces(const spm_model *m, const char *text, size_t len, int32_t **ids, int *n,
                      char **norm, size_t *norm_len, size_t **spans)
{
    return encode_impl(m, text, len, ids, n, norm, norm_len, spans);
}
