// Prefill GEMM of F16 and BF16 weights with AMX (gemm_amx.h). The blocking
// is gemm.cc's, with tiles of 16 rows x 16 tokens:
// - The activations are split into bf16 pieces and laid out once per call
//   in AMX's pair-interleaved ("VNNI") B layout, per token tile of 16 tokens
//   and step of 32 columns: an operand tile is 16 lines (column pairs) of
//   16 tokens x (x_2k, x_2k+1), rows of 16 tokens x 32 columns transposed
//   as 16 x 16 32-bit pairs (the weights, the A operand, then need no
//   transpose: splitting them is per call, the activations' per call too
//   but amortized over all rows). xb[chunk][tile][step][piece]: a chunk's
//   sweep reads one sequential stream.
// - A task owns a few consecutive panels of kPanelRows (2 tiles of 16)
//   rows and all tokens. For each chunk of kChunkSteps steps it splits each
//   panel's rows into w_hi / w_lo tiles (16 rows x 32 columns, the A
//   operand as it lies in memory) in a scratch panel (L1) and sweeps every
//   pair of token tiles over it with 2 x 2 f32 tiles in the tile registers
//   (8 tiles: 4 sums, 2 weight, 2 activation operands). Meanwhile the
//   weights of the next (panel, chunk) are prefetched into L2.
// - Where the time goes: most of it in the tile loop, part of that in the
//   sums' store and reload at chunk ends (the tile unit drains); splitting
//   the weights is a per-call cost (so it weighs most at small n, which is
//   why callers batch 512 rows a call: matmul_rows_per_call); splitting
//   the tokens is small. The chunk length and the accumulator bytes per
//   task are not sensitive within a factor of two either way.
// - A chunk's sums continue from the previous chunk's, stored in the
//   task's accumulators between chunks (a tile store and load are exact):
//   an output is one chain of tdpbf16ps in column order, the same for every
//   n, tiling, panels per task and thread count.
// - Each thread that runs a task loads the tile configuration before it
//   and releases the tile state after (tile registers are per thread).
// - F16 row blocks (tensor/matmul.h: 16 rows' values of a column side by
//   side) swap the operands: a block's columns 2q and 2q + 1 interleaved are
//   line q of a B tile as it is, so the weights are the B operand (no
//   transpose), the tokens the A operand (their rows as they are, no
//   transpose either) and a sum tile is 16 tokens x 16 rows, stored into y
//   without a transpose. Every product is exact and a tile step adds the
//   same column pairs in the same order either way, so a (row, token)
//   result has the same bits in both layouts (tests/tensor/row_blocks_test).
#include "tensor/kernels/gemm_amx.h"

#include <algorithm>
#include <cstring>

#include "hwy/base.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/gemm_scratch.h"
#include "tensor/kernels/line_span.h"

#if defined(__x86_64__)
#include <immintrin.h>
// GCC 12 takes the AVX-512 intrinsics' internal _mm512_undefined_* operands
// for uninitialized values when they are inlined into functions with a
// target attribute (the file is not compiled with -mavx512f).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

