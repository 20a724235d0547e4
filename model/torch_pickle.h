/*
 * torch_pickle.h - a restricted unpickler for the pickles torch.save writes
 * for a state dict (model/wf_torch.c reads pytorch_model.bin with it).
 *
 * It is a machine of Python's pickle opcodes (pickletools' documentation)
 * that knows only those torch/serialization.py's `_save` and `_legacy_save`
 * emit for a state dict, protocols 2 to 5: PROTO, FRAME, STOP, EMPTY_DICT,
 * EMPTY_LIST, EMPTY_TUPLE, MARK, NONE, NEWTRUE, NEWFALSE, BININT, BININT1,
 * BININT2, LONG1, BINUNICODE, SHORT_BINUNICODE, BINPUT, LONG_BINPUT,
 * MEMOIZE, BINGET, LONG_BINGET, TUPLE, TUPLE1-3, APPEND(S), SETITEM(S),
 * GLOBAL, STACK_GLOBAL, REDUCE, BUILD, BINPERSID. It never runs code: a
 * global is only looked up in tp_globals (inert values: OrderedDict,
 * _rebuild_tensor_v2, _rebuild_parameter, torch's storage types), and
 * REDUCE applies only the first three, done here as value constructors:
 *   - OrderedDict() is an empty dict (BUILD's attributes of it, a state
 *     dict's _metadata, are ignored);
 *   - _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
 *     hooks[, metadata]) is a TP_TENSOR whose arguments are checked for
 *     type (a storage, an int, two tuples of as many ints, at most
 *     TP_MAX_RANK); _rebuild_parameter(tensor, ...) is the tensor;
 *   - BINPERSID of ('storage', torch.<T>Storage, key, location, numel
 *     [, None]) is a TP_STORAGE (the legacy layout's sixth element, a
 *     storage view, must be None).
 * Any other opcode, global or call refuses the pickle with a message
 * naming it. Every count the pickle declares (string lengths, memo
 * indices, values, stack depth, MARKs, tensors) is checked against the
 * bytes left and the limits below before anything is allocated for it.
 *
 * Strings point into the pickle's bytes (not copied): the pickle must
 * outlive the values.
 */
#ifndef TD_TORCH_PICKLE_H
#define TD_TORCH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

/* Bounds in work. A state dict of a few hundred tensors needs a few
 * thousand values; these leave room for checkpoints a hundred times larger
 * and cap what a hostile pickle can make the reader allocate (about 100 MB
 * at worst, whatever it declares). */
#define TP_MAX_VALUES (1 << 21)
#define TP_MAX_ITEMS (1 << 22)   /* slots of every list, tuple and dict together */
#define TP_MAX_STACK (1 << 20)
#define TP_MAX_MARKS 64
#define TP_MAX_MEMO (1 << 21)    /* memo indices */
#define TP_MAX_TENSORS (1 << 17) /* tensors, and storage references */
#define TP_MAX_KEY 1024          /* bytes of a storage key */
#define TP_MAX_RANK 8

enum {
    TP_NONE, TP_BOOL, TP_INT, TP_BIGINT, TP_STR, TP_TUPLE, TP_LIST, TP_DICT, TP_GLOBAL,
    TP_STORAGE, /* items: the persistent id, checked as above */
    TP_TENSOR,  /* items: _rebuild_tensor_v2's arguments, checked as above */
};

/* A value: n items (a dict's pairs flattened: key, value, ...) or n bytes
 * (strings, and integers over 8 bytes). */
typedef struct tp_value {
    int kind;
    int32_t n, cap;
    int32_t tag; /* the caller's (wf_torch.c numbers the storages with it) */
    union {
        int64_t i;              /* TP_INT, TP_BOOL; TP_GLOBAL: a row of tp_globals */
        const unsigned char *s; /* TP_STR, TP_BIGINT (little-endian two's complement) */
        int32_t *items;         /* TP_TUPLE, TP_LIST, TP_DICT, TP_STORAGE, TP_TENSOR */
    } u;
} tp_value;

/* The allow-list. A storage type's dtype is a td_dtype, or -1 for one
 * torch has whose tensors the engine does not read (refused by name). */
typedef struct tp_global {
    const char *module, *name;
    int dtype;
    int elsize;       /* bytes of an element (storage types) */
    const char *what; /* "float32" */
} tp_global;
enum { TP_G_ORDERED_DICT, TP_G_REBUILD_TENSOR, TP_G_REBUILD_PARAMETER, TP_G_FIRST_STORAGE };
extern const tp_global tp_globals[];

/* One pickle's values (its machine's state while it runs). */
typedef struct tp_pickle {
    tp_value *v;
    int32_t n, cap;
    int64_t n_items, n_made; /* container slots; tensors and storages made */
    int32_t *stack;
    int32_t sp, cap_stack;
    int32_t marks[TP_MAX_MARKS];
    int n_marks;
    int32_t *memo;
    int32_t cap_memo, n_memo; /* n_memo: keys set (MEMOIZE's next) */
    const char *what;
    const unsigned char *beg, *p, *op, *end;
    char *err;
    size_t errlen;
} tp_pickle;

/* Runs the pickle at [p, end) up to its STOP. 0 with the value on top of
 * the stack at STOP in *root and the bytes read (STOP included) in *used;
 * or -1 with "<what> at byte N: <reason>" in err. Either way tp_free
 * frees what was made. */
int tp_load(tp_pickle *pk, const char *what, const unsigned char *p, const unsigned char *end,
            int32_t *root, size_t *used, char *err, size_t errlen);

/* Frees the values; accepts a zeroed or freed pickle. */
void tp_free(tp_pickle *pk);

/* "an int", "a tensor", ... for messages. */
const char *tp_kind_name(int kind);

/* s[0..n) for a message into out: at most 80 bytes, non-printable bytes as
 * '?', "..." when cut. */
const char *tp_show(char *out, size_t cap, const unsigned char *s, size_t n);

#endif /* TD_TORCH_PICKLE_H */
