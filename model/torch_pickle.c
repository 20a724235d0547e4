/*
 * torch_pickle.c - the restricted unpickler of torch.save's pickles (see
 * torch_pickle.h for what it reads and refuses). Learnt from pickletools'
 * opcode documentation and torch/serialization.py's _save, _legacy_save
 * and their loaders; no code of either is run or copied.
 */
#include "torch_pickle.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h" /* td_dtype */

/* the allow-list                                                      */

/* torch.<T>Storage: the legacy classes a persistent id names
 * (TypedStorage._pickle_storage_type) */
const tp_global tp_globals[] = {
    {"collections", "OrderedDict", 0, 0, NULL},
    {"torch._utils", "_rebuild_tensor_v2", 0, 0, NULL},
    {"torch._utils", "_rebuild_parameter", 0, 0, NULL},
    {"torch", "FloatStorage", TD_F32, 4, "float32"},
    {"torch", "HalfStorage", TD_F16, 2, "float16"},
    {"torch", "BFloat16Storage", TD_BF16, 2, "bfloat16"},
    {"torch", "DoubleStorage", -1, 8, "float64"},
    {"torch", "LongStorage", -1, 8, "int64"},
    {"torch", "IntStorage", -1, 4, "int32"},
    {"torch", "ShortStorage", -1, 2, "int16"},
    {"torch", "CharStorage", -1, 1, "int8"},
    {"torch", "ByteStorage", -1, 1, "uint8"},
    {"torch", "BoolStorage", -1, 1, "bool"},
};

const char *tp_kind_name(int kind)
{
    static const char *const names[] = {"None",   "a bool", "an int",   "an int",
                                        "a string", "a tuple", "a list", "a dict",
                                        "a global", "a storage", "a tensor"};
    return kind >= 0 && kind <= TP_TENSOR ? names[kind] : "?";
}

const char *tp_show(char *out, size_t cap, const unsigned char *s, size_t n)
{
    size_t k = 0;
    for (; k < n && k + 4 < cap && k < 80; k++)
        out[k] = s[k] >= 0x20 && s[k] < 0x7f ? (char)s[k] : '?';
    if (k < n && k + 4 <= cap) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = 0;
    return out;
}

/* "<what> at byte N: <fmt...>" (N: the opcode's) into k->err; always -1. */
static __attribute__((format(printf, 2, 3))) int pk_fail(tp_pickle *k, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (k->err && k->errlen)
        snprintf(k->err, k->errlen, "%s at byte %td: %s", k->what, k->op - k->beg, msg);
    return -1;
}

void tp_free(tp_pickle *k)
{
    for (int32_t i = 0; i < k->n; i++)
        if (k->v[i].kind >= TP_TUPLE && k->v[i].kind != TP_GLOBAL)
            free(k->v[i].u.items);
    free(k->v);
    free(k->stack);
    free(k->memo);
    memset(k, 0, sizeof *k);
}

/* Grows *p (of *cap elements of size es) to hold need, doubling, at most
 * max; 0 or -1. */
static int pk_grow(void **p, int32_t *cap, int64_t need, size_t es, int64_t max)
{
    if (need <= *cap)
        return 0;
    if (need > max)
        return -1;
    int64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > max)
        c = max;
    void *q = realloc(*p, (size_t)c * es);
    if (!q)
        return -1;
    *p = q;
    *cap = (int32_t)c;
    return 0;
}

/* A new value of kind; its index, or -1 (the message written). */
static int32_t pk_new(tp_pickle *k, int kind)
{
    if (pk_grow((void **)&k->v, &k->cap, (int64_t)k->n + 1, sizeof *k->v,
                TP_MAX_VALUES) != 0)
        return pk_fail(k, "more than %d values (or out of memory)", TP_MAX_VALUES);
    tp_value *v = &k->v[k->n];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    return k->n++;
}

static int pk_push(tp_pickle *k, int32_t id)
{
    if (id < 0)
        return -1;
    if (pk_grow((void **)&k->stack, &k->cap_stack, (int64_t)k->sp + 1, sizeof *k->stack,
                TP_MAX_STACK) != 0)
        return pk_fail(k, "stack deeper than %d (or out of memory)", TP_MAX_STACK);
    k->stack[k->sp++] = id;
    return 0;
}

static int32_t pk_floor(const tp_pickle *k) { return k->n_marks ? k->marks[k->n_marks - 1] : 0; }

/* Pops the top value (not below the last MARK) into *id. */
static int pk_pop(tp_pickle *k, int32_t *id)
{
    if (k->sp <= pk_floor(k))
        return pk_fail(k, "stack underflow");
    *id = k->stack[--k->sp];
    return 0;
}

