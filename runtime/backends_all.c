/*
 * backends_all.c - the executable's start-up code for the backends: registers
 * every backend this build has with the device registry (backend/device.h)
 * before main() runs. It is the only file that includes both cpu/ and gpu/
 * headers, and the only caller of the backends' register functions: the
 * registry (backend/) never calls up into this folder. Executables
 * (transformerd, tests, benches) link it as an object (CMake OBJECT library
 * tdbackends_all), which the linker always keeps, unlike an unreferenced
 * member of a static library.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_backend.h"
#include "device.h"
#ifdef TD_HAVE_CUDA
#include "gpu_backend.h"
#endif

/* A constructor: it runs before main() and before any thread, so the
 * registry is complete and read-only by the time anything resolves a device.
 * A family that does not register (a name taken twice, a full table) is a
 * build error: the process stops here, saying so, under NDEBUG too. */
__attribute__((constructor)) static void register_backends(void)
{
    if (td_cpu_backend_register() != 0) {
        fputs("transformerd: the cpu backend did not register (a name taken twice, or the "
              "device table is full)\n", stderr);
        abort();
    }
#ifdef TD_HAVE_CUDA
    if (td_cuda_backend_register() != 0) {
        fputs("transformerd: the cuda backend did not register (a name taken twice, or the "
              "device table is full)\n", stderr);
        abort();
    }
#endif
}
