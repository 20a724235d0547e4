/*
 * spm_proto.c - a small bounds-checked protobuf reader for sentencepiece's
 * ModelProto (src/sentencepiece_model.proto): varints, length-delimited
 * fields and fixed32 floats; unknown fields of every wire type (groups
 * included) are skipped. Truncated or overlong data, and a known field with
 * the wrong wire type, are errors that name the field.
 *
 * Deliberate difference from libprotobuf: it treats a known field with the
 * wrong wire type as an unknown field; we reject it, since such a file was not
 * written by the sentencepiece trainer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm_internal.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };
enum { MAX_GROUP_DEPTH = 64 };

typedef struct rd {
    const uint8_t *p, *end;
    const char *name; /* file name for messages */
    char *err;
    size_t errlen;
} rd;

static int fail(rd *r, const char *field, const char *what)
{
    if (r->err && r->errlen > 0)
        snprintf(r->err, r->errlen, "%s: %s: %s", r->name, field, what);
    return -1;
}

/* Reads a base-128 varint of at most 10 bytes; the 10th may only carry the
 * top bit of a uint64. */
static int rd_varint(rd *r, uint64_t *v, const char *field)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end)
            return fail(r, field, "truncated varint");
        uint8_t b = *r->p++;
        if (i == 9 && b > 1)
            return fail(r, field, "overlong varint");
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return fail(r, field, "overlong varint");
}

/* Reads a length prefix and returns the payload [*s, *s + *n). */
static int rd_len(rd *r, const uint8_t **s, size_t *n, const char *field)
{
    uint64_t v;
    if (rd_varint(r, &v, field) < 0)
        return -1;
    if (v > (uint64_t)(r->end - r->p))
        return fail(r, field, "length past end of data");
    *s = r->p;
    *n = (size_t)v;
    r->p += v;
    return 0;
}

static int rd_fixed32(rd *r, uint32_t *v, const char *field)
{
    if (r->end - r->p < 4)
        return fail(r, field, "truncated fixed32");
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
         (uint32_t)r->p[3] << 24;
    r->p += 4;
    return 0;
}

/* Skips the value of a field with the given wire type; a start-group is
 * skipped up to its matching end-group. */
static int rd_skip(rd *r, uint32_t fieldno, int wt, int depth, const char *field)
{
    uint64_t v;
    const uint8_t *s;
    size_t n;
    switch (wt) {
    case WT_VARINT:
        return rd_varint(r, &v, field);
    case WT_I64:
        if (r->end - r->p < 8)
            return fail(r, field, "truncated fixed64");
        r->p += 8;
        return 0;
    case WT_LEN:
        return rd_len(r, &s, &n, field);
    case WT_I32:
        if (r->end - r->p < 4)
            return fail(r, field, "truncated fixed32");
        r->p += 4;
        return 0;
    case WT_SGROUP:
        if (depth >= MAX_GROUP_DEPTH)
            return fail(r, field, "groups nested too deeply");
        for (;;) {
            if (r->p >= r->end)
                return fail(r, field, "unterminated group");
            uint64_t tag;
            if (rd_varint(r, &tag, field) < 0)
                return -1;
            int w = (int)(tag & 7);
            uint32_t f = (uint32_t)(tag >> 3);
            if (w == WT_EGROUP) {
                if (f != fieldno)
                    return fail(r, field, "mismatched end-group");
                return 0;
            }
            if (rd_skip(r, f, w, depth + 1, field) < 0)
                return -1;
        }
    default:
        return fail(r, field, "invalid wire type");
    }
}

/* Reads the next tag; returns 1 with the field number and wire type, 0 at
 * end of data, -1 on error. */
static int rd_tag(rd *r, uint32_t *f, int *wt, const char *msg)
{
    if (r->p >= r->end)
        return 0;
    uint64_t tag;
    if (rd_varint(r, &tag, msg) < 0)
        return -1;
    *f = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    if (*f == 0 || (tag >> 3) > 0x1fffffff)
        return fail(r, msg, "invalid field number");
    if (*wt == WT_EGROUP)
        return fail(r, msg, "unexpected end-group");
    return 1;
}

static int want(rd *r, int wt, int expect, const char *field)
{
    if (wt != expect)
        return fail(r, field, "wrong wire type");
    return 0;
}

/* Field readers: check the wire type, read, store (last value wins). */
static int get_int32(rd *r, int wt, int32_t *out, const char *field)
{
    uint64_t v;
    if (want(r, wt, WT_VARINT, field) < 0 || rd_varint(r, &v, field) < 0)
        return -1;
    *out = (int32_t)(uint32_t)v; /* protobuf truncates to the low 32 bits */
    return 0;
}

