/* The AVX-512 build of src/kernels/cpu/rope.c (see avx512.h). */
#include "kernels/cpu/avx512/avx512.h"

#if PL_AVX512_TU
#include "kernels/cpu/rope.c"
#endif
