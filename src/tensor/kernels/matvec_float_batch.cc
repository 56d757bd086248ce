// The small-batch product of float weights (F32/F16/BF16) with matvec's
// exact per-row accumulation order: every (row, token) gets the sums of
// kernels_float.cc's DotRowsF -- vector j of the row (j < cols / lanes)
// FMA'd into chain j % 2 in increasing j, a scalar tail, one horizontal sum
// of both chains plus the tail -- so token t's result is bit-identical to
// matvec(x_t). The two chains of a (row, token) never interact before that
// final sum, so they can be run one after the other; this kernel does, and
// keeps them in memory between column chunks, which leaves the whole
// register file for more tokens per weight vector (each f16/bf16 vector is
// converted once for up to 6 tokens on AVX-512, 5 on AVX2). F16 matrices
// held as row blocks (a model read into memory) take matvec_row_blocks.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/matvec_float_batch.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>

#include "hwy/highway.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/float_rows-inl.h"
#include "tensor/kernels/gemm_scratch.h"
#include "tensor/kernels/line_span.h"
#include "tensor/kernels/matvec_batch.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {
namespace batch {

// Blocking, outermost first (sizes for an L1 of 48 KiB, an L2 of 2 MiB):
//  - the tokens' activations packed once per task, group by group and
//    chunk by chunk, in the order the register tiles read them
//    (PackedChunk): each tile's pass over a chain is one sequential stream.
//    The callers' activation rows are a power of two apart (8 or 32 KiB):
//    read in place, the tokens' lines of a chunk would all fall in the same
//    L1 sets, together with the weight rows (also a power of two apart), and
//    evict each other. A chain's pass reads every other vector, so a layout
//    by vector index (all tokens of vector j side by side, both chains
//    interleaved) would make each pass a strided walk through the whole
//    group's block, which an L1 prefetcher follows poorly; one stream per
//    pass is what it follows best;
//  - tokens in blocks of whole groups whose packed activations fit
//    kBlockBytes (L2), swept by every panel of the task: one block up to
//    120 tokens at 2048 columns, 24 at 8192 (AVX-512);
//  - rows in panels of kPanelRows; the next panel's weights stream into L2
//    (Prefetcher) while this one is computed;
//  - tokens in groups of up to kGroupTokens, each group's (row, token,
//    chain) accumulators of the panel kept in a small buffer (6 KiB on
//    AVX-512) between column chunks; a second group finds the panel's
//    weights in L1/L2;
//  - columns in chunks of kChunkValues: a whole row of 2048 columns, so
//    that a register tile runs 64 steps (AVX-512) per chain between loading
//    and storing its accumulators;
//  - in registers, one chain of kTileRows rows x m <= kTileTokens tokens:
//    each weight vector loaded and converted once for m tokens, each
//    activation vector loaded once for kTileRows rows.
// Per weight vector and tile: one conversion (one FMA-port uop on x86 when
// it reads memory), m FMAs. AVX-512 (32 registers): 4 x 6 = 24
// accumulators + 4 weights + 1 activation; 16-register targets (AVX2):
// 2 x 5: the largest tiles the register file holds, so that each load feeds
// the most FMAs. Chunks are whole rows because shorter ones pay the tile's
// fixed cost (loading and storing its accumulators) every few steps. The
// weights are converted per tile, not once per group into an f32 copy of
// the panel's chunk: the conversion is not the limit (F32 weights run no
// faster), and the copy costs more than it saves. Streamed from DRAM, the
// kernel is bound by how many misses one core keeps in flight while it
// computes, not by its FMAs: hence the next panel's prefetch under the
// current one (Prefetcher), where larger panels, other chunk sizes or a
// columns-outermost order do not help.
inline constexpr int64_t kTileRows = kLanes >= 16 ? 4 : kLanes >= 8 ? 2 : 1;
inline constexpr int64_t kTileTokens = kLanes >= 16 ? 6 : kLanes >= 8 ? 5 : 8;
inline constexpr int64_t kGroupTokens = 2 * kTileTokens;
inline constexpr int64_t kPanelRows = kLanes >= 16 ? 4 : 8;
inline constexpr size_t kChunkValues = 2048;
inline constexpr size_t kChunkVecs = kChunkValues / kLanes;
inline constexpr size_t kBlockBytes = size_t(1) << 20;
static_assert(kChunkVecs % 2 == 0, "a chunk starts on chain 0");
static_assert(kGroupTokens % kTileTokens == 0);
static_assert(kPanelRows % kTileRows == 0);

// Accumulator (row p, token t, chain c) of a panel, in floats.
HWY_INLINE size_t AccAt(int64_t p, int64_t t, int64_t c) {
  return ((size_t(p) * kGroupTokens + size_t(t)) * 2 + size_t(c)) * kLanes;
}
// The token tiles of a group of g tokens: the fewest tiles of at most
// kTileTokens, of sizes that differ by at most one (8 tokens on AVX-512: 4 +
// 4 rather than 6 + 2, whose 2-token tile spends a conversion per two FMAs).
struct TileSplit {
  int64_t g, n;
  explicit TileSplit(int64_t tokens) : g(tokens), n((tokens + kTileTokens - 1) / kTileTokens) {}
  int64_t size(int64_t k) const { return g / n + (k < g % n ? 1 : 0); }
  int64_t start(int64_t k) const { return k * (g / n) + std::min(k, g % n); }
};

// A group's packed activations of one chunk of nj vectors, laid out in the
// order the tiles read them, so that each tile's pass is one sequential
// stream: chain 0's vectors (even j), then chain 1's (odd j); within a
// chain, tile by tile; within a tile, vector by vector, its tokens side by
// side. Offsets in floats.
struct PackedChunk {
  TileSplit tiles;
  size_t nj;
  static size_t ChainVecs(size_t nj, int64_t chain) { return (nj + 1 - size_t(chain)) / 2; }
  // Where tile k's pass over `chain` starts.
  size_t TileAt(int64_t chain, int64_t k) const {
    const size_t before = chain == 0 ? 0 : size_t(tiles.g) * ChainVecs(nj, 0);
    return (before + size_t(tiles.start(k)) * ChainVecs(nj, chain)) * kLanes;
  }
  // Vector j of the chunk of token tt of tile k.
  size_t At(size_t j, int64_t k, int64_t tt) const {
    return TileAt(int64_t(j % 2), k) + ((j / 2) * size_t(tiles.size(k)) + size_t(tt)) * kLanes;
  }
};

// One chain of R rows x N tokens over the chunk's vectors j0, j0 + 2, ... <
// j1 (relative to the chunk: weights at rows + (c + j) lanes, activations
// N vectors a step from xs, the tile's PackedChunk stream): the
// accumulators come from and go back to `acc` (the panel buffer at the
// tile's row 0 and token 0), the chain's FMAs in DotRowsF's order.
// The next panel's weights, prefetched into L2 one cache line per tile
// step, in the order the tiles will read them (chunk by chunk, each chunk
// row by row), so that the memory stream runs under the FMAs and, when it
// falls behind, the lines needed first are the ones already there. One line
// per tile step keeps the stream about one panel ahead for a group of 8
// to 12 tokens (the tiles read a panel's rows once per token tile and
// chain). Without it the FMAs wait on demand misses; the hint is L2's
// (not L1's, nor non-temporal) because the panel is read again by every
// token group, and one line a step rather than two keeps the prefetches
// from competing with the tiles' own loads.
struct Prefetcher {
  const uint8_t* panel = nullptr;  // the next panel's row 0
  size_t row_bytes = 0, chunk_bytes = 0;
  int64_t rows = 0;  // 0: nothing (left) to prefetch
  int64_t r = 0;     // the row being prefetched
  size_t chunk = 0;  // byte offset of the chunk in each row
  size_t line = 0;   // the next line of the row's chunk piece
  // The lines of row r's chunk piece, from the line its first byte is in (a
  // mapped GGUF row may start mid-line: line_span.h); set at its line 0.
  kernels::LineSpan span;
  HWY_INLINE void Step() {
    if (r >= rows) return;
    if (line == 0)
      span = kernels::line_span(panel + size_t(r) * row_bytes + chunk,
                                std::min(chunk_bytes, row_bytes - chunk));
    __builtin_prefetch(span.first + line * kernels::kLineBytes, 0, 2);
    if (++line < span.lines) return;
    line = 0;
    if (++r < rows) return;
    chunk += chunk_bytes;
    r = chunk < row_bytes ? 0 : rows;
  }
};

template <class Src, int64_t R, int64_t N>
HWY_INLINE void ChainTile(const uint8_t* rows, size_t row_bytes, size_t c, const float* xs,
                          size_t j0, size_t j1, int64_t chain, float* acc, Prefetcher& pf) {
  const DF df;
  VF a[R][N];
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int64_t t = 0; t < N; ++t) a[r][t] = hn::Load(df, acc + AccAt(r, t, chain));
  for (size_t j = j0; j < j1; j += 2, xs += N * kLanes) {
    pf.Step();
    VF w[R];
#pragma GCC unroll 8
    for (int64_t r = 0; r < R; ++r) w[r] = Src::Load(rows + size_t(r) * row_bytes, c + j * kLanes);
#pragma GCC unroll 8
    for (int64_t t = 0; t < N; ++t) {
      VF xv = hn::Load(df, xs + size_t(t) * kLanes);
#if HWY_ARCH_X86
      // One load for the R FMAs (GCC would fold it into each of them).
      if constexpr (R > 1) asm("" : "+v"(xv.raw));
#endif
#pragma GCC unroll 8
      for (int64_t r = 0; r < R; ++r) a[r][t] = hn::MulAdd(w[r], xv, a[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int64_t t = 0; t < N; ++t) hn::Store(a[r][t], df, acc + AccAt(r, t, chain));
}

// One chain of R rows x m tokens (1 <= m <= kTileTokens), m a run-time
// count.
template <class Src, int64_t R, int64_t N = kTileTokens>
HWY_INLINE void ChainTileOf(int64_t m, const uint8_t* rows, size_t row_bytes, size_t c,
                            const float* xs, size_t j0, size_t j1, int64_t chain, float* acc,
                            Prefetcher& pf) {
  if constexpr (N > 1) {
    if (m < N) return ChainTileOf<Src, R, N - 1>(m, rows, row_bytes, c, xs, j0, j1, chain, acc, pf);
  }
  ChainTile<Src, R, N>(rows, row_bytes, c, xs, j0, j1, chain, acc, pf);
}

// Both chains of R rows over one chunk (pc) starting at value c, every
// token tile of the group.
template <class Src, int64_t R>
HWY_INLINE void ChunkRows(const uint8_t* rows, size_t row_bytes, size_t c, const float* xp,
                          const PackedChunk& pc, float* acc, Prefetcher& pf) {
  for (int64_t chain = 0; chain < 2; ++chain)
    for (int64_t k = 0; k < pc.tiles.n; ++k)
      ChainTileOf<Src, R>(pc.tiles.size(k), rows, row_bytes, c, xp + pc.TileAt(chain, k),
                          size_t(chain), pc.nj, chain, acc + AccAt(0, pc.tiles.start(k), 0), pf);
}

// Rows [p, p + np) of a panel, both chains of one chunk: row tiles of
// kTileRows, then single rows.
template <class Src>
HWY_INLINE void ChunkPanel(const uint8_t* panel, size_t row_bytes, int64_t np, size_t c,
                           const float* xp, const PackedChunk& pc, float* acc, Prefetcher& pf) {
  int64_t p = 0;
  for (; p + kTileRows <= np; p += kTileRows)
    ChunkRows<Src, kTileRows>(panel + size_t(p) * row_bytes, row_bytes, c, xp, pc,
                              acc + AccAt(p, 0, 0), pf);
  for (; p < np; ++p)
    ChunkRows<Src, 1>(panel + size_t(p) * row_bytes, row_bytes, c, xp, pc, acc + AccAt(p, 0, 0),
                      pf);
}

template <class Src>
void RowsTokens(const kernels::MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0, int64_t r1) {
  const DF df;
  const size_t cols = size_t(a.cols), n_vecs = cols / kLanes, tail0 = n_vecs * kLanes;
  const size_t n_chunks = (n_vecs + kChunkVecs - 1) / kChunkVecs;
  const int64_t n_groups = (n + kGroupTokens - 1) / kGroupTokens;
  // Group gi's chunk ci at xp + (gi * n_chunks + ci) * kGroupChunk.
  constexpr size_t kGroupChunk = kChunkValues * size_t(kGroupTokens);
  // The calling thread's packed activations (grow-only; reported with the
  // engine's scratch, activation_scratch_bytes).
  static thread_local kernels::ScratchBuffer<float> packed;
  float* xp = packed.Get(size_t(n_groups) * n_chunks * kGroupChunk);
  // The packed chunk ci of group gi.
  auto packed_chunk = [&](int64_t gi, size_t ci) {
    return PackedChunk{TileSplit(std::min(kGroupTokens, n - gi * kGroupTokens)),
                       std::min(kChunkVecs, n_vecs - ci * kChunkVecs)};
  };
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = a.x + size_t(t) * cols;
    const int64_t gi = t / kGroupTokens, tg = t % kGroupTokens;
    const TileSplit tiles = packed_chunk(gi, 0).tiles;
    int64_t k = 0;
    while (tg >= tiles.start(k) + tiles.size(k)) ++k;
    for (size_t ci = 0; ci < n_chunks; ++ci) {
      const PackedChunk pc = packed_chunk(gi, ci);
      float* xc = xp + (size_t(gi) * n_chunks + ci) * kGroupChunk;
      const float* xv = xt + ci * kChunkVecs * kLanes;
      for (size_t j = 0; j < pc.nj; ++j)
        hn::Store(hn::LoadU(df, xv + j * kLanes), df, xc + pc.At(j, k, tg - tiles.start(k)));
    }
  }
  HWY_ALIGN float acc[kPanelRows * kGroupTokens * 2 * kLanes];
  // Token blocks of whole groups whose packed activations stay in L2
  // (kBlockBytes) while every panel of the task sweeps them; the weights
  // are read once per block.
  const size_t group_bytes = n_chunks * kGroupChunk * sizeof(float);
  const int64_t block_groups =
      std::max<int64_t>(1, int64_t(kBlockBytes / std::max<size_t>(1, group_bytes)));
  for (int64_t b0 = 0; b0 < n_groups; b0 += block_groups)
    for (int64_t p0 = r0; p0 < r1; p0 += kPanelRows) {
      const int64_t np = std::min(kPanelRows, r1 - p0);
      const uint8_t* panel = a.w + size_t(p0) * a.row_bytes;
      // The next panel's rows (contiguous after this one's) stream into L2
      // while this panel is computed: a panel holds only a few chunks of each
      // row, too few for the hardware's stream detection to warm up in.
      Prefetcher pf;
      pf.panel = panel + size_t(np) * a.row_bytes;
      pf.row_bytes = a.row_bytes;
      pf.chunk_bytes = kChunkValues * Src::kBytes;
      pf.rows = std::min(kPanelRows, r1 - p0 - np);
      for (int64_t gi = b0; gi < std::min(n_groups, b0 + block_groups); ++gi) {
        const int64_t t0 = gi * kGroupTokens, g = std::min(kGroupTokens, n - t0);
        const float* x = a.x + size_t(t0) * cols;
        const float* xg = xp + size_t(gi) * n_chunks * kGroupChunk;
        for (int64_t p = 0; p < np; ++p)
          for (int64_t t = 0; t < g; ++t)
            for (int64_t c = 0; c < 2; ++c) hn::Store(hn::Zero(df), df, acc + AccAt(p, t, c));
        for (size_t ci = 0; ci < n_chunks; ++ci)
          ChunkPanel<Src>(panel, a.row_bytes, np, ci * kChunkValues, xg + ci * kGroupChunk,
                          packed_chunk(gi, ci), acc, pf);
        for (int64_t p = 0; p < np; ++p) {
          const uint8_t* row = panel + size_t(p) * a.row_bytes;
          for (int64_t t = 0; t < g; ++t) {
            const float* xt = x + size_t(t) * cols;
            float tail = 0;
            for (size_t i = tail0; i < cols; ++i) tail += Src::At(row, i) * xt[i];
            const VF sum =
                hn::Add(hn::Load(df, acc + AccAt(p, t, 0)), hn::Load(df, acc + AccAt(p, t, 1)));
            a.y[(t0 + t) * y_stride + p0 + p] = hn::GetLane(hn::SumOfLanes(df, sum)) + tail;
          }
        }
      }
    }
}

}  // namespace batch

void MatvecRowsFloatBatch(const kernels::MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0,
                          int64_t r1) {
  switch (a.type) {
    case DType::F32:
      return batch::RowsTokens<F32Row>(a, n, y_stride, r0, r1);
    case DType::F16:
      return batch::RowsTokens<F16Row>(a, n, y_stride, r0, r1);
    case DType::BF16:
      return batch::RowsTokens<BF16Row>(a, n, y_stride, r0, r1);
    default:
      HWY_ABORT("matvec_rows_float_batch: type %u", unsigned(a.type));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatvecRowsFloatBatch);

void matvec_rows_float_batch(const MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0,
                             int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatvecRowsFloatBatch)(a, n, y_stride, r0, r1);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
