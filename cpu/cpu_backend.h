/*
 * cpu_backend.h - the CPU implementation of td_backend_ops (backend.h):
 * our AVX-512 GEMM over weights packed at load (OpenBLAS on CPUs without
 * AVX-512), vectorised kernels chosen at run time (cpu_kernels.h), a pool
 * of threads that claim chunks of each op (cpu_pool.h).
 *
 * Memory is host memory (64-byte aligned), weights are kept as float32
 * (packed or row-major, td_weight.layout) whatever dtype the checkpoint
 * has, or int8 with per-feature scales when the registry's create() is
 * asked for TD_STORE_INT8; every op has finished when it returns.
 *
 * Threads: one pool per backend (cpu_pool.h): n_threads - 1 threads of its
 * own plus the calling thread. OpenBLAS is set to a single thread
 * (process-wide, at creation). Every op splits itself into chunks that the
 * threads claim as they come free: a linear layer into runs of 32-feature
 * output panels, attention into (sequence, head) pairs or query rows, the
 * row-wise ops into runs of rows; small ops run on the caller alone. A
 * chunk never splits a sum, so the results are the same bits on any
 * number of threads. Each backend has its own pool, so several
 * CPU backends with different thread counts coexist in one process.
 * TD_CPU_SPIN_US (read at creation) sets how long an idle thread spins
 * before it sleeps.
 *
 * Errors: the only failures inside an op are a scratch allocation failure
 * and a weight this backend did not make. They are latched; sync() reports
 * the first one (-1 and the message) and clears the latch.
 *
 * Thread safety: as every backend, one td_backend belongs to one thread.
 */
#ifndef TD_CPU_BACKEND_H
#define TD_CPU_BACKEND_H

#include <stddef.h>

#include "backend.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a CPU backend using n_threads threads (0 = number of online
 * CPUs), starting n_threads - 1 of them. Returns NULL with a message in err
 * on failure (n_threads < 0, out of memory, a thread that cannot start).
 * Free with be->ops->destroy(be), which stops and joins them. */
td_backend *td_cpu_backend_create(int n_threads, char *err, size_t errlen);

/* Registers the "cpu" device family (device.h): one device, whose create()
 * refuses F16/BF16 storage with a message naming --device cuda. Called by
 * the executable's start-up code (runtime/backends_all.c). Returns
 * td_device_register's result. */
int td_cpu_backend_register(void);

#ifdef __cplusplus
}
#endif

#endif /* TD_CPU_BACKEND_H */