static int pk_top(tp_pickle *k, int32_t *id)
{
    if (k->sp <= pk_floor(k))
        return pk_fail(k, "stack underflow");
    *id = k->stack[k->sp - 1];
    return 0;
}

/* Adds n ids to container c's items. */
static int pk_add(tp_pickle *k, int32_t c, const int32_t *ids, int32_t n)
{
    tp_value *v = &k->v[c];
    if (n == 0)
        return 0;
    if (k->n_items + n > TP_MAX_ITEMS ||
        pk_grow((void **)&v->u.items, &v->cap, (int64_t)v->n + n, sizeof(int32_t),
                TP_MAX_ITEMS) != 0)
        return pk_fail(k, "more than %d items in containers (or out of memory)", TP_MAX_ITEMS);
    memcpy(v->u.items + v->n, ids, (size_t)n * sizeof *ids);
    v->n += n;
    k->n_items += n;
    return 0;
}

/* A tuple of the top n values (n < 0: those above the last MARK, which is
 * dropped). */
static int pk_tuple(tp_pickle *k, int32_t n)
{
    if (n < 0) {
        if (!k->n_marks)
            return pk_fail(k, "TUPLE without MARK");
        n = k->sp - k->marks[--k->n_marks];
    } else if (k->sp - pk_floor(k) < n) {
        return pk_fail(k, "stack underflow");
    }
    int32_t t = pk_new(k, TP_TUPLE);
    if (t < 0 || (n > 0 && pk_add(k, t, k->stack + k->sp - n, n) != 0))
        return -1;
    k->sp -= n;
    return pk_push(k, t);
}

/* Needs n more bytes of the pickle. */
static int pk_need(tp_pickle *k, uint64_t n)
{
    if ((uint64_t)(k->end - k->p) < n)
        return pk_fail(k, "needs %" PRIu64 " bytes, %td left (truncated)", n, k->end - k->p);
    return 0;
}

static int pk_str(tp_pickle *k, uint64_t len)
{
    if (pk_need(k, len) != 0)
        return -1;
    if (len > INT32_MAX)
        return pk_fail(k, "string of %" PRIu64 " bytes", len);
    int32_t s = pk_new(k, TP_STR);
    if (s < 0)
        return -1;
    k->v[s].u.s = k->p;
    k->v[s].n = (int32_t)len;
    k->p += len;
    return pk_push(k, s);
}

static int pk_int(tp_pickle *k, int kind, int64_t x)
{
    int32_t v = pk_new(k, kind);
    if (v < 0)
        return -1;
    k->v[v].u.i = x;
    return pk_push(k, v);
}

/* module.name against the allow-list: pushes the global or refuses. */
static int pk_global(tp_pickle *k, const unsigned char *m, size_t ml, const unsigned char *nm, size_t nl)
{
    for (int g = 0; g < (int)(sizeof tp_globals / sizeof tp_globals[0]); g++)
        if (strlen(tp_globals[g].module) == ml && memcmp(tp_globals[g].module, m, ml) == 0 &&
            strlen(tp_globals[g].name) == nl && memcmp(tp_globals[g].name, nm, nl) == 0)
            return pk_int(k, TP_GLOBAL, g);
    char a[96], b[96];
    return pk_fail(k,
                   "global '%s.%s' is not allowed (a state dict needs only "
                   "collections.OrderedDict, torch._utils._rebuild_tensor_v2 and torch's "
                   "storage types)",
                   tp_show(a, sizeof a, m, ml), tp_show(b, sizeof b, nm, nl));
}

/* GLOBAL's operand: "module\nname\n". */
static int pk_global_lines(tp_pickle *k)
{
    const unsigned char *l[2];
    size_t len[2];
    for (int i = 0; i < 2; i++) {
        size_t left = (size_t)(k->end - k->p);
        const unsigned char *nl = memchr(k->p, '\n', left < 256 ? left : 256);
        if (!nl)
            return pk_fail(k, "GLOBAL's %s is not a line of at most 255 bytes%s",
                           i ? "name" : "module", left < 256 ? " (truncated)" : "");
        l[i] = k->p;
        len[i] = (size_t)(nl - k->p);
        k->p = nl + 1;
    }
    return pk_global(k, l[0], len[0], l[1], len[1]);
}

