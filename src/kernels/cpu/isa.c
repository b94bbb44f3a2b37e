/* Run-time choice between the portable and the AVX-512 builds of the cpu kernels.
 *
 * The choice is one process-wide value, made on first use from the CPU's
 * features (__builtin_cpu_supports, i.e. CPUID and the OS's XSAVE state) and
 * the environment variable PLAIT_ISA ("portable" forces the portable build),
 * or set by pl_cpu_isa_set(). It is an atomic int so that a first use from
 * two threads is not a data race; both would compute the same value. */
#include "kernels/kernels.h"

#include "kernels/cpu/isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* -1: not decided yet, else a pl_isa. */
static atomic_int isa_now = -1;

static pl_isa isa_best(void)
{
#if PL_AVX512_BUILT
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return PL_ISA_AVX512;
#endif
    return PL_ISA_PORTABLE;
}

pl_isa pl_cpu_isa(void)
{
    int isa = atomic_load_explicit(&isa_now, memory_order_relaxed);
    if (isa >= 0)
        return (pl_isa)isa;
    const char *env = getenv("PLAIT_ISA");
    isa = env && strcmp(env, "portable") == 0 ? PL_ISA_PORTABLE : isa_best();
    atomic_store_explicit(&isa_now, isa, memory_order_relaxed);
    return (pl_isa)isa;
}

pl_isa pl_cpu_isa_set(pl_isa isa)
{
    pl_isa best = isa_best();
    pl_isa now = isa > best ? best : isa;
    atomic_store_explicit(&isa_now, (int)now, memory_order_relaxed);
    return now;
}

const char *pl_cpu_isa_name(pl_isa isa) { return isa == PL_ISA_AVX512 ? "avx512" : "portable"; }
