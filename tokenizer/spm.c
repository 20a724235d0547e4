/*
 * spm.c - SentencePiece model loading, encoding and decoding in C, following
 * google/sentencepiece: model_interface.cc (piece tables, validation),
 * unigram_model.cc (EncodeOptimized Viterbi), bpe_model.cc (merge agenda),
 * char_model.cc, word_model.cc, and sentencepiece_processor.cc
 * (PopulateSentencePieceText: unknown runs merged, byte fallback; Decode).
 * The wire format is in spm_proto.c, the normalizer in spm_normalizer.c.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm_internal.h"

static const char kSpaceSymbol[] = "\xe2\x96\x81"; /* U+2581 */
static const char kDefaultUnkSurface[] = " \xe2\x81\x87 ";


/* ---- the byte trie ------------------------------------------------------- */

int spm_trie_init(spm_trie *t)
{
    memset(t, 0, sizeof *t);
    t->cap = 1024;
    t->keys = calloc(t->cap, sizeof *t->keys);
    t->child = malloc(t->cap * sizeof *t->child);
    t->vcap = 256;
    t->value = malloc(t->vcap * sizeof *t->value);
    if (!t->keys || !t->child || !t->value) {
        spm_trie_free(t);
        return -1;
    }
    t->nnodes = 1;
    t->value[0] = -1;
    return 0;
}

void spm_trie_free(spm_trie *t)
{
    if (!t)
        return;
    free(t->keys);
    free(t->child);
    free(t->value);
    memset(t, 0, sizeof *t);
}

static size_t trie_slot(uint64_t key, size_t cap)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31)) & (cap - 1);
}

int64_t spm_trie_next(const spm_trie *t, uint32_t node, unsigned char byte)
{
    uint64_t key = (uint64_t)node * 256 + byte + 1;
    for (size_t i = trie_slot(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (t->keys[i] == key)
            return t->child[i];
        if (t->keys[i] == 0)
            return -1;
    }
}

static int trie_grow(spm_trie *t)
{
    size_t ncap = t->cap * 2;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    uint32_t *nc = malloc(ncap * sizeof *nc);
    if (!nk || !nc) {
        free(nk);
        free(nc);
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->keys[i])
            continue;
        size_t j = trie_slot(t->keys[i], ncap);
        while (nk[j])
            j = (j + 1) & (ncap - 1);
        nk[j] = t->keys[i];
        nc[j] = t->child[i];
    }
    free(t->keys);
    free(t->child);
    t->keys = nk;
    t->child = nc;
    t->cap = ncap;
    return 0;
}

int spm_trie_insert(spm_trie *t, const char *key, size_t len, int32_t value)
{
    uint32_t node = 0;
    for (size_t k = 0; k < len; k++) {
        int64_t c = spm_trie_next(t, node, (unsigned char)key[k]);
        if (c < 0) {
            if ((t->nedges + 1) * 2 > t->cap && trie_grow(t) < 0)
                return -1;
            if (t->nnodes == t->vcap) {
                if (t->vcap > UINT32_MAX / 4)
                    return -1;
                int32_t *nv = realloc(t->value, 2 * t->vcap * sizeof *nv);
                if (!nv)
                    return -1;
                t->value = nv;
                t->vcap *= 2;
            }
            c = (int64_t)t->nnodes++;
            t->value[c] = -1;
            uint64_t hk = (uint64_t)node * 256 + (unsigned char)key[k] + 1;
            size_t i = trie_slot(hk, t->cap);
            while (t->keys[i])
                i = (i + 1) & (t->cap - 1);
            t->keys[i] = hk;
            t->child[i] = (uint32_t)c;
            t->nedges++;
        }
        node = (uint32_t)c;
    }
    if (t->value[node] >= 0)
        return 1;
    t->value[node] = value;
    return 0;
}

int32_t spm_trie_find(const spm_trie *t, const char *key, size_t len)
{
    uint32_t node = 0;
    for (size_t k = 0; k < len; k++) {
        int64_t c = spm_trie_next(t, node, (unsigned char)key[k]);
        if (c < 0)
            return -1;
        node = (uint32_t)c;
    }
    return t->value[node];
}

/* ---- piece tables -------------------------------------------------------- */


/* ModelInterface::PieceToId: reserved pieces first, then the others, else unk. */
int spm_piece_to_id(const spm_model *m, const char *s, size_t len)
{
    int32_t id = spm_trie_find(&m->reserved, s, len);
    if (id >= 0)
        return id;
    id = spm_trie_find(&m->normal, s, len);
    return id >= 0 ? id : m->unk_id;
}

