// Entry points of the codecs' Highway kernels (runtime dispatch to the best
// target the CPU supports; tests force each compiled target in turn through
// hwy::SetSupportedTargetsForTest). Internal to kv/codec.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tkv::kv {
struct TqGeometry;
}

namespace tkv::kv::kernels {

// ---- rotation (rotation_kernels.cc) ----
// In-place unnormalized Walsh-Hadamard transform of n (a power of two)
// values, Sylvester order; bit-identical on every target.
void fwht(float* x, int n);

// ---- row-major f32 / f16 (one head vector of `dim` values per slot) ----
// out = f16(x) (round to nearest even); false if any result is Inf/NaN.
bool encode_f16_row(const float* x, int n, uint16_t* out);
// scores[g * stride + t] = <q_g, row_t> for t in [0, n); q: G x dim.
void score_rows_f32(const float* q, int G, int dim, const float* rows, int n, float* scores,
                    size_t stride);
void score_rows_f16(const float* q, int G, int dim, const uint16_t* rows, int n, float* scores,
                    size_t stride);
// acc[g * dim + i] += sum_t p[g * stride + t] * row_t[i].
void accumulate_rows_f32(const float* p, int G, size_t stride, const float* rows, int n, int dim,
                         float* acc);
void accumulate_rows_f16(const float* p, int G, size_t stride, const uint16_t* rows, int n, int dim,
                         float* acc);

// ---- ggml blocks, row-major (block_codec.cc): `block` values per block, q4 selects
// q4_0 (else q8_0); rows: n consecutive slots ----
void score_blocks(const float* q, int G, int dim, int block, bool q4, const uint8_t* rows, int n,
                  float* scores, size_t stride);
void accumulate_blocks(const float* p, int G, size_t stride, const uint8_t* rows, int n, int dim,
                       int block, bool q4, float* acc);

// ---- TurboQuant tiles (tq_layout.h); table16: the codebook replicated to
// 16 entries (entry j = centroid j mod 2^bits) ----
// scores[g * stride + (t - begin)] = norm_t * <q'_g, c[codes_t]>; q': G x head_dim, rotated.
void tq_score(const TqGeometry& geo, const float* table16, const float* q, int G,
              const uint8_t* page, int page_tokens, int begin, int end, float* scores,
              size_t stride);
// acc[g * head_dim + i] += sum_t p[g * stride + (t - begin)] * norm_t * c[code_t,i] (rotated
// domain).
void tq_accumulate(const TqGeometry& geo, const float* table16, const float* p, int G,
                   size_t stride, const uint8_t* page, int page_tokens, int begin, int end,
                   float* acc);

}  // namespace tkv::kv::kernels
