// Matvec and the small-batch product of F16 weights stored as row blocks
// (tensor/matmul.h, RowLayout::kRowBlocks16): the 16 values of column k of
// rows 16b .. 16b + 15 are one 32-byte piece, block b's pieces in column
// order. A weight vector is then 16 *rows* at one column, so a token's
// activation x[k] is broadcast and FMA'd into one accumulator lane per row:
// no horizontal sums, one sequential stream per block, and each weight
// vector converted once for every token of a tile.
//
// Accumulation order (each (row, token) the same whatever the tile, the
// token count, the blocks of a task or the thread): per 256-column chunk
// an FMA chain over the chunk's columns in order, from zero, added to the
// output (zeroed first) chunk by chunk. That is the f32 GEMM's order
// (gemm.cc: kChunk, MicroTile), so on row blocks matvec, matvec_batch and
// matmul's GEMM give the same bits for a token, and the GEMM on the rows
// of the same matrix too.
//
// Why this layout: the row layout's small-batch kernel dots each weight row
// with each token (two accumulator chains a row and token, a horizontal sum
// at the end, the activations re-read for every 4-row panel), so the more
// tokens share a step, the more of its time goes to that bookkeeping. Here
// a weight vector feeds every token's FMAs directly and each block is one
// sequential stream, which is what a bandwidth-bound decode step wants
// (docs/WEIGHTS.md, "F16 row blocks").
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/matvec_row_blocks.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>

