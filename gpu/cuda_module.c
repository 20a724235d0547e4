/*
 * cuda_module.c - the CUDA backend as a module (libtdcuda.so) that
 * transformerd opens only when a CUDA device is asked for
 * (runtime/backends_all.c, TD_CUDA_MODULE). Linked into the executable,
 * cuBLAS alone costs a CPU-only daemon ~130 MiB of resident memory (its code
 * and its zeroed data, mapped and touched at start-up whether or not a GPU is
 * ever used); as a module, a CPU run never maps it.
 *
 * The one exported symbol hands over the family gpu_backend.cu registers
 * in a statically linked build; the module never calls the registry.
 */
#include "gpu_backend.h"

__attribute__((visibility("default"))) const td_device_family *td_cuda_module_family(void);

const td_device_family *td_cuda_module_family(void)
{
    return td_cuda_family();
}
