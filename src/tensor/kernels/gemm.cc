// Prefill matmul: y[i * rows + r] = <row r of W, x_i> for n tokens.
//
// Blocking (see docs/WEIGHTS.md):
// - The activations are transposed once per call into token tiles
//   xt[tile][k][kTileTokens] (kTileTokens = 2 vectors), so that one k step of
//   a tile is two aligned vector loads.
// - A task owns a few consecutive panels of kPanelRows weight rows and all
//   tokens. For each chunk of kChunk columns it dequantizes each panel's rows
//   once into an f32 scratch panel (L1/L2 resident) and then sweeps every
//   token tile over it with a register tile of kTileRows rows x kTileTokens
//   tokens: per k, two activation vectors are FMA'd with kTileRows broadcast
//   weights into 2 * kTileRows accumulators. So every weight is decoded once
//   per call and reused for all n tokens from registers/L1, no horizontal
//   reductions are needed, and a chunk's activation tiles, read from L2, serve
//   all the task's panels (one panel per task would re-read them from L3
//   for every panel).
// - While a panel's chunk is swept, the weights of the next (panel, chunk)
//   are prefetched into L2, a few lines per token tile: its row pieces are
//   too short for the hardware's stream detection, and read on demand they
//   stall the dequantization.
// - Each chunk's products are summed in fresh registers and then added to the
//   panel's f32 accumulators in memory (laid out per token tile, so that a
//   register tile's accumulators are consecutive lines): an output is a sum
//   of per-chunk FMA chains in chunk order, the same for every n, tiling,
//   panels per task and thread count. The panels are cut evenly into a
//   multiple of the thread count of tasks; a short last panel skips its
//   empty row tiles; the accumulators reach y in token tile x 8-row blocks.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/gemm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/gemm_amx.h"
#include "tensor/kernels/gemm_bf16.h"
#include "tensor/kernels/gemm_scratch.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/line_span.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

// kTileRows x kTileVecs accumulators + kTileVecs activation vectors + one
// broadcast must fit the register file: 32 vector registers with AVX-512,
// 16 on AVX2/SSE4. Of the shapes that fit AVX-512's 32 registers, 12 rows x
// 2 vectors is the best at prefill sizes: 6 x 4 wins only for short
// batches, 8 x 3 at neither.
inline constexpr size_t kTileRows = kLanes == 16 ? 12 : 6;
inline constexpr size_t kTileVecs = 2;
inline constexpr size_t kTileTokens = kTileVecs * kLanes;
// Four row tiles a panel: panels of 2 to 8 tiles perform alike on AVX-512,
// and 3 or 4 best on AVX2.
inline constexpr size_t kPanelRows = 4 * kTileRows;
// Columns per dequantized chunk: a multiple of every block size (256).
inline constexpr size_t kChunk = 256;
// Accumulator bytes of a task's panels (L2-resident along with a chunk's
// activation tiles: 512 KiB at n = 512). Several panels a task let a
// chunk's activation tiles, once in L2, serve all of them; one panel per
// task would bring them in again for every panel.
inline constexpr size_t kTaskAccBytes = size_t(1) << 20;

// c[r][0 .. kTileTokens) += sum_k p[r][k] * xt[k][0 .. kTileTokens).
// The panel p holds weight (r, k) at p[r * kRowStride + k * kKStride]:
// row-major (dequantized rows) or column-major (row blocks).
template <size_t kRowStride, size_t kKStride>
HWY_INLINE void MicroTile(const float* HWY_RESTRICT p, const float* HWY_RESTRICT xt, size_t kc,
                          float* HWY_RESTRICT c, size_t c_stride) {
  const DF df;
  VF acc[kTileRows][kTileVecs];
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (size_t v = 0; v < kTileVecs; ++v) acc[r][v] = hn::Zero(df);
  auto step = [&](size_t k) HWY_ATTR {
    VF xv[kTileVecs];
#pragma GCC unroll 4
    for (size_t v = 0; v < kTileVecs; ++v) xv[v] = hn::Load(df, xt + k * kTileTokens + v * kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kTileRows; ++r) {
      const VF wv = hn::Set(df, p[r * kRowStride + k * kKStride]);
#pragma GCC unroll 4
      for (size_t v = 0; v < kTileVecs; ++v) acc[r][v] = hn::MulAdd(wv, xv[v], acc[r][v]);
    }
  };
  // On the 16-register targets a k step is 12 FMAs, and the loop's own
  // counter and branch uops (3 per step) compete with them for the ports,
  // so the loop is unrolled 4 times. AVX-512's 24-FMA step hides them and
  // keeps the plain loop.
  if constexpr (kTileRows * kTileVecs <= 12) {
#pragma GCC unroll 4
    for (size_t k = 0; k < kc; ++k) step(k);
  } else {
    for (size_t k = 0; k < kc; ++k) step(k);
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r) {
    float* cr = c + r * c_stride;
#pragma GCC unroll 4
    for (size_t v = 0; v < kTileVecs; ++v)
      hn::Store(hn::Add(hn::Load(df, cr + v * kLanes), acc[r][v]), df, cr + v * kLanes);
  }
}