static int get_bool(rd *r, int wt, bool *out, const char *field)
{
    uint64_t v;
    if (want(r, wt, WT_VARINT, field) < 0 || rd_varint(r, &v, field) < 0)
        return -1;
    *out = v != 0;
    return 0;
}

static int get_float(rd *r, int wt, float *out, const char *field)
{
    uint32_t u = 0; /* set by rd_fixed32 (-O1 under TSan cannot tell) */
    if (want(r, wt, WT_I32, field) < 0 || rd_fixed32(r, &u, field) < 0)
        return -1;
    memcpy(out, &u, sizeof *out);
    return 0;
}

/* Replaces *out with a malloc'd NUL-terminated copy of the bytes. */
static int get_bytes(rd *r, int wt, char **out, size_t *out_len, const char *field)
{
    const uint8_t *s;
    size_t n;
    if (want(r, wt, WT_LEN, field) < 0 || rd_len(r, &s, &n, field) < 0)
        return -1;
    char *c = malloc(n + 1);
    if (!c)
        return fail(r, field, "out of memory");
    if (n > 0)
        memcpy(c, s, n);
    c[n] = '\0';
    free(*out);
    *out = c;
    if (out_len)
        *out_len = n;
    return 0;
}

/* Opens a sub-message: a reader over its payload sharing the error sink. */
static int get_sub(rd *r, int wt, rd *sub, const char *field)
{
    const uint8_t *s;
    size_t n;
    if (want(r, wt, WT_LEN, field) < 0 || rd_len(r, &s, &n, field) < 0)
        return -1;
    *sub = *r;
    sub->p = s;
    sub->end = s + n;
    return 0;
}

static int parse_piece(rd *r, spm_piece *pc)
{
    uint32_t f;
    int wt, t;
    while ((t = rd_tag(r, &f, &wt, "pieces")) > 0) {
        int rc = 0;
        if (f == 1) {
            rc = get_bytes(r, wt, &pc->s, &pc->len, "pieces.piece");
        } else if (f == 2) {
            rc = get_float(r, wt, &pc->score, "pieces.score");
        } else if (f == 3) {
            int32_t v = 0;
            rc = get_int32(r, wt, &v, "pieces.type");
            /* proto2 closed enum: unknown values leave the field unset */
            if (rc == 0 && v >= SPM_NORMAL && v <= SPM_BYTE)
                pc->type = v;
        } else {
            rc = rd_skip(r, f, wt, 0, "pieces");
        }
        if (rc < 0)
            return -1;
    }
    return t;
}

static int parse_trainer(rd *r, spm_proto *p)
{
    uint32_t f;
    int wt, t;
    while ((t = rd_tag(r, &f, &wt, "trainer_spec")) > 0) {
        int rc;
        int32_t v;
        switch (f) {
        case 3:
            v = 0;
            rc = get_int32(r, wt, &v, "trainer_spec.model_type");
            if (rc == 0 && v >= SPM_UNIGRAM && v <= SPM_CHAR)
                p->model_type = v;
            break;
        case 4: rc = get_int32(r, wt, &p->vocab_size, "trainer_spec.vocab_size"); break;
        case 24:
            rc = get_bool(r, wt, &p->treat_whitespace_as_suffix,
                          "trainer_spec.treat_whitespace_as_suffix");
            break;
        case 35: rc = get_bool(r, wt, &p->byte_fallback, "trainer_spec.byte_fallback"); break;
        case 40: rc = get_int32(r, wt, &p->unk_id, "trainer_spec.unk_id"); break;
        case 41: rc = get_int32(r, wt, &p->bos_id, "trainer_spec.bos_id"); break;
        case 42: rc = get_int32(r, wt, &p->eos_id, "trainer_spec.eos_id"); break;
        case 43: rc = get_int32(r, wt, &p->pad_id, "trainer_spec.pad_id"); break;
        case 44: rc = get_bytes(r, wt, &p->unk_surface, NULL, "trainer_spec.unk_surface"); break;
        case 45: rc = get_bytes(r, wt, &p->unk_piece, NULL, "trainer_spec.unk_piece"); break;
        case 46: rc = get_bytes(r, wt, &p->bos_piece, NULL, "trainer_spec.bos_piece"); break;
        case 47: rc = get_bytes(r, wt, &p->eos_piece, NULL, "trainer_spec.eos_piece"); break;
        case 48: rc = get_bytes(r, wt, &p->pad_piece, NULL, "trainer_spec.pad_piece"); break;
        default: rc = rd_skip(r, f, wt, 0, "trainer_spec"); break;
        }
        if (rc < 0)
            return -1;
    }
    return t;
}

