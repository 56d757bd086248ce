// Prefill GEMM of BF16 weights with vdpbf16ps (gemm_bf16.h). The blocking
// is gemm.cc's, in pairs of columns (one vdpbf16ps lane takes two bf16
// products):
// - The activations are rounded to bf16 and transposed once per call into
//   token tiles xt[tile][k / 2][kTileTokens] of 32-bit pairs (x_k low,
//   x_k+1 high; a zero pads an odd column count), so that a pair step of a
//   tile is two aligned vector loads.
// - A task owns a panel of kPanelRows weight rows and all tokens. Per chunk
//   of kChunk columns it copies the panel's bf16 rows into a scratch panel
//   (zero-padded to whole pairs) and sweeps every token tile over it with a
//   register tile of kTileRows rows x 2 vectors of 16 tokens: per pair, one
//   broadcast weight pair and two vdpbf16ps per row.
// - Each chunk's products are summed in fresh registers and then added to
//   the panel's f32 accumulators in memory, so an output is the same sum
//   for every n, tiling and thread count.
#include "tensor/kernels/gemm_bf16.h"

#include <algorithm>
#include <cstring>

#include "common/f16.h"
#include "hwy/base.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/gemm_scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tkv::kernels {

#if defined(__x86_64__)

namespace {

// 12 x 2 accumulators + 2 activation vectors of the 32 zmm registers (the
// broadcast pair is a memory operand); gemm.cc's f32 tile, which measured
// best there.
constexpr size_t kTileRows = 12;
constexpr size_t kLanes = 16;
constexpr size_t kTileTokens = 2 * kLanes;
constexpr size_t kPanelRows = 4 * kTileRows;
// Columns per chunk (the unit of the fresh-register sums) and its pairs.
constexpr size_t kChunk = 256;
constexpr size_t kChunkPairs = kChunk / 2;

#define TKV_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// c[r][0 .. kTileTokens) += sum_j p[r][j] . xt[j][0 .. kTileTokens) over kp
// column pairs j (p: bf16 pairs of kTileRows rows, kChunkPairs apart).
TKV_BF16_TARGET inline void MicroTile(const uint32_t* __restrict p, const uint32_t* __restrict xt,
                                      size_t kp, float* __restrict c, size_t c_stride) {
  __m512 acc[kTileRows][2];
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (size_t j = 0; j < kp; ++j) {
    const __m512bh x0 = (__m512bh)_mm512_load_si512(xt + j * kTileTokens);
    const __m512bh x1 = (__m512bh)_mm512_load_si512(xt + j * kTileTokens + kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kTileRows; ++r) {
      const __m512bh wv = (__m512bh)_mm512_set1_epi32(int(p[r * kChunkPairs + j]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], wv, x0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], wv, x1);
    }
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r) {
    float* cr = c + r * c_stride;
    _mm512_store_ps(cr, _mm512_add_ps(_mm512_load_ps(cr), acc[r][0]));
    _mm512_store_ps(cr + kLanes, _mm512_add_ps(_mm512_load_ps(cr + kLanes), acc[r][1]));
  }
}

// The bf16 pair of columns 2j, 2j + 1 of a row (0 past cols).
inline uint32_t PairOf(const float* xi, size_t j, size_t cols) {
  const uint32_t lo = f32_to_bf16(xi[2 * j]);
  const uint32_t hi = 2 * j + 1 < cols ? f32_to_bf16(xi[2 * j + 1]) : 0;
  return lo | hi << 16;
}