// One token tile of the transposed activations: tile[k * kTileTokens + j] =
// x_(i0 + j)[k] for the tile's `valid` tokens (xi = x_i0, rows K apart; the
// rest of the tile is left as it is). Where 256-bit vectors exist, blocks
// of 8 tokens x 8 columns go through registers (an 8 x 8 transpose: 8 loads,
// 24 shuffles, 8 stores); a scalar copy moved one float per load and store,
// ~3% of an AVX-512 prefill. The rest (a short last group, K % 8) stays
// scalar. Exact: values are only moved.
void TransposeTile(const float* xi, size_t K, size_t valid, float* tile) {
  size_t j0 = 0, k_vec = 0;
#if HWY_MAX_BYTES >= 32
  const hn::FixedTag<float, 8> d8;
  const hn::Repartition<uint64_t, decltype(d8)> d64;
  using V8 = hn::Vec<decltype(d8)>;
  k_vec = K / 8 * 8;
  for (; j0 + 8 <= valid; j0 += 8) {
    const float* x0 = xi + j0 * K;
    for (size_t k = 0; k < k_vec; k += 8) {
      V8 r[8];
      for (size_t i = 0; i < 8; ++i) r[i] = hn::LoadU(d8, x0 + i * K + k);
      // Pairs of tokens per 32-bit lane pair, then quads per 64-bit pair,
      // each within 128-bit blocks; then the blocks joined.
      V8 t[8], u[8];
      for (size_t i = 0; i < 8; i += 2) {
        t[i] = hn::InterleaveLower(d8, r[i], r[i + 1]);
        t[i + 1] = hn::InterleaveUpper(d8, r[i], r[i + 1]);
      }
      for (size_t q = 0; q < 8; q += 4) {
        for (size_t h = 0; h < 2; ++h) {
          const auto a = hn::BitCast(d64, t[q + h]), b = hn::BitCast(d64, t[q + h + 2]);
          u[q + 2 * h] = hn::BitCast(d8, hn::InterleaveLower(d64, a, b));
          u[q + 2 * h + 1] = hn::BitCast(d8, hn::InterleaveUpper(d64, a, b));
        }
      }
      // u[c] (c < 4) holds tokens 0-3 of columns c and c + 4, u[4 + c]
      // tokens 4-7.
      float* out = tile + k * kTileTokens + j0;
      for (size_t c = 0; c < 4; ++c) {
        hn::StoreU(hn::ConcatLowerLower(d8, u[4 + c], u[c]), d8, out + c * kTileTokens);
        hn::StoreU(hn::ConcatUpperUpper(d8, u[4 + c], u[c]), d8, out + (c + 4) * kTileTokens);
      }
    }
  }
#endif
  // The tokens past the last whole group (all of them without 256-bit
  // vectors), then the columns past the last whole block: sequential
  // writes, the reads walking the rows in step, so each of their cache lines
  // serves 16 consecutive k.
  for (size_t k = 0; k < K; ++k) {
    float* out = tile + k * kTileTokens;
    for (size_t j = k < k_vec ? j0 : 0; j < valid; ++j) out[j] = xi[j * K + k];
  }
}

// Grow-only scratch owned by the calling thread, so that repeated matmuls
// (one per weight per prefill chunk) do not allocate.
struct Scratch {
  kernels::ScratchBuffer<float> xt, panels;
};

// Whether F16 and BF16 weights take AMX (gemm_amx.h) instead of this f32
// GEMM: on the AVX-512 targets (every AMX CPU has them) where the CPU and OS
// allow AMX and it is preferred (kernel_config.h: TURBOKV_AMX), so that
// TURBOKV_SIMD=avx2 (or any older target) keeps the f32 GEMM.
bool AmxActive() {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return kernel_config().amx && kernels::cpu_has_amx_bf16();
#else
  return false;
#endif
}

