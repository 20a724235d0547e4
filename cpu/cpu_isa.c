/*
 * cpu_isa.c - the instruction set the CPU kernels run with, chosen once at
 * run time (cpu_kernels.h).
 */
#include "cpu_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static td_cpu_isa isa_max = TD_CPU_ISA_SCALAR;
static int isa_vnni;
static td_cpu_isa isa_cur = TD_CPU_ISA_SCALAR;

static void isa_detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isa_max = TD_CPU_ISA_AVX2;
    if (isa_max == TD_CPU_ISA_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        isa_max = TD_CPU_ISA_AVX512;
    isa_vnni = isa_max == TD_CPU_ISA_AVX512 && __builtin_cpu_supports("avx512vnni");
#endif
    isa_cur = isa_max;
    const char *e = getenv("TD_CPU_ISA");
    if (e && *e) {
        td_cpu_isa want = isa_max;
        if (!strcmp(e, "scalar"))
            want = TD_CPU_ISA_SCALAR;
        else if (!strcmp(e, "avx2"))
            want = TD_CPU_ISA_AVX2;
        else if (!strcmp(e, "avx512"))
            want = TD_CPU_ISA_AVX512;
        if (want < isa_cur)
            isa_cur = want;
    }
}

td_cpu_isa td_cpu_isa_get(void)
{
    pthread_once(&isa_once, isa_detect);
    return isa_cur;
}

td_cpu_isa td_cpu_isa_max(void)
{
    pthread_once(&isa_once, isa_detect);
    return isa_max;
}

td_cpu_isa td_cpu_isa_set(td_cpu_isa isa)
{
    pthread_once(&isa_once, isa_detect);
    td_cpu_isa prev = isa_cur;
    isa_cur = isa > isa_max ? isa_max : isa;
    return prev;
}

int td_cpu_has_vnni(void)
{
    return td_cpu_isa_get() == TD_CPU_ISA_AVX512 && isa_vnni;
}

const char *td_cpu_isa_name(td_cpu_isa isa)
{
    switch (isa) {
    case TD_CPU_ISA_AVX512:
        return "avx512";
    case TD_CPU_ISA_AVX2:
        return "avx2";
    default:
        return "scalar";
    }
}
