/*
 * cpu_isa.c - the instruction set the CPU kernels run with, chosen once at
 * run time (cpu_kernels.h).
 */
#define _DEFAULT_SOURCE /* syscall */
#include "cpu_kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ISA_AMX_PROBE 1
#endif

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static td_cpu_isa isa_max = TD_CPU_ISA_SCALAR;
static int isa_vnni;
static int isa_bf16;   /* AVX512-BF16 (vdpbf16ps) */
static int isa_amx;    /* the CPU and the kernel allow AMX int8 */
static int isa_amx_bf16; /* ... and AMX bf16 */
static int isa_amx_on; /* not turned off (TD_CPU_AMX=0, td_cpu_amx_set) */
static td_cpu_isa isa_cur = TD_CPU_ISA_SCALAR;

#ifdef ISA_AMX_PROBE
/* AMX: CPUID leaf 7 EDX bits 24 (AMX-TILE) and 25 (AMX-INT8; bit 22 is
 * AMX-BF16, read by isa_detect), the OS
 * saving the tile state (XCR0 bits 17 and 18), and Linux's permission for
 * this process to use the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XTILEDATA, feature 18; without it the first tile instruction faults). */
static int isa_amx_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17))
        return 0;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0;
}
#endif

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
    isa_bf16 = isa_max == TD_CPU_ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
#endif
#ifdef ISA_AMX_PROBE
    isa_amx = isa_vnni && isa_amx_probe();
    {
        unsigned a, b, c, d;
        isa_amx_bf16 = isa_amx && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22));
    }
#endif
    const char *amx = getenv("TD_CPU_AMX");
    isa_amx_on = !(amx && !strcmp(amx, "0"));
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

int td_cpu_has_avx512_bf16(void)
{
    return td_cpu_isa_get() == TD_CPU_ISA_AVX512 && isa_bf16;
}

int td_cpu_has_bf16(void)
{
    return td_cpu_has_avx512_bf16() || td_cpu_has_amx_bf16();
}

int td_cpu_has_amx(void)
{
    return td_cpu_has_vnni() && isa_amx && isa_amx_on;
}

int td_cpu_has_amx_bf16(void)
{
    return td_cpu_has_amx() && isa_amx_bf16;
}

int td_cpu_amx_set(int on)
{
    pthread_once(&isa_once, isa_detect);
    const int prev = isa_amx_on;
    isa_amx_on = on != 0;
    return prev;
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
