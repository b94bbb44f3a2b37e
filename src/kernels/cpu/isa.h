/* Which instruction-set builds of the cpu kernels exist (internal to src/kernels/cpu/).
 *
 * PL_AVX512_BUILT is 1 when the compiler can build the AVX-512 variants of
 * src/kernels/cpu/avx512/: GCC on x86-64 (`#pragma GCC target` switches the
 * ISA, and its __AVX512F__ macro, for the rest of a file). Elsewhere (clang,
 * other architectures, or -DPL_NO_AVX512) only the portable build exists and
 * pl_cpu_isa() is always PL_ISA_PORTABLE. No system header is included here:
 * the AVX-512 files include this before switching the target. */
#ifndef PL_KERNELS_CPU_ISA_H
#define PL_KERNELS_CPU_ISA_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(PL_NO_AVX512)
#define PL_AVX512_BUILT 1
#else
#define PL_AVX512_BUILT 0
#endif

#endif