/* PieceToByte: "<0x" + two upper-case hex digits + ">" (e.g. "<0x0A>"), exactly
 * as ByteToPiece writes. */
static int piece_to_byte(const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);
    if (!hi || !lo || !s[3] || !s[4])
        return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

/* The user-defined-symbol PrefixMatcher: longest match, 0 when none. */
size_t spm_user_match(const void *ctx, const char *s, size_t len)
{
    const spm_trie *t = ctx;
    uint32_t node = 0;
    size_t best = 0;
    for (size_t k = 0; k < len; k++) {
        int64_t c = spm_trie_next(t, node, (unsigned char)s[k]);
        if (c < 0)
            break;
        node = (uint32_t)c;
        if (t->value[node] >= 0)
            best = k + 1;
    }
    return best;
}

/* ---- load ------------------------------------------------------------------ */

/* Writes "name: what arg" into err. */
static int load_err(char *err, size_t errlen, const char *name, const char *what, const char *arg)
{
    snprintf(err, errlen, "%s: %s%s", name, what, arg);
    return -1;
}

/* ModelInterface::InitializePieces + unigram::Model's score range + the
 * processor's normalizers. */
static int model_build(spm_model *m, const char *name, char *err, size_t errlen)
{
    spm_proto *p = &m->p;
    if (spm_trie_init(&m->normal) < 0 || spm_trie_init(&m->reserved) < 0 ||
        spm_trie_init(&m->user) < 0)
        return load_err(err, errlen, name, "out of memory", "");
    m->piece_byte = malloc((size_t)(p->npieces > 0 ? p->npieces : 1) * sizeof *m->piece_byte);
    if (!m->piece_byte)
        return load_err(err, errlen, name, "out of memory", "");
    m->unk_id = -1;
    bool byte_found[256] = {false};
    m->min_score = FLT_MAX;
    m->max_score = FLT_MIN; /* sic: the reference starts from FLT_MIN, not -FLT_MAX */
    for (int i = 0; i < p->npieces; i++) {
        const spm_piece *pc = &p->pieces[i];
        m->piece_byte[i] = (int16_t)piece_to_byte(pc->s ? pc->s : "", pc->len);
        if (pc->len == 0)
            return load_err(err, errlen, name, "pieces: piece must not be empty", "");
        bool normal = pc->type == SPM_NORMAL || pc->type == SPM_USER_DEFINED ||
                      pc->type == SPM_UNUSED;
        int rc = spm_trie_insert(normal ? &m->normal : &m->reserved, pc->s, pc->len, i);
        if (rc < 0)
            return load_err(err, errlen, name, "out of memory", "");
        if (rc > 0)
            return load_err(err, errlen, name, "pieces: piece is already defined: ", pc->s);
        if (pc->type == SPM_USER_DEFINED) {
            if (spm_trie_insert(&m->user, pc->s, pc->len, i) < 0)
                return load_err(err, errlen, name, "out of memory", "");
            m->has_user = true;
        }
        if (pc->type == SPM_UNUSED)
            m->has_unused = true;
        if (pc->type == SPM_NORMAL) {
            m->min_score = pc->score < m->min_score ? pc->score : m->min_score;
            m->max_score = pc->score > m->max_score ? pc->score : m->max_score;
        }
        if (pc->type == SPM_UNKNOWN) {
            if (m->unk_id >= 0)
                return load_err(err, errlen, name, "pieces: unk is already defined", "");
            m->unk_id = i;
        }
        if (pc->type == SPM_BYTE) {
            if (!p->byte_fallback)
                return load_err(err, errlen, name,
                                "pieces: byte piece found although byte_fallback is false: ",
                                pc->s);
            if (m->piece_byte[i] < 0)
                return load_err(err, errlen, name, "pieces: invalid byte piece: ", pc->s);
            byte_found[m->piece_byte[i]] = true;
        }
    }
    if (m->unk_id < 0)
        return load_err(err, errlen, name, "pieces: unk is not defined", "");
    if (p->byte_fallback) {
        for (int b = 0; b < 256; b++) {
            if (!byte_found[b])
                return load_err(err, errlen, name,
                                "pieces: there are not 256 byte pieces although "
                                "trainer_spec.byte_fallback is true", "");
            char bp[8];
            snprintf(bp, sizeof bp, "<0x%02X>", (unsigned)b);
            m->byte_id[b] = spm_piece_to_id(m, bp, 6);
        }
    }
    if (p->model_type == SPM_UNIGRAM && m->normal.nnodes <= 1)
        return load_err(err, errlen, name, "pieces: no normal piece for the unigram trie", "");
    if (spm_norm_init(&m->norm, &p->norm, p->treat_whitespace_as_suffix, name, err, errlen) < 0)
        return -1;
    if (p->has_denorm && p->denorm.charsmap_len > 0) {
        char dname[512];
        snprintf(dname, sizeof dname, "%s: denormalizer_spec", name);
        if (spm_norm_init(&m->denorm, &p->denorm, false, dname, err, errlen) < 0)
            return -1;
        m->has_denorm = true;
    }
    return 0;
}