// Rows [r0, r0 + nr) times every token tile: p the thread's panel
// (kPanelRows x kChunkPairs pairs), c its accumulators (kPanelRows x n_pad).
TKV_BF16_TARGET __attribute__((noinline)) void PanelProduct(const uint8_t* w, size_t row_bytes,
                                                            int64_t r0, size_t nr, size_t K,
                                                            const uint32_t* xt, size_t n_tiles,
                                                            uint32_t* p, float* c, int64_t n,
                                                            int64_t rows, float* y) {
  const size_t KP = (K + 1) / 2;
  const size_t n_pad = n_tiles * kTileTokens;
  std::fill(c, c + kPanelRows * n_pad, 0.0f);
  if (nr < kPanelRows) std::fill(p + nr * kChunkPairs, p + kPanelRows * kChunkPairs, 0u);
  for (size_t k0 = 0; k0 < K; k0 += kChunk) {
    const size_t kc = std::min(kChunk, K - k0);
    const size_t kp = (kc + 1) / 2;
    for (size_t r = 0; r < nr; ++r) {
      uint32_t* pr = p + r * kChunkPairs;
      pr[kp - 1] = 0;  // the high half of an odd last pair
      std::memcpy(pr, w + size_t(r0 + int64_t(r)) * row_bytes + 2 * k0, 2 * kc);
    }
    for (size_t t = 0; t < n_tiles; ++t) {
      const uint32_t* xtile = xt + t * KP * kTileTokens + (k0 / 2) * kTileTokens;
      for (size_t m = 0; m < kPanelRows; m += kTileRows)
        MicroTile(p + m * kChunkPairs, xtile, kp, c + m * n_pad + t * kTileTokens, n_pad);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    float* yi = y + i * rows + r0;
    for (size_t r = 0; r < nr; ++r) yi[r] = c[r * n_pad + size_t(i)];
  }
}

}  // namespace

void matmul_bf16_dot(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x,
                     int64_t n, float* y, ThreadPool& pool) {
  HWY_ASSERT(cpu_has_avx512_bf16());
  static thread_local ScratchBuffer<uint32_t> xt_buf, panel_buf;
  static thread_local ScratchBuffer<float> acc_buf;
  const size_t K = size_t(cols);
  const size_t KP = (K + 1) / 2;
  const size_t n_tiles = (size_t(n) + kTileTokens - 1) / kTileTokens;
  const size_t n_pad = n_tiles * kTileTokens;

  // Round and transpose the activations into token tiles (zeros past n).
  uint32_t* xt = xt_buf.Get(n_tiles * KP * kTileTokens);
  pool.run(int64_t(n_tiles), [&](int64_t t, int) {
    uint32_t* tile = xt + size_t(t) * KP * kTileTokens;
    const size_t i0 = size_t(t) * kTileTokens;
    const size_t valid = std::min(kTileTokens, size_t(n) - i0);
    if (valid < kTileTokens) std::fill(tile, tile + KP * kTileTokens, 0u);
    const float* xi = x + i0 * K;
    for (size_t j = 0; j < KP; ++j) {
      uint32_t* out = tile + j * kTileTokens;
      for (size_t i = 0; i < valid; ++i) out[i] = PairOf(xi + i * K, j, K);
    }
  });

  const size_t threads = size_t(pool.size());
  uint32_t* panels = panel_buf.Get(kPanelRows * kChunkPairs * threads);
  float* accs = acc_buf.Get(kPanelRows * n_pad * threads);
  const int64_t n_panels = (rows + int64_t(kPanelRows) - 1) / int64_t(kPanelRows);
  pool.run(n_panels, [&](int64_t panel, int thread) {
    const int64_t r0 = panel * int64_t(kPanelRows);
    const size_t nr = size_t(std::min<int64_t>(int64_t(kPanelRows), rows - r0));
    PanelProduct(w, row_bytes, r0, nr, K, xt, n_tiles,
                 panels + kPanelRows * kChunkPairs * size_t(thread),
                 accs + kPanelRows * n_pad * size_t(thread), n, rows, y);
  });
}

#else  // !__x86_64__

void matmul_bf16_dot(const uint8_t*, size_t, int64_t, int64_t, const float*, int64_t, float*,
                     ThreadPool&) {
  HWY_ABORT("matmul_bf16_dot: not an x86-64 build");
}

#endif  // __x86_64__

}  // namespace tkv::kernels