static int pk_memo_put(tp_pickle *k, uint64_t idx)
{
    int32_t top = 0;
    if (pk_top(k, &top) != 0)
        return -1;
    if (idx >= TP_MAX_MEMO)
        return pk_fail(k, "memo index %" PRIu64 " (at most %d)", idx, TP_MAX_MEMO - 1);
    int32_t old = k->cap_memo;
    if (pk_grow((void **)&k->memo, &k->cap_memo, (int64_t)idx + 1, sizeof *k->memo,
                TP_MAX_MEMO) != 0)
        return pk_fail(k, "out of memory for memo index %" PRIu64, idx);
    for (int32_t i = old; i < k->cap_memo; i++)
        k->memo[i] = -1;
    if (k->memo[idx] < 0)
        k->n_memo++;
    k->memo[idx] = top;
    return 0;
}

static int pk_memo_get(tp_pickle *k, uint64_t idx)
{
    if (idx >= (uint64_t)k->cap_memo || k->memo[idx] < 0)
        return pk_fail(k, "memo index %" PRIu64 " was never set", idx);
    return pk_push(k, k->memo[idx]);
}

static int pk_is_int_tuple(const tp_pickle *k, int32_t id, int max)
{
    const tp_value *v = &k->v[id];
    if (v->kind != TP_TUPLE || v->n > max)
        return 0;
    for (int32_t i = 0; i < v->n; i++)
        if (k->v[v->u.items[i]].kind != TP_INT)
            return 0;
    return 1;
}

/* A value of kind made of the n ids (a tensor's arguments, a storage's
 * persistent id), counted against TP_MAX_TENSORS. */
static int pk_made(tp_pickle *k, int kind, const int32_t *ids, int32_t n)
{
    if (++k->n_made > TP_MAX_TENSORS)
        return pk_fail(k, "more than %d tensors and storages", TP_MAX_TENSORS);
    int32_t v = pk_new(k, kind);
    if (v < 0 || pk_add(k, v, ids, n) != 0)
        return -1;
    return pk_push(k, v);
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks
 * [, metadata]): the arguments checked for type; a TP_TENSOR of them. */
static int pk_rebuild_tensor(tp_pickle *k, const tp_value *a)
{
    const int32_t *x = a->u.items;
    if (a->n != 6 && a->n != 7)
        return pk_fail(k, "_rebuild_tensor_v2 with %d arguments (6 or 7)", a->n);
    if (k->v[x[0]].kind != TP_STORAGE || k->v[x[1]].kind != TP_INT)
        return pk_fail(k, "_rebuild_tensor_v2 of %s at offset %s", tp_kind_name(k->v[x[0]].kind),
                       tp_kind_name(k->v[x[1]].kind));
    if (!pk_is_int_tuple(k, x[2], TP_MAX_RANK) || !pk_is_int_tuple(k, x[3], TP_MAX_RANK) ||
        k->v[x[3]].n != k->v[x[2]].n)
        return pk_fail(k, "a tensor's size and stride are not tuples of as many integers "
                       "(at most %d)", TP_MAX_RANK);
    return pk_made(k, TP_TENSOR, x, a->n);
}

/* REDUCE: only the allow-list's callables, done here. */
static int pk_reduce(tp_pickle *k)
{
    int32_t args = 0, fn = 0;
    if (pk_pop(k, &args) != 0 || pk_pop(k, &fn) != 0)
        return -1;
    const tp_value *f = &k->v[fn], *a = &k->v[args];
    if (f->kind != TP_GLOBAL)
        return pk_fail(k, "REDUCE calls %s", tp_kind_name(f->kind));
    if (a->kind != TP_TUPLE)
        return pk_fail(k, "REDUCE with %s for arguments", tp_kind_name(a->kind));
    switch (f->u.i) {
    case TP_G_ORDERED_DICT:
        if (a->n != 0)
            return pk_fail(k, "collections.OrderedDict with arguments");
        return pk_push(k, pk_new(k, TP_DICT));
    case TP_G_REBUILD_TENSOR:
        return pk_rebuild_tensor(k, a);
    case TP_G_REBUILD_PARAMETER: /* (tensor, requires_grad, hooks): the tensor */
        if (a->n != 3 || k->v[a->u.items[0]].kind != TP_TENSOR)
            return pk_fail(k, "_rebuild_parameter of something else than a tensor");
        return pk_push(k, a->u.items[0]);
    default:
        return pk_fail(k, "REDUCE calls torch.%s", tp_globals[f->u.i].name);
    }
}

/* BINPERSID: ('storage', torch.<T>Storage, key, location, numel) (the
 * legacy layout adds a sixth, None: storage views are not read). */