int spm_load_mem(spm_model **out, const void *data, size_t size, const char *name, char *err,
                 size_t errlen)
{
    *out = NULL;
    if (!name)
        name = "<memory>";
    spm_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    if (spm_proto_parse(&m->p, data, size, name, err, errlen) < 0 ||
        model_build(m, name, err, errlen) < 0) {
        spm_free(m);
        return -1;
    }
    *out = m;
    return 0;
}


int spm_load(spm_model **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    int not_regular;
    FILE *f = spm_fopen_regular(path, &not_regular);
    if (!f) {
        snprintf(err, errlen, "%s: %s", path,
                 not_regular ? "not a regular file" : "cannot open");
        return -1;
    }
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            if (ncap > ((size_t)1 << 31)) {
                snprintf(err, errlen, "%s: file larger than 2 GiB", path);
                goto fail;
            }
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        goto fail;
    }
    fclose(f);
    int rc = spm_load_mem(out, buf, n, path, err, errlen);
    free(buf);
    return rc;
fail:
    fclose(f);
    free(buf);
    return -1;
}

void spm_free(spm_model *m)
{
    if (!m)
        return;
    spm_trie_free(&m->normal);
    spm_trie_free(&m->reserved);
    spm_trie_free(&m->user);
    spm_norm_free(&m->norm);
    spm_norm_free(&m->denorm);
    free(m->piece_byte);
    spm_proto_clear(&m->p);
    free(m);
}

/* ---- accessors ------------------------------------------------------------- */

int spm_size(const spm_model *m) { return m->p.npieces; }
spm_model_type spm_type(const spm_model *m) { return (spm_model_type)m->p.model_type; }

const char *spm_id_to_piece(const spm_model *m, int id)
{
    return id >= 0 && id < m->p.npieces ? m->p.pieces[id].s : NULL;
}

spm_piece_type spm_piece_kind(const spm_model *m, int id)
{
    return id >= 0 && id < m->p.npieces ? (spm_piece_type)spm_ptype(m, id) : SPM_UNKNOWN;
}

float spm_piece_score(const spm_model *m, int id)
{
    return id >= 0 && id < m->p.npieces ? m->p.pieces[id].score : 0.0f;
}

/* SentencePieceProcessor::{unk,bos,eos,pad}_id: the id of the named piece
 * when it has the expected type, else -1. */
static int special_id(const spm_model *m, const char *piece, const char *def, int type)
{
    const char *s = piece && piece[0] ? piece : def;
    int id = spm_piece_to_id(m, s, strlen(s));
    return spm_ptype(m, id) == type ? id : -1;
}

int spm_unk_id(const spm_model *m) { return special_id(m, m->p.unk_piece, "<unk>", SPM_UNKNOWN); }
int spm_bos_id(const spm_model *m) { return special_id(m, m->p.bos_piece, "<s>", SPM_CONTROL); }
int spm_eos_id(const spm_model *m) { return special_id(m, m->p.eos_piece, "</s>", SPM_CONTROL); }
int spm_pad_id(const spm_model *m) { return special_id(m, m->p.pad_piece, "<pad>", SPM_CONTROL); }

int spm_normalize(const spm_model *m, const char *text, size_t len, char **out, size_t *out_len)
{
    return spm_norm_apply(&m->norm, m->has_user ? spm_user_match : NULL, &m->user, text, len, out,
                          out_len);
}


/* ---- decode: SentencePieceProcessor::Decode -------------------------------- */

/* ProcessBytePieces: pending byte pieces become UTF-8 characters; each byte
 * that does not start a valid character becomes U+FFFD. */
static int flush_bytes(spm_buf *text, spm_buf *bytes)
{
    static const char kReplacementChar[] = "\xef\xbf\xbd";
    int rc = 0;
    for (size_t off = 0; off < bytes->n && rc == 0;) {
        size_t used;
        if (spm_valid_decode_utf8(bytes->p + off, bytes->n - off, &used))
            rc = spm_buf_put(text, bytes->p + off, used);
        else
            rc = spm_buf_put(text, kReplacementChar, 3);
        off += used;
    }
    bytes->n = 0;
    return rc;
}

