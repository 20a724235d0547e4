/*
 * backends_all.c - the all-backends unit: registers every backend this build
 * has with the device registry (backend/device.h). It is the only file that
 * includes both cpu/ and gpu/ headers. Executables (transformerd, tests,
 * benches) link it as an object (CMake OBJECT library tdbackends_all), which
 * the linker always keeps, unlike an unreferenced member of a static library;
 * the registry calls td_backends_register_all() once, on first use.
 */
#include <assert.h>

#include "cpu_backend.h"
#include "device.h"
#ifdef TD_HAVE_CUDA
#include "gpu_backend.h"
#endif

void td_backends_register_all(void)
{
    int rc = td_cpu_backend_register();
#ifdef TD_HAVE_CUDA
    rc |= td_cuda_backend_register();
#endif
    assert(rc == 0 && "a backend registered twice, or the registry is full");
    (void)rc;
}
