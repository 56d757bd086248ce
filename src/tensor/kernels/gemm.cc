// Prefill matmul: y[i * rows + r] = <row r of W, x_i> for n tokens.
//
// Blocking (see docs/WEIGHTS.md):
// - The activations are transposed once per call into token tiles
//   xt[tile][k][kTileTokens] (kTileTokens = 2 vectors), so that one k step of
//   a tile is two aligned vector loads.
// - A task owns a panel of kPanelRows weight rows and all tokens. For each
//   chunk of kChunk columns it dequantizes the panel's rows once into an
//   f32 scratch panel (L1/L2 resident) and then sweeps every token tile over
//   it with a register tile of kTileRows rows x kTileTokens tokens: per k,
//   two activation vectors are FMA'd with kTileRows broadcast weights into
//   2 * kTileRows accumulators. So every weight is decoded once per call and
//   reused for all n tokens from registers/L1, and no horizontal reductions
//   are needed.
// - Each chunk's products are summed in fresh registers and then added to the
//   panel's f32 accumulators in memory: an output is a sum of per-chunk FMA
//   chains, the same for every n, tiling and thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/gemm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/gemm_bf16.h"
#include "tensor/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

// kTileRows x kTileVecs accumulators + kTileVecs activation vectors + one
// broadcast must fit the register file: 32 vector registers with AVX-512,
// 16 on AVX2/SSE4.
// Measured on AVX-512 (best of runs, 2048x2048, n = 64 / 512): 12x2 ~125 /
// ~120 GFLOP/s per core, 6x4 ~132 / ~110, 8x3 ~90 / ~112 (n = 64 pads to 96).
inline constexpr size_t kTileRows = kLanes == 16 ? 12 : 6;
inline constexpr size_t kTileVecs = 2;
inline constexpr size_t kTileTokens = kTileVecs * kLanes;
// Panels of 2, 4 or 8 row tiles measured the same within noise.
inline constexpr size_t kPanelRows = 4 * kTileRows;
// Columns per dequantized chunk: a multiple of every block size (256).
inline constexpr size_t kChunk = 256;