/* Appends piece with every U+2581 replaced by a space. */
static int put_unescaped(spm_buf *text, const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i + 3 <= n;) {
        if (memcmp(s + i, kSpaceSymbol, 3) == 0) {
            if (spm_buf_put(text, s + start, i - start) < 0 || spm_buf_put(text, " ", 1) < 0)
                return -1;
            i += 3;
            start = i;
        } else {
            i++;
        }
    }
    return spm_buf_put(text, s + start, n - start);
}

/* The decoder shared by spm_decode and spm_decode_pieces: n pieces given as
 * strings (SentencePieceProcessor::Decode works on pieces: the id of each is
 * PieceToId(piece)). A piece the model does not know is emitted verbatim,
 * as the reference's DecodeSentencePiece does for a non-<unk> unknown. */
static int decode_core(const spm_model *m, const char *const *ps, const size_t *pl, int n,
                       char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    spm_buf out = {0}, bytes = {0};
    int rc = spm_buf_reserve(&out, 16);
    if (rc == 0)
        out.p[0] = '\0';
    const char *unk_surface = m->p.unk_surface ? m->p.unk_surface : kDefaultUnkSurface;
    const bool strip_bos_ws = m->p.norm.add_dummy_prefix || m->p.norm.remove_extra_whitespaces;
    bool is_bos_ws = true, bos_ws_seen = false;
    const int unk = spm_unk_id(m);
    for (int i = 0; i < n && rc == 0; i++) {
        int id = spm_piece_to_id(m, ps[i], pl[i]);
        int type = spm_ptype(m, id);
        if (type == SPM_BYTE) {
            unsigned char b = (unsigned char)m->piece_byte[id];
            rc = spm_buf_put(&bytes, &b, 1);
            continue;
        }
        rc = flush_bytes(&out, &bytes);
        if (rc != 0)
            break;
        if (bos_ws_seen || out.n > 0)
            is_bos_ws = false;
        bos_ws_seen = false;
        if (type == SPM_CONTROL)
            continue;
        if (type == SPM_UNKNOWN) {
            const spm_piece *up = unk >= 0 ? &m->p.pieces[unk] : NULL;
            if (up && up->len == pl[i] && memcmp(up->s, ps[i], pl[i]) == 0)
                rc = spm_buf_put(&out, unk_surface, strlen(unk_surface));
            else
                rc = spm_buf_put(&out, ps[i], pl[i]); /* verbatim */
            continue;
        }
        const char *s = ps[i];
        size_t sn = pl[i];
        if (is_bos_ws && strip_bos_ws && sn >= 3 && memcmp(s, kSpaceSymbol, 3) == 0) {
            s += 3;
            sn -= 3;
            /* with remove_extra_whitespaces every leading space goes */
            bos_ws_seen = !m->p.norm.remove_extra_whitespaces;
        }
        rc = put_unescaped(&out, s, sn);
    }
    if (rc == 0)
        rc = flush_bytes(&out, &bytes);
    free(bytes.p);
    if (rc == 0 && m->has_denorm) {
        char *d;
        size_t dn;
        rc = spm_norm_apply(&m->denorm, NULL, NULL, out.p, out.n, &d, &dn);
        if (rc == 0) {
            free(out.p);
            out.p = d;
            out.n = dn;
        }
    }
    if (rc != 0) {
        free(out.p);
        return -1;
    }
    *text = out.p;
    *len = out.n;
    return 0;
}

/* Ids outside [0, size) are skipped (the reference rejects the whole call
 * with "Invalid id"; our contract only fails on out-of-memory). */
int spm_decode(const spm_model *m, const int32_t *ids, int n, char **text, size_t *len)
{
    const char **ps = malloc((size_t)(n > 0 ? n : 1) * sizeof(char *));
    size_t *pl = malloc((size_t)(n > 0 ? n : 1) * sizeof(size_t));
    int k = 0, rc = -1;
    if (ps && pl) {
        for (int i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= m->p.npieces)
                continue;
            ps[k] = m->p.pieces[ids[i]].s;
            pl[k] = m->p.pieces[ids[i]].len;
            k++;
        }
        rc = decode_core(m, ps, pl, k, text, len);
    }
    free(ps);
    free(pl);
    return rc;
}

int spm_decode_pieces(const spm_model *m, const char *const *pieces, int n, char **text,
                      size_t *len)
{
    size_t *pl = malloc((size_t)(n > 0 ? n : 1) * sizeof(size_t));
    if (!pl)
        return -1;
    for (int i = 0; i < n; i++)
        pl[i] = strlen(pieces[i]);
    int rc = decode_core(m, pieces, pl, n, text, len);
    free(pl);
    return rc;
}