// Whether BF16 weights take vdpbf16ps (gemm_bf16.h) instead of this f32
// GEMM: on the AVX-512 targets where the CPU has AVX512-BF16 and it is
// preferred there (kernel_config.h: AMD by default, TURBOKV_BF16_DOT), so
// that TURBOKV_SIMD=avx2 (or any older target) keeps the f32 GEMM. F16
// weights never take it: rounded to bf16 they would lose 3 mantissa bits.
// Where AMX is active it takes both types instead.
bool Bf16DotActive() {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return !AmxActive() && kernels::cpu_has_avx512_bf16() && kernel_config().use_bf16_dot();
#else
  return false;
#endif
}

// The weights of the chunk a panel dequantizes next, prefetched into L2 a
// few cache lines per token tile of the current chunk, so that the row
// pieces (too short for the hardware's stream detection) arrive under the
// FMAs instead of stalling the dequantization. Each piece's lines are
// counted from the line its first byte is in (line_span.h: a mapped GGUF
// row may start mid-line).
struct ChunkPrefetch {
  const uint8_t* rows = nullptr;  // row 0 of the panel, at the chunk's first byte
  size_t row_bytes = 0, bytes = 0, lines_per_row = 0, total = 0, done = 0;
  ChunkPrefetch() = default;
  ChunkPrefetch(const uint8_t* first, size_t stride, size_t piece, size_t nr)
      : rows(first),
        row_bytes(stride),
        bytes(piece),
        lines_per_row(kernels::max_lines(piece)),
        total(nr * lines_per_row) {}
  // Issues the lines up to fraction num / den of the total.
  HWY_INLINE void Upto(size_t num, size_t den) {
    for (const size_t want = total * num / den; done < want; ++done) {
      const kernels::LineSpan span =
          kernels::line_span(rows + (done / lines_per_row) * row_bytes, bytes);
      const size_t line = done % lines_per_row;
      if (line < span.lines) __builtin_prefetch(span.first + line * kernels::kLineBytes, 0, 2);
    }
  }
};

struct PanelArgs {
  DType type;
  const uint8_t* w;
  size_t row_bytes;
  int64_t rows;
  size_t K;
  kernels::DequantizeFn dequantize;
  bool row_blocks;  // F16 in row blocks (matmul.h): panels column-major
  const float* xt;
  size_t n_tiles, n_pad;
  float* y;
  size_t n;
};

// Rows [r0, r0 + nr) x columns [k0, k0 + kc) of F16 row blocks (pieces of
// 16 rows at one column, 32 bytes, a block's pieces in column order) into
// the column-major panel p[k * kPanelRows + i]. r0 and nr are multiples of
// kLanes (panels of kPanelRows rows, a matrix of whole blocks), so every
// vector of a column lies in one piece.
static_assert(kPanelRows % kLanes == 0 && 16 % kLanes == 0);
void RowBlocksPanel(const uint8_t* w, size_t K, size_t r0, size_t nr, size_t k0, size_t kc,
                    float* HWY_RESTRICT p) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const auto* wh = reinterpret_cast<const hwy::float16_t*>(w);
  for (size_t i = 0; i < nr; i += kLanes) {
    const size_t r = r0 + i;
    const hwy::float16_t* src = wh + ((r / 16) * K + k0) * 16 + r % 16;
    for (size_t k = 0; k < kc; ++k)
      hn::Store(hn::PromoteTo(df, hn::LoadU(dh, src + k * 16)), df, p + k * kPanelRows + i);
  }
}

// The prefetch of rows [r, r + nr) x columns [k, k + kc) of the weights.
ChunkPrefetch PanelPrefetch(const PanelArgs& a, size_t r, size_t nr, size_t k, size_t kc) {
  if (!a.row_blocks)
    return ChunkPrefetch(a.w + r * a.row_bytes + tkv::row_bytes(a.type, int64_t(k)), a.row_bytes,
                         tkv::row_bytes(a.type, int64_t(kc)), nr);
  const size_t b0 = r / 16, b1 = (r + nr + 15) / 16;
  return ChunkPrefetch(a.w + (b0 * a.K + k) * 32, a.K * 32, kc * 32, b1 - b0);
}