namespace tkv::kernels {

#if defined(__x86_64__)

namespace {

#define TKV_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

constexpr size_t kTile = 16;                   // rows of a tile: weight rows, or column pairs
constexpr size_t kStep = 32;                   // columns per tile step (16 pairs of 64 bytes)
constexpr size_t kTileHalves = kTile * kStep;  // bf16 values per operand tile
constexpr size_t kTileFloats = kTile * kTile;  // f32 sums per result tile
constexpr size_t kPanelRows = 2 * kTile;
// Steps per chunk (256 columns): the scratch panel of w_hi and w_lo tiles
// is 32 KiB, L1-resident while all token tiles sweep it.
constexpr size_t kChunkSteps = 8;
// Accumulator bytes of a task's panels, L2-resident with a chunk's
// activation tiles (gemm.cc's figure).
constexpr size_t kTaskAccBytes = size_t(1) << 19;

// Activation pieces multiplied by w_hi and by w_lo: the terms that are not
// left out (gemm_amx.h). BF16 weights have no w_lo.
constexpr int kHiPieces = 3;
constexpr int kLoPieces = 2;
constexpr size_t kXPieces = kHiPieces;
// Activation halves of a token tile per chunk.
constexpr size_t kChunkHalves = kChunkSteps * kXPieces * kTileHalves;

// Palette 1, 8 tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TKV_AMX_TARGET inline __m512 Bf16ToF32(__m256bh v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)v), 16));
}

// 32 F16 weights (v) split exactly into w_hi = bf16(w) and w_lo = w - w_hi
// (at most 3 significant bits: exact in bf16), 32 bf16 each, in v's order.
TKV_AMX_TARGET inline void SplitF16(__m512i v, __m512i& hi, __m512i& lo) {
  const __m512 w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
  const __m512 w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
  const __m256bh h0 = _mm512_cvtneps_pbh(w0), h1 = _mm512_cvtneps_pbh(w1);
  const __m256bh l0 = _mm512_cvtneps_pbh(_mm512_sub_ps(w0, Bf16ToF32(h0)));
  const __m256bh l1 = _mm512_cvtneps_pbh(_mm512_sub_ps(w1, Bf16ToF32(h1)));
  hi = _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)h0), (__m256i)h1, 1);
  lo = _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)l0), (__m256i)l1, 1);
}

// Writes the 16 x 16 32-bit values of `in` (in[i][j], 16 apart) transposed
// to out (out[j][i]).
TKV_AMX_TARGET inline void Transpose16x16(const uint32_t* in, uint32_t* out) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(in + 16 * i);
  // 32-bit, then 64-bit interleaves within 128-bit lanes, then two 128-bit
  // lane shuffles: the classic 16 x 16 transpose in 64 shuffles.
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_store_si512(out + 16 * i, r[i]);
}

// Token tile `tile` of x (n x K f32) split into kXPieces bf16 pieces and
// laid out as operand tiles xb[chunk][tile][step][piece] (zeros past n and
// K), a chunk's tiles one sequential stream for its sweep: B tiles (column
// pairs x tokens) against rows, A tiles (tokens x columns, as x lies)
// against row blocks.
TKV_AMX_TARGET void SplitTokens(const float* x, size_t n, size_t K, size_t tile, size_t n_tiles,
                                bool as_b, uint16_t* xb) {
  const size_t steps = (K + kStep - 1) / kStep;
  const size_t i0 = tile * kTile;
  const size_t valid = std::min(kTile, n - i0);
  alignas(64) uint32_t rows[kXPieces][kTile * kTile];
  std::memset(rows, 0, sizeof rows);
  for (size_t s = 0; s < steps; ++s) {
    const size_t k0 = s * kStep;
    const size_t kc = std::min(kStep, K - k0);
    const __mmask16 m0 = _cvtu32_mask16(kc >= 16 ? 0xffffu : (1u << kc) - 1);
    const __mmask16 m1 = _cvtu32_mask16(kc <= 16 ? 0u : kc >= 32 ? 0xffffu : (1u << (kc - 16)) - 1);
    for (size_t j = 0; j < valid; ++j) {
      const float* xj = x + (i0 + j) * K + k0;
      __m512 r0 = _mm512_maskz_loadu_ps(m0, xj), r1 = _mm512_maskz_loadu_ps(m1, xj + 16);
      for (size_t p = 0; p < kXPieces; ++p) {
        const __m256bh p0 = _mm512_cvtneps_pbh(r0), p1 = _mm512_cvtneps_pbh(r1);
        _mm512_store_si512(rows[p] + j * kTile,
                           _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)p0), (__m256i)p1, 1));
        // The remainder x - piece is exact in f32.
        r0 = _mm512_sub_ps(r0, Bf16ToF32(p0));
        r1 = _mm512_sub_ps(r1, Bf16ToF32(p1));
      }
    }
    uint16_t* dst = xb + ((s / kChunkSteps) * n_tiles + tile) * kChunkHalves +
                    (s % kChunkSteps) * kXPieces * kTileHalves;
    for (size_t p = 0; p < kXPieces; ++p) {
      if (as_b)
        Transpose16x16(rows[p], reinterpret_cast<uint32_t*>(dst + p * kTileHalves));
      else
        std::memcpy(dst + p * kTileHalves, rows[p], sizeof rows[p]);
    }
  }
}

