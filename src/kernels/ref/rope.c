/* Reference twin: rotary position embedding (RoPE), non-interleaved, in place
 * on the q and k heads of Megatron's grouped QKV layout; and pl_rope_table,
 * the cos/sin tables both twins read (set-up work, no fast twin).
 *
 * Not here: the interleaved variant (Megatron's --rotary-interleaved),
 * position-interpolation (--rotary-seq-len-interpolation-factor), YaRN, and
 * positions other than pos0 + t (packed sequences). */
#include "kernels/kernels.h"

#include <math.h>

#define PI 3.14159265358979323846

/* Llama 3.1's rescaling of one inverse frequency, as Megatron-LM's
 * RotaryEmbedding._apply_scaling
 * (megatron/core/models/common/embeddings/rotary_pos_embedding.py), itself
 * adapted from HF transformers' _compute_llama3_parameters
 * (src/transformers/modeling_rope_utils.py): wavelengths shorter than
 * orig / high_freq_factor keep their frequency, longer than
 * orig / low_freq_factor are divided by factor, and in between the two are
 * blended by smooth = (orig / wavelen - low) / (high - low). */
static double llama3_inv_freq(double inv, const pl_rope_scaling *s)
{
    double orig = (double)s->original_max_positions;
    double low_freq_wavelen = orig / s->low_freq_factor;
    double high_freq_wavelen = orig / s->high_freq_factor;
    double wavelen = 2.0 * PI / inv;
    if (wavelen < high_freq_wavelen)
        return inv;
    if (wavelen > low_freq_wavelen)
        return inv / s->factor;
    double smooth =
        (orig / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
    return (1.0 - smooth) * inv / s->factor + smooth * inv;
}

void pl_rope_table(float *cos_tab, float *sin_tab, int64_t P, int64_t rot, double base,
                   const pl_rope_scaling *scaling)
{
    int64_t half = rot / 2;
    for (int64_t i = 0; i < half; i++) {
        /* Megatron: 1 / base^(arange(0, rot, 2) / rot) */
        double inv = 1.0 / pow(base, (double)(2 * i) / (double)rot);
        if (scaling)
            inv = llama3_inv_freq(inv, scaling);
        for (int64_t p = 0; p < P; p++) {
            double angle = (double)p * inv;
            cos_tab[p * half + i] = (float)cos(angle);
            sin_tab[p * half + i] = (float)sin(angle);
        }
    }
}

/* Rotates the first rot dims of the q and k heads of qkv by angle * dir
 * (dir = 1 forward, -1 the transpose): with x1 = x[i], x2 = x[i+half],
 * x[i] = x1 cos - dir x2 sin, x[i+half] = x2 cos + dir x1 sin. */
static void rotate(float *qkv, const float *cos_tab, const float *sin_tab, int64_t B, int64_t T,
                   int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0, int dir)
{
    int64_t half = rot / 2, H = QG + 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const float *c = cos_tab + (pos0 + t) * half, *s = sin_tab + (pos0 + t) * half;
            for (int64_t g = 0; g < G; g++)
                for (int64_t h = 0; h <= QG; h++) { /* QG q heads, then k */
                    float *x = qkv + (((b * T + t) * G + g) * H + h) * HS;
                    for (int64_t i = 0; i < half; i++) {
                        float x1 = x[i], x2 = x[i + half];
                        if (dir > 0) {
                            x[i] = x1 * c[i] - x2 * s[i];
                            x[i + half] = x2 * c[i] + x1 * s[i];
                        } else {
                            x[i] = x1 * c[i] + x2 * s[i];
                            x[i + half] = x2 * c[i] - x1 * s[i];
                        }
                    }
                }
        }
}

void pl_ref_rope_fwd(float *qkv, const float *cos_tab, const float *sin_tab, int64_t B, int64_t T,
                     int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0)
{
    rotate(qkv, cos_tab, sin_tab, B, T, G, QG, HS, rot, pos0, 1);
}

void pl_ref_rope_bwd(float *dqkv, const float *cos_tab, const float *sin_tab, int64_t B,
                     int64_t T, int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0)
{
    rotate(dqkv, cos_tab, sin_tab, B, T, G, QG, HS, rot, pos0, -1);
}