// Rows of panels [p0, p1) for all tokens, chunk by chunk: each chunk of
// every panel is dequantized into p (kPanelRows x kChunk) and swept over all
// token tiles into that panel's accumulators in c, so the chunk's activation
// tiles are read from L2 by all the task's panels. An output's sum is its
// chunks' FMA chains added in chunk order, whatever the panels per task.
// c holds per panel c[tile][row][kTileTokens]: a register tile's
// accumulators are 6 (12) consecutive lines, not lines a row of tokens
// apart, and the final transpose into y reads them in order.
void TaskProduct(const PanelArgs& a, int64_t p0, int64_t p1, float* HWY_RESTRICT p,
                 float* HWY_RESTRICT c) {
  const int64_t r_begin = p0 * int64_t(kPanelRows);
  const int64_t r_end = std::min(a.rows, p1 * int64_t(kPanelRows));
  const size_t panel_acc = kPanelRows * a.n_pad;
  std::fill(c, c + size_t(p1 - p0) * panel_acc, 0.0f);
  for (size_t k0 = 0; k0 < a.K; k0 += kChunk) {
    const size_t kc = std::min(kChunk, a.K - k0);
    const size_t byte0 = tkv::row_bytes(a.type, int64_t(k0));
    for (int64_t panel = p0; panel < p1; ++panel) {
      const int64_t r0 = panel * int64_t(kPanelRows);
      const size_t nr = size_t(std::min<int64_t>(int64_t(kPanelRows), a.rows - r0));
      // Row tiles holding a valid row: a short last panel skips the others.
      const size_t tiled_rows = (nr + kTileRows - 1) / kTileRows * kTileRows;
      if (a.row_blocks) {
        RowBlocksPanel(a.w, a.K, size_t(r0), nr, k0, kc, p);
        for (size_t k = 0; nr < tiled_rows && k < kc; ++k)
          std::fill(p + k * kPanelRows + nr, p + k * kPanelRows + tiled_rows, 0.0f);
      } else {
        const uint8_t* rows = a.w + size_t(r0) * a.row_bytes;
        for (size_t r = 0; r < nr; ++r)
          a.dequantize(a.type, rows + r * a.row_bytes + byte0, p + r * kChunk, int64_t(kc));
        if (nr < tiled_rows) std::fill(p + nr * kChunk, p + tiled_rows * kChunk, 0.0f);
      }
      // The next (panel, chunk) in this order: the next panel's same chunk,
      // or the first panel's next chunk.
      ChunkPrefetch pf;
      if (panel + 1 < p1) {
        const int64_t next_r0 = r0 + int64_t(kPanelRows);
        pf =
            PanelPrefetch(a, size_t(next_r0),
                          size_t(std::min<int64_t>(int64_t(kPanelRows), a.rows - next_r0)), k0, kc);
      } else if (k0 + kChunk < a.K) {
        const size_t next_kc = std::min(kChunk, a.K - k0 - kChunk);
        pf = PanelPrefetch(a, size_t(r_begin),
                           size_t(std::min<int64_t>(int64_t(kPanelRows), r_end - r_begin)),
                           k0 + kChunk, next_kc);
      }
      float* pc = c + size_t(panel - p0) * panel_acc;
      for (size_t t = 0; t < a.n_tiles; ++t) {
        pf.Upto(t + 1, a.n_tiles);
        const float* xtile = a.xt + t * a.K * kTileTokens + k0 * kTileTokens;
        float* ct = pc + t * kPanelRows * kTileTokens;
        for (size_t m = 0; m < tiled_rows; m += kTileRows) {
          if (a.row_blocks)
            MicroTile<1, kPanelRows>(p + m, xtile, kc, ct + m * kTileTokens, kTileTokens);
          else
            MicroTile<kChunk, 1>(p + m * kChunk, xtile, kc, ct + m * kTileTokens, kTileTokens);
        }
      }
    }
  }
  // Transposed into y in blocks of a token tile x 8 rows: the block's 8
  // source lines stay in L1 while each token gets 8 consecutive floats.
  // (A token tile's rows written one float at a time would keep
  // kTileTokens lines of y live, a multiple of 4 KiB apart for most shapes:
  // one L1 set, thrashed.)
  constexpr int64_t kOutRows = 8;
  for (size_t t = 0; t < a.n_tiles; ++t) {
    const size_t i0 = t * kTileTokens;
    const size_t valid = std::min(kTileTokens, a.n - i0);
    for (int64_t rb = r_begin; rb < r_end; rb += kOutRows) {
      const size_t nb = size_t(std::min(kOutRows, r_end - rb));
      const float* src[kOutRows];
      for (size_t q = 0; q < nb; ++q) {
        const size_t pr = size_t(rb - r_begin) + q;
        src[q] = c + (pr / kPanelRows) * panel_acc + t * kPanelRows * kTileTokens +
                 (pr % kPanelRows) * kTileTokens;
      }
      for (size_t j = 0; j < valid; ++j) {
        float* yj = a.y + (i0 + j) * size_t(a.rows) + size_t(rb);
        for (size_t q = 0; q < nb; ++q) yj[q] = src[q][j];
      }
    }
  }
}

