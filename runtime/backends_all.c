/*
 * backends_all.c - the executable's start-up code for the backends: registers
 * every backend this build has with the device registry (backend/device.h)
 * before main() runs. It is the only file that includes both cpu/ and gpu/
 * headers, and the only caller of the backends' register functions: the
 * registry (backend/) never calls up into this folder. Executables
 * (transformerd, tests, benches) link it as an object (CMake OBJECT library
 * tdbackends_all), which the linker always keeps, unlike an unreferenced
 * member of a static library.
 *
 * transformerd compiles it with TD_CUDA_MODULE (tdbackends_lazy): the "cuda"
 * family it registers is a stand-in that opens the CUDA backend's module
 * (libtdcuda.so, gpu/cuda_module.c) the first time "cuda" is resolved and
 * forwards to the module's family, so a CPU daemon never maps CUDA or cuBLAS.
 * The module is looked for at $TD_CUDA_LIBRARY, then next to the executable,
 * then in ../lib/transformerd/ beside it; when it cannot be opened, "cuda"
 * has no usable device, and the reason (dlerror's) names the file.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_backend.h"
#include "device.h"
#if defined(TD_HAVE_CUDA) && defined(TD_CUDA_MODULE)
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#elif defined(TD_HAVE_CUDA)
#include "gpu_backend.h"
#endif

#if defined(TD_HAVE_CUDA) && defined(TD_CUDA_MODULE)
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;
static const td_device_family *g_cuda; /* the module's family, once opened */
static char g_cuda_why[512];           /* why it was not, when it was not */

/* dlopen(path); on failure appends dlerror's reason to g_cuda_why. */
static void *cuda_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror's text and a path are unbounded: appended as far as they
         * fit, "; " between two (a copy, not a format, that GCC's -O3
         * truncation check has nothing to say about) */
        const char *e = dlerror();
        const char *why = e ? e : path;
        size_t n = strlen(g_cuda_why), room = sizeof g_cuda_why - 1 - n;
        if (n && room >= 2) {
            memcpy(g_cuda_why + n, "; ", 2);
            n += 2;
            room -= 2;
        }
        size_t k = strlen(why) < room ? strlen(why) : room;
        memcpy(g_cuda_why + n, why, k);
        g_cuda_why[n + k] = '\0';
    }
    return h;
}

static void cuda_load(void)
{
    void *h = NULL;
    const char *env = getenv("TD_CUDA_LIBRARY");
    if (env && *env) {
        h = cuda_open(env); /* named: no other place is tried */
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char *slash = n > 0 ? (exe[n] = 0, strrchr(exe, '/')) : NULL;
        if (!slash) {
            snprintf(g_cuda_why, sizeof g_cuda_why, "cannot find the executable's folder "
                     "for libtdcuda.so; set TD_CUDA_LIBRARY");
            return;
        }
        *slash = 0;
        static const char *const rel[] = {"/libtdcuda.so", "/../lib/transformerd/libtdcuda.so"};
        for (size_t i = 0; !h && i < sizeof rel / sizeof rel[0]; i++) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s%s", exe, rel[i]);
            h = cuda_open(path);
        }
    }
    if (!h)
        return;
    const td_device_family *(*family)(void) =
        (const td_device_family *(*)(void))dlsym(h, "td_cuda_module_family");
    g_cuda = family ? family() : NULL;
    if (!g_cuda) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "libtdcuda.so has no td_cuda_module_family");
        dlclose(h);
    }
}

static int cuda_lazy_count(char *why, size_t whylen)
{
    pthread_once(&g_cuda_once, cuda_load);
    if (!g_cuda) {
        snprintf(why, whylen, "%s", g_cuda_why);
        return 0;
    }
    return g_cuda->count(why, whylen);
}

static td_backend *cuda_lazy_create(const td_device *dev, const td_backend_params *p,
                                    char *err, size_t errlen)
{
    pthread_once(&g_cuda_once, cuda_load);
    if (!g_cuda) {
        snprintf(err, errlen, "cuda: %s; use --device cpu", g_cuda_why);
        return NULL;
    }
    return g_cuda->create(dev, p, err, errlen);
}

static const td_device_family g_cuda_lazy = {"cuda", TD_DEVICE_CUDA, cuda_lazy_count,
                                             cuda_lazy_create};

static int td_cuda_backend_register(void)
{
    return td_device_register(&g_cuda_lazy);
}
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
