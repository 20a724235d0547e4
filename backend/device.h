/*
 * device.h - the device registry: which backends this executable was built
 * with, and the one place where user text ("cpu", "cuda", "cuda:1") becomes
 * a device handle (ggml's ggml_backend_dev_*, CTranslate2's Device + index).
 *
 * Backends register a family each (cpu/ one device, gpu/ one per CUDA
 * device, counted when first asked for): td_device_register(). The engine
 * receives a resolved td_device and calls its create() for every backend it
 * needs (the model's, one per worker); it never parses device names and
 * never includes a backend's header.
 *
 * Registration is the executable's: its start-up code (runtime/
 * backends_all.c, an object every executable links, so the linker cannot drop
 * it as it drops unused members of a static library) registers every backend
 * the build has before main() runs. This folder never calls up into it: a
 * program that links no backend resolves no device, and says so.
 *
 * Thread safety: the registry is filled at start-up, before any thread, and
 * read-only afterwards; every function but td_device_register may be called
 * from any thread. A td_device is a plain value: copy it freely.
 */
#ifndef TD_DEVICE_H
#define TD_DEVICE_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_device_kind {
    TD_DEVICE_CPU = 0,
    TD_DEVICE_CUDA = 1,
} td_device_kind;

/* The numerics a backend is created with (td_load_opts, parsed). */
typedef struct td_backend_params {
    int n_threads;        /* CPU threads for BLAS and op loops; 0 = all cores */
    td_store store;       /* storage of weight matrices */
    int half_activations; /* GEMMs with half weights: round x once (1) or
                           * split it in two halves (0, float32 accuracy) */
} td_backend_params;

typedef struct td_device td_device;

/* Creates a backend on dev with params p. Returns NULL with a message in err
 * when the device cannot take these numerics (the CPU keeps float32
 * weights: F16/BF16 storage is an error naming --device cuda) or cannot be
 * initialised. Free with be->ops->destroy(be). */
typedef td_backend *(*td_device_create_fn)(const td_device *dev, const td_backend_params *p,
                                           char *err, size_t errlen);

/* A resolved device: a plain value. */
struct td_device {
    char name[16];             /* "cpu", "cuda" (index 0), "cuda:N": for messages */
    td_device_kind kind;
    int index;                 /* 0-based within its kind */
    td_device_create_fn create;
};

/* What a backend registers: one family of devices of one kind. */
typedef struct td_device_family {
    const char *name;          /* what users type: "cpu", "cuda" */
    td_device_kind kind;
    /* Devices usable now (called only when the family is asked for, so that
     * a CPU run never initialises CUDA). 0 with the reason in why when there
     * are none. */
    int (*count)(char *why, size_t whylen);
    td_device_create_fn create;
} td_device_family;

/* Registers a family (the pointer is kept: static storage), at start-up
 * only. Returns 0, or -1 when the table is full or the name is taken. */
int td_device_register(const td_device_family *f);

/* The syntax of a device name, whatever was built: "cpu" or "cuda", each
 * optionally ":N" with N in 0..1023 (NULL or "" is "cpu"). Fills *kind and
 * *index. Returns 0, or -1 with a message naming the text. The one parser of
 * device names: td_device_resolve starts with it, and the command line checks
 * --device with it before anything loads. */
int td_device_parse(const char *text, td_device_kind *kind, int *index, char *err, size_t errlen);

/* "cpu", "cuda", "cuda:N" (NULL or "" is "cpu") -> *out. Returns 0, or -1
 * with a message naming the text and the available choices: an unknown name,
 * a malformed index, a kind this build has no backend for, or a device this
 * machine does not have (those messages name --device cpu). */
int td_device_resolve(const char *text, td_device *out, char *err, size_t errlen);

/* The families this build registered, as "cpu, cuda" (into buf). */
void td_device_available(char *buf, size_t len);

/* "cpu", "cuda": the kind's name, whether or not it was built. */
const char *td_device_kind_name(td_device_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* TD_DEVICE_H */
