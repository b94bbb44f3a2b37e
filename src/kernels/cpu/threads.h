/* The threading seam of the cpu kernels (internal to src/kernels/cpu/).
 *
 * OpenMP when the compiler has it (-fopenmp, the normal build); otherwise one
 * thread, so that builds without OpenMP (the libFuzzer build) still compile
 * and run the kernels serially (their `#pragma omp` lines are then ignored). */
#ifndef PL_KERNELS_CPU_THREADS_H
#define PL_KERNELS_CPU_THREADS_H

#if defined(_OPENMP)
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#endif

#endif