void MatmulPanels(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                  kernels::DequantizeFn dequantize, const float* x, int64_t n, float* y,
                  ThreadPool& pool, bool row_blocks) {
  HWY_ASSERT(!row_blocks || (type == DType::F16 && rows % 16 == 0));
  if ((type == DType::F16 || type == DType::BF16) && AmxActive())
    return kernels::matmul_amx(type, w, row_bytes, rows, cols, x, n, y, pool, row_blocks);
  if (type == DType::BF16 && Bf16DotActive())
    return kernels::matmul_bf16_dot(w, row_bytes, rows, cols, x, n, y, pool);
  static thread_local Scratch scratch;
  const size_t K = size_t(cols);
  const size_t n_tiles = (size_t(n) + kTileTokens - 1) / kTileTokens;
  const size_t n_pad = n_tiles * kTileTokens;

  // Transpose the activations into token tiles (zero-padded past n).
  float* xt = scratch.xt.Get(n_tiles * K * kTileTokens);
  pool.run(int64_t(n_tiles), [&](int64_t t, int) {
    float* tile = xt + size_t(t) * K * kTileTokens;
    const size_t i0 = size_t(t) * kTileTokens;
    const size_t valid = std::min(kTileTokens, size_t(n) - i0);
    if (valid < kTileTokens) std::fill(tile, tile + K * kTileTokens, 0.0f);
    TransposeTile(x + i0 * K, K, valid, tile);
  });

  // Tasks of about kTaskAccBytes of accumulators (L2), evened out over the
  // threads (cut_panel_tasks).
  const int64_t threads = pool.size();
  const int64_t n_panels = (rows + int64_t(kPanelRows) - 1) / int64_t(kPanelRows);
  const size_t panel_acc = kPanelRows * n_pad;
  const kernels::PanelTasks cut =
      kernels::cut_panel_tasks(n_panels, panel_acc, kTaskAccBytes, threads);
  const int64_t n_tasks = cut.n_tasks, max_per_task = cut.max_panels;
  // Per-thread panel (kPanelRows x kChunk) and accumulators (max_per_task panels).
  const size_t per_thread = kPanelRows * kChunk + size_t(max_per_task) * panel_acc;
  float* panels = scratch.panels.Get(per_thread * size_t(threads));
  const PanelArgs a{type,       w,  row_bytes, rows,  K, dequantize,
                    row_blocks, xt, n_tiles,   n_pad, y, size_t(n)};
  pool.run(n_tasks, [&](int64_t task, int thread) {
    float* p = panels + per_thread * size_t(thread);
    TaskProduct(a, task * n_panels / n_tasks, (task + 1) * n_panels / n_tasks, p,
                p + kPanelRows * kChunk);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatmulPanels);
HWY_EXPORT(Bf16DotActive);
HWY_EXPORT(AmxActive);

bool amx_gemm_active() {
  return HWY_DYNAMIC_DISPATCH(AmxActive)();
}

bool bf16_dot_gemm_active() {
  return HWY_DYNAMIC_DISPATCH(Bf16DotActive)();
}

void matmul_panels(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                   DequantizeFn dequantize, const float* x, int64_t n, float* y, ThreadPool& pool,
                   bool row_blocks) {
  HWY_DYNAMIC_DISPATCH(MatmulPanels)
  (type, w, row_bytes, rows, cols, dequantize, x, n, y, pool, row_blocks);
}

const char* active_target_name() {
  // The dispatcher picks the best (lowest-bit) target compiled and supported.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(usable & -usable);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
