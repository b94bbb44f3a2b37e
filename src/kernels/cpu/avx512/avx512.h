/* Start of an AVX-512 build of a cpu kernel file (internal to src/kernels/cpu/).
 *
 * Each file of this directory is one line around an #include of the file of
 * the same name in src/kernels/cpu/: the same source compiled a second time,
 * for AVX512F/BW/VL/DQ with FMA, without any -m flag in the Makefile. This
 * header switches the target for the rest of the translation unit (functions
 * OpenMP outlines included; simd.h then sees __AVX512F__ and widens pl_vf to
 * 16 floats) and renames the public pl_cpu_* kernels to pl_avx512_*, which
 * the portable pl_cpu_* call through PL_DISPATCH (simd.h) when pl_cpu_isa()
 * says so. Nothing here runs unless the CPU has AVX-512 (isa.c checks). */
#ifndef PL_KERNELS_CPU_AVX512_AVX512_H
#define PL_KERNELS_CPU_AVX512_AVX512_H

#include "kernels/cpu/isa.h"

#if PL_AVX512_BUILT
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#define PL_AVX512_TU 1

#define pl_cpu_embedding_fwd pl_avx512_embedding_fwd
#define pl_cpu_embedding_bwd pl_avx512_embedding_bwd
#define pl_cpu_pos_embedding_fwd pl_avx512_pos_embedding_fwd
#define pl_cpu_pos_embedding_bwd pl_avx512_pos_embedding_bwd
#define pl_cpu_bias_fwd pl_avx512_bias_fwd
#define pl_cpu_bias_bwd pl_avx512_bias_bwd
#define pl_cpu_add pl_avx512_add
#define pl_cpu_gelu_erf_fwd pl_avx512_gelu_erf_fwd
#define pl_cpu_gelu_erf_bwd pl_avx512_gelu_erf_bwd
#define pl_cpu_gelu_erf_fwd_bf16 pl_avx512_gelu_erf_fwd_bf16
#define pl_cpu_gelu_erf_bwd_bf16 pl_avx512_gelu_erf_bwd_bf16
#define pl_cpu_gelu_fwd pl_avx512_gelu_fwd
#define pl_cpu_gelu_bwd pl_avx512_gelu_bwd
#define pl_cpu_gelu_fwd_bf16 pl_avx512_gelu_fwd_bf16
#define pl_cpu_gelu_bwd_bf16 pl_avx512_gelu_bwd_bf16
#define pl_cpu_layernorm_fwd pl_avx512_layernorm_fwd
#define pl_cpu_layernorm_bwd pl_avx512_layernorm_bwd
#define pl_cpu_rmsnorm_fwd pl_avx512_rmsnorm_fwd
#define pl_cpu_rmsnorm_bwd pl_avx512_rmsnorm_bwd
#define pl_cpu_swiglu_fwd pl_avx512_swiglu_fwd
#define pl_cpu_swiglu_bwd pl_avx512_swiglu_bwd
#define pl_cpu_swiglu_fwd_bf16 pl_avx512_swiglu_fwd_bf16
#define pl_cpu_swiglu_bwd_bf16 pl_avx512_swiglu_bwd_bf16
#define pl_cpu_rope_fwd pl_avx512_rope_fwd
#define pl_cpu_rope_bwd pl_avx512_rope_bwd
#define pl_cpu_dropout pl_avx512_dropout
#define pl_attention_workspace pl_avx512_attention_workspace
#define pl_cpu_attention_fwd pl_avx512_attention_fwd
#define pl_cpu_attention_bwd pl_avx512_attention_bwd
#define pl_cpu_attention_cross_fwd pl_avx512_attention_cross_fwd
#define pl_cpu_attention_cross_bwd pl_avx512_attention_cross_bwd
#define pl_lmhead_workspace pl_avx512_lmhead_workspace
#define pl_lmhead_prepare pl_avx512_lmhead_prepare
#define pl_cpu_lmhead_stats pl_avx512_lmhead_stats
#define pl_cpu_lmhead_bwd pl_avx512_lmhead_bwd
#define pl_cpu_adamw pl_avx512_adamw
#define pl_cpu_sumsq pl_avx512_sumsq
#define pl_cpu_f32_to_bf16 pl_avx512_f32_to_bf16
#define pl_cpu_round_fp16 pl_avx512_round_fp16
#define pl_cpu_round_bf16 pl_avx512_round_bf16
#define pl_cpu_widen_bf16 pl_avx512_widen_bf16
#else
#define PL_AVX512_TU 0
#endif

#endif