static int parse_normspec(rd *r, spm_normspec *n, const char *msg)
{
    char field[64];
    uint32_t f;
    int wt, t;
    while ((t = rd_tag(r, &f, &wt, msg)) > 0) {
        int rc;
        switch (f) {
        case 1:
            snprintf(field, sizeof field, "%s.name", msg);
            rc = get_bytes(r, wt, &n->name, NULL, field);
            break;
        case 2:
            snprintf(field, sizeof field, "%s.precompiled_charsmap", msg);
            rc = get_bytes(r, wt, &n->charsmap, &n->charsmap_len, field);
            break;
        case 3:
            snprintf(field, sizeof field, "%s.add_dummy_prefix", msg);
            rc = get_bool(r, wt, &n->add_dummy_prefix, field);
            break;
        case 4:
            snprintf(field, sizeof field, "%s.remove_extra_whitespaces", msg);
            rc = get_bool(r, wt, &n->remove_extra_whitespaces, field);
            break;
        case 5:
            snprintf(field, sizeof field, "%s.escape_whitespaces", msg);
            rc = get_bool(r, wt, &n->escape_whitespaces, field);
            break;
        default: rc = rd_skip(r, f, wt, 0, msg); break;
        }
        if (rc < 0)
            return -1;
    }
    return t;
}

static void normspec_defaults(spm_normspec *n)
{
    n->add_dummy_prefix = true;
    n->remove_extra_whitespaces = true;
    n->escape_whitespaces = true;
}

int spm_proto_parse(spm_proto *p, const uint8_t *data, size_t size, const char *name,
                    char *err, size_t errlen)
{
    rd r = {data, data + size, name ? name : "<memory>", err, errlen};
    p->model_type = SPM_UNIGRAM;
    p->vocab_size = 8000;
    p->unk_id = 0;
    p->bos_id = 1;
    p->eos_id = 2;
    p->pad_id = -1;
    normspec_defaults(&p->norm);
    normspec_defaults(&p->denorm);

    uint32_t f;
    int wt, t;
    while ((t = rd_tag(&r, &f, &wt, "ModelProto")) > 0) {
        rd sub;
        int rc;
        switch (f) {
        case 1:
            if (get_sub(&r, wt, &sub, "pieces") < 0)
                return -1;
            if (p->npieces == p->cap) {
                if (p->cap > (1 << 28))
                    return fail(&r, "pieces", "too many pieces");
                int ncap = p->cap ? 2 * p->cap : 256;
                spm_piece *np = realloc(p->pieces, (size_t)ncap * sizeof *np);
                if (!np)
                    return fail(&r, "pieces", "out of memory");
                p->pieces = np;
                p->cap = ncap;
            }
            spm_piece *pc = &p->pieces[p->npieces++];
            memset(pc, 0, sizeof *pc);
            pc->type = SPM_NORMAL;
            rc = parse_piece(&sub, pc);
            break;
        case 2:
            rc = get_sub(&r, wt, &sub, "trainer_spec");
            if (rc == 0)
                rc = parse_trainer(&sub, p);
            break;
        case 3:
            rc = get_sub(&r, wt, &sub, "normalizer_spec");
            if (rc == 0)
                rc = parse_normspec(&sub, &p->norm, "normalizer_spec");
            break;
        case 5:
            rc = get_sub(&r, wt, &sub, "denormalizer_spec");
            if (rc == 0) {
                p->has_denorm = true;
                rc = parse_normspec(&sub, &p->denorm, "denormalizer_spec");
            }
            break;
        default: rc = rd_skip(&r, f, wt, 0, "ModelProto"); break;
        }
        if (rc < 0)
            return -1;
    }
    return t;
}

static void normspec_clear(spm_normspec *n)
{
    free(n->name);
    free(n->charsmap);
    n->name = NULL;
    n->charsmap = NULL;
}

void spm_proto_clear(spm_proto *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->npieces; i++)
        free(p->pieces[i].s);
    free(p->pieces);
    free(p->unk_piece);
    free(p->bos_piece);
    free(p->eos_piece);
    free(p->pad_piece);
    free(p->unk_surface);
    normspec_clear(&p->norm);
    normspec_clear(&p->denorm);
    memset(p, 0, sizeof *p);
}