#include "hwy/highway.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/gemm_scratch.h"
#include "tensor/kernels/matvec_batch.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {
namespace row_blocks {

inline constexpr size_t kBlockRows = 16;
inline constexpr size_t kBlockVecs = kBlockRows / kLanes;  // vectors per block piece
inline constexpr size_t kChunk = 256;                      // gemm.cc's kChunk
// Vector registers: 32 on AVX-512 and aarch64, 16 on AVX2 / SSE4.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
inline constexpr size_t kRegs = 16;
#else
inline constexpr size_t kRegs = 32;
#endif
// A tile of G blocks x N tokens keeps G x kBlockVecs x N accumulators and
// its G x kBlockVecs weight vectors live (one broadcast more): the most
// blocks, up to 8, that fit.
constexpr size_t BlocksFor(size_t n) {
  const size_t g = (kRegs - 1) / (kBlockVecs * (n + 1));
  return g < 1 ? 1 : g > 8 ? 8 : g;
}
// Tokens per tile: the most with at least one whole block (8 on AVX-512, 6
// on AVX2 and NEON, 2 on SSE4); one on the scalar target.
constexpr size_t MaxTileTokens() {
  size_t n = 1;
  while (n < 8 && (kRegs - 1) / (kBlockVecs * (n + 2)) >= 1) ++n;
  return n;
}
inline constexpr size_t kTileTokens = MaxTileTokens();

// G blocks (from block piece `w`, pieces `cols` apart) x N tokens over
// columns [k0, k0 + kc): y[t * y_stride + row] += the chunk's chains.
template <size_t G, size_t N>
HWY_INLINE void TileChunk(const hwy::float16_t* HWY_RESTRICT w, size_t cols,
                          const float* HWY_RESTRICT xp, size_t k0, size_t kc, float* y,
                          size_t y_stride) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  constexpr size_t V = kBlockVecs;
  VF acc[G][V][N];
#pragma GCC unroll 8
  for (size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (size_t v = 0; v < V; ++v)
#pragma GCC unroll 8
      for (size_t t = 0; t < N; ++t) acc[g][v][t] = hn::Zero(df);
  // One line of each block's stream a second k step, 64 steps ahead, into
  // L1: the stream then runs under the FMAs rather than relying on the
  // hardware prefetcher alone. L1 rather than L2, because one token's pass
  // does little work per line, and an L2 hit still stalls it.
  constexpr size_t kAhead = 64 * kBlockRows;
  for (size_t k = k0; k < k0 + kc; ++k) {
    const hwy::float16_t* piece = w + k * kBlockRows;
    if ((k & 1) == 0) {
#pragma GCC unroll 8
      for (size_t g = 0; g < G; ++g)
        __builtin_prefetch(piece + g * cols * kBlockRows + kAhead, 0, 3);
    }
    VF wv[G][V];
#pragma GCC unroll 8
    for (size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
      for (size_t v = 0; v < V; ++v)
        wv[g][v] = hn::PromoteTo(df, hn::LoadU(dh, piece + g * cols * kBlockRows + v * kLanes));
    const float* xk = xp + k * N;
#pragma GCC unroll 8
    for (size_t t = 0; t < N; ++t) {
      const VF xt = hn::Set(df, xk[t]);
#pragma GCC unroll 8
      for (size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
        for (size_t v = 0; v < V; ++v) acc[g][v][t] = hn::MulAdd(wv[g][v], xt, acc[g][v][t]);
    }
  }
#pragma GCC unroll 8
  for (size_t t = 0; t < N; ++t)
#pragma GCC unroll 8
    for (size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
      for (size_t v = 0; v < V; ++v) {
        float* out = y + t * y_stride + g * kBlockRows + v * kLanes;
        hn::StoreU(hn::Add(hn::LoadU(df, out), acc[g][v][t]), df, out);
      }
}

// Blocks [b0, b1) for N tokens (packed in xp), column chunk by chunk.
template <size_t N>
HWY_INLINE void Tokens(const hwy::float16_t* w, size_t cols, const float* xp, int64_t b0,
                       int64_t b1, float* y, size_t y_stride) {
  constexpr size_t G = BlocksFor(N);
  for (int64_t b = b0; b < b1;) {
    const size_t g = size_t(std::min<int64_t>(int64_t(G), b1 - b));
    const hwy::float16_t* wb = w + size_t(b) * cols * kBlockRows;
    float* yb = y + size_t(b) * kBlockRows;
    for (size_t k0 = 0; k0 < cols; k0 += kChunk) {
      const size_t kc = std::min(kChunk, cols - k0);
      if (g == G)
        TileChunk<G, N>(wb, cols, xp, k0, kc, yb, y_stride);
      else
        for (size_t i = 0; i < g; ++i)
          TileChunk<1, N>(wb + i * cols * kBlockRows, cols, xp, k0, kc, yb + i * kBlockRows,
                          y_stride);
    }
    b += int64_t(g);
  }
}

template <size_t N = kTileTokens>
HWY_INLINE void TokensOf(size_t n, const hwy::float16_t* w, size_t cols, const float* xp,
                         int64_t b0, int64_t b1, float* y, size_t y_stride) {
  if constexpr (N > 1) {
    if (n < N) return TokensOf<N - 1>(n, w, cols, xp, b0, b1, y, y_stride);
  }
  Tokens<N>(w, cols, xp, b0, b1, y, y_stride);
}

}  // namespace row_blocks

void RowBlocksProduct(const uint8_t* w, int64_t cols, const float* x, int64_t n, float* y,
                      int64_t y_stride, int64_t b0, int64_t b1) {
  using namespace row_blocks;
  const auto* wh = reinterpret_cast<const hwy::float16_t*>(w);
  const size_t K = size_t(cols);
  for (int64_t t = 0; t < n; ++t)
    std::fill(y + t * y_stride + b0 * int64_t(kBlockRows),
              y + t * y_stride + b1 * int64_t(kBlockRows), 0.0f);
  // Token groups of up to kTileTokens, each packed column-major, so that a
  // tile's k step reads its tokens' x[k] side by side (the tokens' rows are
  // a power of two apart and would share L1 sets): group from token t0 at
  // xp + t0 * K, xp[t0 * K + k * m + t] = x_(t0 + t)[k].
  // The calling thread's packed activations (grow-only; reported with the
  // engine's scratch, activation_scratch_bytes).
  static thread_local kernels::ScratchBuffer<float> packed;
  float* xp = packed.Get(K * size_t(n));
  for (int64_t t0 = 0; t0 < n; t0 += int64_t(kTileTokens)) {
    const size_t m = size_t(std::min<int64_t>(int64_t(kTileTokens), n - t0));
    float* xg = xp + size_t(t0) * K;
    for (size_t t = 0; t < m; ++t) {
      const float* xt = x + (size_t(t0) + t) * K;
      for (size_t k = 0; k < K; ++k) xg[k * m + t] = xt[k];
    }
  }
  // More tokens than a tile holds: spans of blocks (~512 KiB of weights,
  // whole tiles of the first group's) that every group sweeps while they
  // are in L2, so that the weights come from memory once.
  constexpr size_t kFullTile = BlocksFor(kTileTokens);
  const size_t span_bytes = size_t(512) << 10, block_bytes = K * kBlockRows * 2;
  const int64_t span =
      n <= int64_t(kTileTokens)
          ? b1 - b0
          : int64_t(std::max<size_t>(1, span_bytes / block_bytes / kFullTile) * kFullTile);
  for (int64_t b = b0; b < b1; b += span)
    for (int64_t t0 = 0; t0 < n; t0 += int64_t(kTileTokens)) {
      const size_t m = size_t(std::min<int64_t>(int64_t(kTileTokens), n - t0));
      TokensOf(m, wh, K, xp + size_t(t0) * K, b, std::min(b1, b + span), y + t0 * y_stride,
               size_t(y_stride));
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(RowBlocksProduct);

void row_blocks_product(const uint8_t* w, int64_t cols, const float* x, int64_t n, float* y,
                        int64_t y_stride, int64_t b0, int64_t b1) {
  HWY_DYNAMIC_DISPATCH(RowBlocksProduct)(w, cols, x, n, y, y_stride, b0, b1);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