struct Args {
  DType type;
  const uint8_t* w;
  size_t row_bytes;
  bool row_blocks;  // F16 in row blocks: the weights are the B operand
  int64_t rows;
  size_t K, steps;
  const uint16_t* xb;  // SplitTokens' tiles
  size_t n_tiles, n;
  float* y;
};

// Rows [r0, r0 + nr) of steps [s0, s0 + ns) as A operand tiles
// p[step][row tile][piece] (w_hi, then w_lo for F16), zeros past nr and K.
TKV_AMX_TARGET void SplitWeights(const Args& a, int64_t r0, size_t nr, size_t s0, size_t ns,
                                 uint16_t* p) {
  const size_t wp = a.type == DType::F16 ? 2 : 1;
  for (size_t s = 0; s < ns; ++s) {
    const size_t k0 = (s0 + s) * kStep;
    const size_t kc = std::min(kStep, a.K - k0);
    const __mmask32 m = _cvtu32_mask32(kc >= 32 ? 0xffffffffu : (1u << kc) - 1);
    for (size_t r = 0; r < kPanelRows; ++r) {
      uint16_t* hi = p + ((s * 2 + r / kTile) * wp) * kTileHalves + (r % kTile) * kStep;
      if (r >= nr) {
        for (size_t q = 0; q < wp; ++q)
          _mm512_store_si512(hi + q * kTileHalves, _mm512_setzero_si512());
        continue;
      }
      const uint16_t* src =
          reinterpret_cast<const uint16_t*>(a.w + size_t(r0 + int64_t(r)) * a.row_bytes) + k0;
      const __m512i v = _mm512_maskz_loadu_epi16(m, src);
      if (a.type == DType::BF16) {
        _mm512_store_si512(hi, v);
        continue;
      }
      __m512i wh, wl;
      SplitF16(v, wh, wl);
      _mm512_store_si512(hi, wh);
      _mm512_store_si512(hi + kTileHalves, wl);
    }
  }
}

// Rows [r0, r0 + nr) (whole blocks) of steps [s0, s0 + ns) of F16 row
// blocks as B operand tiles p[step][row tile][piece] (w_hi, w_lo), zeros
// past nr and K: line q of a block's tile is its columns 2q and 2q + 1
// interleaved row by row, 64 bytes read as they lie.
TKV_AMX_TARGET void SplitBlocks(const Args& a, int64_t r0, size_t nr, size_t s0, size_t ns,
                                uint16_t* p) {
  // Lane 2r of a line takes row r of the first column (lane r of the 64
  // bytes), lane 2r + 1 row r of the second (lane 16 + r).
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (size_t s = 0; s < ns; ++s) {
    const size_t k0 = (s0 + s) * kStep;
    const size_t kc = std::min(kStep, a.K - k0);
    for (size_t rt = 0; rt < 2; ++rt) {
      uint16_t* hi = p + (s * 2 + rt) * 2 * kTileHalves;
      uint16_t* lo = hi + kTileHalves;
      if (rt * kTile >= nr) {
        for (size_t q = 0; q < 2 * kTileHalves; q += 32)
          _mm512_store_si512(hi + q, _mm512_setzero_si512());
        continue;
      }
      const uint16_t* block =
          reinterpret_cast<const uint16_t*>(a.w) + ((size_t(r0) / kTile + rt) * a.K + k0) * kTile;
      for (size_t q = 0; q < kTile; ++q) {
        // Columns at or past kc are the next block's (or past the matrix):
        // masked off, which also keeps their loads from faulting.
        const uint32_t first = 2 * q < kc ? 0xffffu : 0u, second = 2 * q + 1 < kc ? 0xffffu : 0u;
        const __m512i v =
            _mm512_maskz_loadu_epi16(_cvtu32_mask32(first | second << 16), block + 2 * q * kTile);
        __m512i hv, lv;
        SplitF16(v, hv, lv);
        _mm512_store_si512(hi + q * kStep, _mm512_permutexvar_epi16(interleave, hv));
        _mm512_store_si512(lo + q * kStep, _mm512_permutexvar_epi16(interleave, lv));
      }
    }
  }
}