// c[r][0 .. kTileTokens) += sum_k p[r][k] * xt[k][0 .. kTileTokens).
HWY_INLINE void MicroTile(const float* HWY_RESTRICT p, const float* HWY_RESTRICT xt, size_t kc,
                          float* HWY_RESTRICT c, size_t c_stride) {
  const DF df;
  VF acc[kTileRows][kTileVecs];
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (size_t v = 0; v < kTileVecs; ++v) acc[r][v] = hn::Zero(df);
  for (size_t k = 0; k < kc; ++k) {
    VF xv[kTileVecs];
#pragma GCC unroll 4
    for (size_t v = 0; v < kTileVecs; ++v) xv[v] = hn::Load(df, xt + k * kTileTokens + v * kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kTileRows; ++r) {
      const VF wv = hn::Set(df, p[r * kChunk + k]);
#pragma GCC unroll 4
      for (size_t v = 0; v < kTileVecs; ++v) acc[r][v] = hn::MulAdd(wv, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r) {
    float* cr = c + r * c_stride;
#pragma GCC unroll 4
    for (size_t v = 0; v < kTileVecs; ++v)
      hn::Store(hn::Add(hn::Load(df, cr + v * kLanes), acc[r][v]), df, cr + v * kLanes);
  }
}

// Grow-only aligned scratch owned by the calling thread, so that repeated
// matmuls (one per weight per prefill chunk) do not allocate.
struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> xt, panels;
  size_t xt_size = 0, panels_size = 0;
  float* Get(hwy::AlignedFreeUniquePtr<float[]>& buf, size_t& size, size_t want) {
    if (size < want) {
      buf = hwy::AllocateAligned<float>(want);
      HWY_ASSERT(buf != nullptr);
      size = want;
    }
    return buf.get();
  }
};

// Whether BF16 weights take vdpbf16ps (gemm_bf16.h) instead of this f32
// GEMM: on AVX3_DL (and newer) where the CPU has AVX512-BF16, so that
// TURBOKV_SIMD=avx3 (or any older target) keeps the f32 GEMM. F16 weights
// always stay here: rounded to bf16 they would lose 3 mantissa bits.
bool Bf16DotActive() {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3_DL
  return kernels::cpu_has_avx512_bf16();
#else
  return false;
#endif
}

void MatmulPanels(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                  kernels::DequantizeFn dequantize, const float* x, int64_t n, float* y,
                  ThreadPool& pool) {
  if (type == DType::BF16 && Bf16DotActive())
    return kernels::matmul_bf16_dot(w, row_bytes, rows, cols, x, n, y, pool);
  static thread_local Scratch scratch;
  const size_t K = size_t(cols);
  const size_t n_tiles = (size_t(n) + kTileTokens - 1) / kTileTokens;
  const size_t n_pad = n_tiles * kTileTokens;

  // Transpose the activations into token tiles (zero-padded past n).
  float* xt = scratch.Get(scratch.xt, scratch.xt_size, n_tiles * K * kTileTokens);
  pool.run(int64_t(n_tiles), [&](int64_t t, int) {
    float* tile = xt + size_t(t) * K * kTileTokens;
    const size_t i0 = size_t(t) * kTileTokens;
    const size_t valid = std::min(kTileTokens, size_t(n) - i0);
    if (valid < kTileTokens) std::fill(tile, tile + K * kTileTokens, 0.0f);
    // Sequential writes; the reads walk `valid` rows in step, so each of
    // their cache lines is reused for 16 consecutive k.
    const float* xi = x + i0 * K;
    for (size_t k = 0; k < K; ++k) {
      float* out = tile + k * kTileTokens;
      for (size_t j = 0; j < valid; ++j) out[j] = xi[j * K + k];
    }
  });

  // Per-thread panel (kPanelRows x kChunk) and accumulators (kPanelRows x n_pad).
  const size_t per_thread = kPanelRows * kChunk + kPanelRows * n_pad;
  float* panels =
      scratch.Get(scratch.panels, scratch.panels_size, per_thread * size_t(pool.size()));
  const int64_t n_panels = (rows + int64_t(kPanelRows) - 1) / int64_t(kPanelRows);
  pool.run(n_panels, [&](int64_t panel, int thread) {
    float* p = panels + per_thread * size_t(thread);
    float* c = p + kPanelRows * kChunk;
    const int64_t r0 = panel * int64_t(kPanelRows);
    const size_t nr = size_t(std::min<int64_t>(int64_t(kPanelRows), rows - r0));
    std::fill(c, c + kPanelRows * n_pad, 0.0f);
    if (nr < kPanelRows) std::fill(p + nr * kChunk, p + kPanelRows * kChunk, 0.0f);
    for (size_t k0 = 0; k0 < K; k0 += kChunk) {
      const size_t kc = std::min(kChunk, K - k0);
      const size_t byte0 = tkv::row_bytes(type, int64_t(k0));
      for (size_t r = 0; r < nr; ++r)
        dequantize(type, w + size_t(r0 + int64_t(r)) * row_bytes + byte0, p + r * kChunk,
                   int64_t(kc));
      for (size_t t = 0; t < n_tiles; ++t) {
        const float* xtile = xt + t * K * kTileTokens + k0 * kTileTokens;
        for (size_t m = 0; m < kPanelRows; m += kTileRows)
          MicroTile(p + m * kChunk, xtile, kc, c + m * n_pad + t * kTileTokens, n_pad);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      float* yi = y + i * rows + r0;
      for (size_t r = 0; r < nr; ++r) yi[r] = c[r * n_pad + size_t(i)];
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatmulPanels);
HWY_EXPORT(Bf16DotActive);

bool bf16_dot_gemm_active() {
  return HWY_DYNAMIC_DISPATCH(Bf16DotActive)();
}

void matmul_panels(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                   DequantizeFn dequantize, const float* x, int64_t n, float* y, ThreadPool& pool) {
  HWY_DYNAMIC_DISPATCH(MatmulPanels)(type, w, row_bytes, rows, cols, dequantize, x, n, y, pool);
}

const char* active_target_name() {
  // The dispatcher picks the best (lowest-bit) target compiled and supported.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(usable & -usable);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