static int pk_persid(tp_pickle *k)
{
    int32_t id = 0;
    if (pk_pop(k, &id) != 0)
        return -1;
    const tp_value *t = &k->v[id];
    const int32_t *x = t->u.items;
    if (t->kind != TP_TUPLE || (t->n != 5 && t->n != 6))
        return pk_fail(k, "a persistent id that is not ('storage', type, key, location, numel)");
    const tp_value *tag = &k->v[x[0]], *cls = &k->v[x[1]], *key = &k->v[x[2]],
                  *n = &k->v[x[4]];
    if (tag->kind != TP_STR || tag->n != 7 || memcmp(tag->u.s, "storage", 7) != 0)
        return pk_fail(k, "a persistent id that is not a storage");
    if (cls->kind != TP_GLOBAL || cls->u.i < TP_G_FIRST_STORAGE)
        return pk_fail(k, "a storage whose type is not one of torch's storage types");
    if (key->kind != TP_STR || key->n < 1 || key->n > TP_MAX_KEY || n->kind != TP_INT ||
        n->u.i < 0 || k->v[x[3]].kind != TP_STR)
        return pk_fail(k, "a storage's key, location or element count is malformed");
    if (t->n == 6 && k->v[x[5]].kind != TP_NONE)
        return pk_fail(k, "a storage view (legacy view metadata) is not read");
    return pk_made(k, TP_STORAGE, x, t->n);
}

/* The opcode's n-byte little-endian argument into *x; 0 or -1. */
static int pk_arg(tp_pickle *k, int n, uint64_t *x)
{
    if (pk_need(k, (uint64_t)n) != 0)
        return -1;
    *x = 0;
    for (int i = n - 1; i >= 0; i--)
        *x = *x << 8 | k->p[i];
    k->p += n;
    return 0;
}

/* LONG1: n bytes of little-endian two's complement; over 8 bytes, kept
 * as bytes (only compared: the legacy magic number). */
static int pk_long1(tp_pickle *k)
{
    uint64_t n, x;
    if (pk_arg(k, 1, &n) != 0 || pk_need(k, n) != 0)
        return -1;
    const unsigned char *s = k->p;
    k->p += n;
    if (n > 8) {
        int32_t v = pk_new(k, TP_BIGINT);
        if (v < 0)
            return -1;
        k->v[v].u.s = s;
        k->v[v].n = (int32_t)n;
        return pk_push(k, v);
    }
    x = n && (s[n - 1] & 0x80) ? UINT64_MAX : 0;
    for (int i = (int)n - 1; i >= 0; i--)
        x = x << 8 | s[i];
    return pk_int(k, TP_INT, (int64_t)x);
}

/* APPENDS and SETITEMS: the values above the last MARK into the list or
 * dict below it. */
static int pk_extend(tp_pickle *k, int kind, const char *op)
{
    if (!k->n_marks)
        return pk_fail(k, "%s without MARK", op);
    int32_t m = k->marks[--k->n_marks], n = k->sp - m;
    if (m <= pk_floor(k)) /* the container is below the MARK */
        return pk_fail(k, "stack underflow");
    int32_t c = k->stack[m - 1];
    if (k->v[c].kind != kind || (kind == TP_DICT && n % 2))
        return pk_fail(k, "%s on %s", op, tp_kind_name(k->v[c].kind));
    k->sp = m;
    return pk_add(k, c, k->stack + m, n);
}

/* APPEND and SETITEM: the top one or two values into the container
 * below them. */
static int pk_insert(tp_pickle *k, int kind, int n, const char *op)
{
    int32_t kv[2] = {0, 0}, c = 0;
    for (int i = n - 1; i >= 0; i--)
        if (pk_pop(k, &kv[i]) != 0)
            return -1;
    if (pk_top(k, &c) != 0)
        return -1;
    if (k->v[c].kind != kind)
        return pk_fail(k, "%s on %s", op, tp_kind_name(k->v[c].kind));
    return pk_add(k, c, kv, n);
}