// The tile steps of ChunkTiles (functions, not lambdas: clang gives a
// lambda no target attribute of its enclosing function). Tiles 4, 5: the
// weight piece of the two row tiles; 6, 7: the activation piece of the two
// token tiles. kBlocks: the weights are the B operand (row blocks).
template <bool kPair, bool kBlocks>
TKV_AMX_TARGET inline void TileProducts() {
  if constexpr (kBlocks) {
    _tile_dpbf16ps(0, 6, 4);
    _tile_dpbf16ps(2, 6, 5);
    if constexpr (kPair) {
      _tile_dpbf16ps(1, 7, 4);
      _tile_dpbf16ps(3, 7, 5);
    }
  } else {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (kPair) {
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}
template <bool kPair>
TKV_AMX_TARGET inline void LoadTokenPieces(const uint16_t* xs0, const uint16_t* xs1, int q) {
  _tile_loadd(6, xs0 + q * kTileHalves, 64);
  if constexpr (kPair) _tile_loadd(7, xs1 + q * kTileHalves, 64);
}
TKV_AMX_TARGET inline void LoadWeightPieces(const uint16_t* ws, size_t wp, int q) {
  _tile_loadd(4, ws + q * kTileHalves, 64);
  _tile_loadd(5, ws + (wp + q) * kTileHalves, 64);
}

// The products of a chunk of ns steps for the panel's two row tiles and
// token tiles t0 (and t0 + 1 when kPair): sums in tiles 0, 2 (t0) and 1, 3
// (t0 + 1), continued from acc unless first. wp: weight pieces per step.
// A sum tile is rows x tokens, or tokens x rows where kBlocks.
template <bool kPair, int kLo, bool kBlocks>
TKV_AMX_TARGET inline void ChunkTiles(const uint16_t* w, const uint16_t* x0, const uint16_t* x1,
                                      size_t ns, float* c0, float* c1, bool first) {
  constexpr size_t kLine = 64;
  constexpr size_t wp = kLo > 0 ? 2 : 1;
  float* c2 = c0 + kTileFloats;
  float* c3 = c1 + kTileFloats;
  if (first) {
    _tile_zero(0);
    _tile_zero(2);
    if constexpr (kPair) {
      _tile_zero(1);
      _tile_zero(3);
    }
  } else {
    _tile_loadd(0, c0, kLine);
    _tile_loadd(2, c2, kLine);
    if constexpr (kPair) {
      _tile_loadd(1, c1, kLine);
      _tile_loadd(3, c3, kLine);
    }
  }
  for (size_t s = 0; s < ns; ++s) {
    const uint16_t* ws = w + s * 2 * wp * kTileHalves;
    const uint16_t* xs0 = x0 + s * kXPieces * kTileHalves;
    const uint16_t* xs1 = x1 + s * kXPieces * kTileHalves;
    // The terms in an order that reloads one operand pair per term (12
    // tile loads per 20 products for F16): w_hi x_1, w_lo x_1, w_lo x_2,
    // w_hi x_2, w_hi x_3; BF16: w x_1, w x_2, w x_3.
    LoadTokenPieces<kPair>(xs0, xs1, 0);
    LoadWeightPieces(ws, wp, 0);
    TileProducts<kPair, kBlocks>();
    if constexpr (kLo > 0) {
      static_assert(kLo == 2 && kHiPieces == 3, "the term order below");
      LoadWeightPieces(ws, wp, 1);
      TileProducts<kPair, kBlocks>();
      LoadTokenPieces<kPair>(xs0, xs1, 1);
      TileProducts<kPair, kBlocks>();
      LoadWeightPieces(ws, wp, 0);
      TileProducts<kPair, kBlocks>();
    } else {
      LoadTokenPieces<kPair>(xs0, xs1, 1);
      TileProducts<kPair, kBlocks>();
    }
    LoadTokenPieces<kPair>(xs0, xs1, 2);
    TileProducts<kPair, kBlocks>();
  }
  _tile_stored(0, c0, kLine);
  _tile_stored(2, c2, kLine);
  if constexpr (kPair) {
    _tile_stored(1, c1, kLine);
    _tile_stored(3, c3, kLine);
  }
}

// TaskProduct's parts below are forced inline: they are its body, split for
// reading, and compile to the code it had as one function.
//
// The prefetch into L2 of the weights SplitWeights (SplitBlocks) reads
// next, a share per pair of token tiles. A piece is a row's columns of the
// chunk (a block's: its 16 rows'); each piece's lines count from the line
// its first byte is in (line_span.h: a mapped GGUF row may start mid-line).
struct NextWeights {
  const uint8_t* base;
  size_t piece_bytes, stride, row_lines, total, pairs;
  size_t done = 0;

  // Prefetches the lines of pairs [0, pair] of token tiles not yet fetched.
  __attribute__((always_inline)) inline void upto(size_t pair) {
    for (const size_t want = total * (pair + 1) / pairs; done < want; ++done) {
      const LineSpan span = line_span(base + (done / row_lines) * stride, piece_bytes);
      const size_t line = done % row_lines;
      if (line < span.lines)
        _mm_prefetch(reinterpret_cast<const char*>(span.first + line * kLineBytes), _MM_HINT_T1);
    }
  }
};

// What follows panel `panel` of chunk s0 in TaskProduct: the next panel's
// rows of this chunk, or the first panel's of the next chunk (none after the
// last chunk). Row pieces of 512 bytes are too short for the hardware's
// stream detection, hence the software prefetch.
template <bool kBlocks>
__attribute__((always_inline)) inline NextWeights PlanNextWeights(const Args& a, int64_t panel,
                                                                  int64_t p0, int64_t p1,
                                                                  size_t s0) {
  const int64_t r0 = panel * int64_t(kPanelRows);
  const int64_t next_r0 = panel + 1 < p1 ? r0 + int64_t(kPanelRows) : p0 * int64_t(kPanelRows);
  const size_t next_s0 = panel + 1 < p1 ? s0 : s0 + kChunkSteps;
  const size_t next_rows =
      next_s0 < a.steps ? size_t(std::min<int64_t>(int64_t(kPanelRows), a.rows - next_r0)) : 0;
  const size_t chunk_cols =
      next_s0 < a.steps ? std::min(kChunkSteps * kStep, a.K - next_s0 * kStep) : 0;
  NextWeights nw;
  nw.piece_bytes = chunk_cols * 2 * (kBlocks ? kTile : 1);
  nw.stride = kBlocks ? a.K * 2 * kTile : a.row_bytes;
  const size_t pieces = kBlocks ? (next_rows + kTile - 1) / kTile : next_rows;
  nw.base = kBlocks ? a.w + (size_t(next_r0) / kTile * a.K + next_s0 * kStep) * 2 * kTile
                    : a.w + size_t(next_r0) * a.row_bytes + next_s0 * kStep * 2;
  nw.row_lines = max_lines(nw.piece_bytes);
  nw.total = pieces * nw.row_lines;
  nw.pairs = (a.n_tiles + 1) / 2;
  return nw;
}

// Chunk s0 (ns steps) of panel `panel` for all token tiles: its weights
// into the scratch panel p, then the products into the panel's
// accumulators pc, while the next weights are prefetched.
template <int kLo, bool kBlocks>
TKV_AMX_TARGET __attribute__((always_inline)) inline void PanelChunk(const Args& a, int64_t panel,
                                                                     int64_t p0, int64_t p1,
                                                                     size_t s0, size_t ns,
                                                                     uint16_t* p, float* pc) {
  const int64_t r0 = panel * int64_t(kPanelRows);
  const size_t nr = size_t(std::min<int64_t>(int64_t(kPanelRows), a.rows - r0));
  if constexpr (kBlocks)
    SplitBlocks(a, r0, nr, s0, ns, p);
  else
    SplitWeights(a, r0, nr, s0, ns, p);
  NextWeights next = PlanNextWeights<kBlocks>(a, panel, p0, p1, s0);
  const uint16_t* xs = a.xb + (s0 / kChunkSteps) * a.n_tiles * kChunkHalves;
  size_t t = 0;
  for (; t + 2 <= a.n_tiles; t += 2, next.upto(t / 2 - 1))
    ChunkTiles<true, kLo, kBlocks>(p, xs + t * kChunkHalves, xs + (t + 1) * kChunkHalves, ns,
                                   pc + t * 2 * kTileFloats, pc + (t + 1) * 2 * kTileFloats,
                                   s0 == 0);
  if (t < a.n_tiles) {
    next.upto(next.pairs - 1);
    ChunkTiles<false, kLo, kBlocks>(p, xs + t * kChunkHalves, nullptr, ns, pc + t * 2 * kTileFloats,
                                    nullptr, s0 == 0);
  }
}

// The sums of panels [p0, p1) (accumulators c, as in TaskProduct) into y
// tile by tile, transposed where a tile is rows x tokens (Transpose16x16 of
// the 32-bit sums): each of a tile's tokens then gets its up to 16 outputs
// in one store.
template <bool kBlocks>
TKV_AMX_TARGET __attribute__((always_inline)) inline void StorePanels(const Args& a, int64_t p0,
                                                                      int64_t p1, const float* c) {
  const size_t panel_acc = a.n_tiles * 2 * kTileFloats;
  alignas(64) float transposed[kTileFloats];
  for (int64_t panel = p0; panel < p1; ++panel) {
    const float* pc = c + size_t(panel - p0) * panel_acc;
    for (size_t rt = 0; rt < 2; ++rt) {
      const int64_t r0 = panel * int64_t(kPanelRows) + int64_t(rt * kTile);
      if (r0 >= a.rows) break;
      const size_t nr = size_t(std::min<int64_t>(int64_t(kTile), a.rows - r0));
      const __mmask16 m = _cvtu32_mask16(nr >= 16 ? 0xffffu : (1u << nr) - 1);
      for (size_t t = 0; t < a.n_tiles; ++t) {
        const float* tokens = pc + (t * 2 + rt) * kTileFloats;
        if constexpr (!kBlocks) {
          Transpose16x16(reinterpret_cast<const uint32_t*>(tokens),
                         reinterpret_cast<uint32_t*>(transposed));
          tokens = transposed;
        }
        const size_t valid = std::min(kTile, a.n - t * kTile);
        for (size_t j = 0; j < valid; ++j)
          _mm512_mask_storeu_ps(a.y + (t * kTile + j) * size_t(a.rows) + size_t(r0), m,
                                _mm512_load_ps(tokens + j * kTile));
      }
    }
  }
}

// Rows of panels [p0, p1) for all tokens (see the top of the file). p: the
// thread's scratch panel, c: its accumulators, per panel c[tile][row
// tile][16 rows][16 tokens] (row blocks: [16 tokens][16 rows]).
template <int kLo, bool kBlocks>
TKV_AMX_TARGET void TaskProduct(const Args& a, int64_t p0, int64_t p1, uint16_t* p, float* c) {
  const size_t panel_acc = a.n_tiles * 2 * kTileFloats;
  for (size_t s0 = 0; s0 < a.steps; s0 += kChunkSteps) {
    const size_t ns = std::min(kChunkSteps, a.steps - s0);
    for (int64_t panel = p0; panel < p1; ++panel)
      PanelChunk<kLo, kBlocks>(a, panel, p0, p1, s0, ns, p, c + size_t(panel - p0) * panel_acc);
  }
  StorePanels<kBlocks>(a, p0, p1, c);
}

// A task on the calling thread with its own tile configuration.
TKV_AMX_TARGET __attribute__((noinline)) void RunTask(const Args& a, int64_t p0, int64_t p1,
                                                      uint16_t* p, float* c) {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = kTile;
  }
  _tile_loadconfig(&cfg);
  if (a.row_blocks)
    TaskProduct<kLoPieces, true>(a, p0, p1, p, c);
  else if (a.type == DType::F16)
    TaskProduct<kLoPieces, false>(a, p0, p1, p, c);
  else
    TaskProduct<0, false>(a, p0, p1, p, c);
  _tile_release();
}

}  // namespace