/* Runs one opcode at k->p; 1 at STOP, 0 to go on, -1 refused. */
static int pk_step(tp_pickle *k, int32_t *result)
{
    int32_t a = 0, b = 0;
    uint64_t x = 0;
    const unsigned char op = *k->p++;
    switch (op) {
    case 0x80: /* PROTO */
        if (pk_arg(k, 1, &x) != 0)
            return -1;
        return x >= 2 && x <= 5 ? 0 : pk_fail(k, "pickle protocol %d (torch.save writes 2 to 5)",
                                              (int)x);
    case 0x95: /* FRAME: a length before the frame's opcodes, which follow */
        return pk_arg(k, 8, &x) != 0 || pk_need(k, x) != 0 ? -1 : 0;
    case '.': /* STOP */
        return pk_pop(k, result) != 0 ? -1 : 1;
    case '}': return pk_push(k, pk_new(k, TP_DICT)); /* EMPTY_DICT */
    case ']': return pk_push(k, pk_new(k, TP_LIST)); /* EMPTY_LIST */
    case ')': return pk_push(k, pk_new(k, TP_TUPLE)); /* EMPTY_TUPLE */
    case 'N': return pk_push(k, pk_new(k, TP_NONE));
    case 0x88: return pk_int(k, TP_BOOL, 1); /* NEWTRUE */
    case 0x89: return pk_int(k, TP_BOOL, 0); /* NEWFALSE */
    case '(': /* MARK */
        if (k->n_marks >= TP_MAX_MARKS)
            return pk_fail(k, "more than %d nested MARKs", TP_MAX_MARKS);
        k->marks[k->n_marks++] = k->sp;
        return 0;
    case 'X': return pk_arg(k, 4, &x) ? -1 : pk_str(k, x);    /* BINUNICODE */
    case 0x8c: return pk_arg(k, 1, &x) ? -1 : pk_str(k, x);   /* SHORT_BINUNICODE */
    case 'K': return pk_arg(k, 1, &x) ? -1 : pk_int(k, TP_INT, (int64_t)x); /* BININT1 */
    case 'M': return pk_arg(k, 2, &x) ? -1 : pk_int(k, TP_INT, (int64_t)x); /* BININT2 */
    case 'J': return pk_arg(k, 4, &x) ? -1 : pk_int(k, TP_INT, (int32_t)(uint32_t)x); /* BININT */
    case 0x8a: return pk_long1(k);
    case 'q': return pk_arg(k, 1, &x) ? -1 : pk_memo_put(k, x); /* BINPUT */
    case 'r': return pk_arg(k, 4, &x) ? -1 : pk_memo_put(k, x); /* LONG_BINPUT */
    case 0x94: return pk_memo_put(k, (uint64_t)k->n_memo);     /* MEMOIZE */
    case 'h': return pk_arg(k, 1, &x) ? -1 : pk_memo_get(k, x); /* BINGET */
    case 'j': return pk_arg(k, 4, &x) ? -1 : pk_memo_get(k, x); /* LONG_BINGET */
    case 't': return pk_tuple(k, -1);
    case 0x85: return pk_tuple(k, 1);
    case 0x86: return pk_tuple(k, 2);
    case 0x87: return pk_tuple(k, 3);
    case 'a': return pk_insert(k, TP_LIST, 1, "APPEND");
    case 's': return pk_insert(k, TP_DICT, 2, "SETITEM");
    case 'e': return pk_extend(k, TP_LIST, "APPENDS");
    case 'u': return pk_extend(k, TP_DICT, "SETITEMS");
    case 'c': return pk_global_lines(k); /* GLOBAL */
    case 0x93: /* STACK_GLOBAL */
        if (pk_pop(k, &b) != 0 || pk_pop(k, &a) != 0)
            return -1;
        if (k->v[a].kind != TP_STR || k->v[b].kind != TP_STR)
            return pk_fail(k, "STACK_GLOBAL of %s and %s", tp_kind_name(k->v[a].kind),
                           tp_kind_name(k->v[b].kind));
        return pk_global(k, k->v[a].u.s, (size_t)k->v[a].n, k->v[b].u.s,
                         (size_t)k->v[b].n);
    case 'R': return pk_reduce(k);
    case 'b': /* BUILD: an OrderedDict's attributes (a state dict's _metadata), ignored */
        if (pk_pop(k, &a) != 0 || pk_top(k, &b) != 0)
            return -1;
        if (k->v[b].kind != TP_DICT || k->v[a].kind != TP_DICT)
            return pk_fail(k, "BUILD of %s with %s", tp_kind_name(k->v[b].kind),
                           tp_kind_name(k->v[a].kind));
        return 0;
    case 'Q': return pk_persid(k); /* BINPERSID */
    default:
        return pk_fail(k, "opcode 0x%02x ('%c') is not one torch.save writes for a state dict",
                       op, op >= 0x20 && op < 0x7f ? op : '?');
    }
}

int tp_load(tp_pickle *k, const char *what, const unsigned char *p, const unsigned char *end,
            int32_t *result, size_t *used, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    k->err = err;
    k->errlen = errlen;
    k->what = what;
    k->beg = k->p = p;
    k->end = end;
    for (;;) {
        k->op = k->p;
        if (k->p >= k->end)
            return pk_fail(k, "ends without STOP (truncated)");
        int rc = pk_step(k, result);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            *used = (size_t)(k->p - p);
            return 0;
        }
    }
}