void matmul_amx(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                const float* x, int64_t n, float* y, ThreadPool& pool, bool row_blocks) {
  HWY_ASSERT(cpu_has_amx_bf16());
  HWY_ASSERT(type == DType::F16 || type == DType::BF16);
  HWY_ASSERT(!row_blocks || (type == DType::F16 && rows % int64_t(kTile) == 0));
  static thread_local ScratchBuffer<uint16_t> xb_buf, panel_buf;
  static thread_local ScratchBuffer<float> acc_buf;
  const size_t K = size_t(cols);
  const size_t steps = (K + kStep - 1) / kStep;
  const size_t n_tiles = (size_t(n) + kTile - 1) / kTile;
  const size_t n_chunks = (steps + kChunkSteps - 1) / kChunkSteps;

  uint16_t* xb = xb_buf.Get(n_chunks * n_tiles * kChunkHalves);
  pool.run(int64_t(n_tiles), [&](int64_t t, int) {
    SplitTokens(x, size_t(n), K, size_t(t), n_tiles, !row_blocks, xb);
  });

  // Tasks as gemm.cc cuts them (cut_panel_tasks).
  const int64_t threads = pool.size();
  const int64_t n_panels = (rows + int64_t(kPanelRows) - 1) / int64_t(kPanelRows);
  const size_t panel_acc = n_tiles * 2 * kTileFloats;
  const PanelTasks cut = cut_panel_tasks(n_panels, panel_acc, kTaskAccBytes, threads);
  const int64_t n_tasks = cut.n_tasks, max_per_task = cut.max_panels;
  const size_t panel_halves = kChunkSteps * 2 * 2 * kTileHalves;
  const size_t acc_floats = size_t(max_per_task) * panel_acc;
  uint16_t* panels = panel_buf.Get(panel_halves * size_t(threads));
  float* accs = acc_buf.Get(acc_floats * size_t(threads));
  const Args a{type, w, row_bytes, row_blocks, rows, K, steps, xb, n_tiles, size_t(n), y};
  pool.run(n_tasks, [&](int64_t task, int thread) {
    RunTask(a, task * n_panels / n_tasks, (task + 1) * n_panels / n_tasks,
            panels + panel_halves * size_t(thread), accs + acc_floats * size_t(thread));
  });
}

#else  // !__x86_64__

void matmul_amx(DType, const uint8_t*, size_t, int64_t, int64_t, const float*, int64_t, float*,
                ThreadPool&, bool) {
  HWY_ABORT("matmul_amx: not an x86-64 build");
}

#endif  // __x86_64__

}  // namespace tkv::kernels
