// Fused attention kernels of the ggml block codecs q8_0 / q4_0 (row-major
// slots of ggml blocks, see block_codec.cc). Keys: per row, the block is
// converted to floats, scaled once and dotted with the G queries (four
// horizontal sums folded into one Reduce4). Values: the scaled block is
// FMA'd into G x (vectors of the block) accumulators held in registers while
// the rows stream by.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kv/codec/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/codec/block_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kv/codec/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace simd = tkv::kv::simd::HWY_NAMESPACE;

// The block's f16 scale at p, broadcast to all lanes as f32.
template <class D>
HWY_INLINE hn::Vec<D> BlockScale(D df, const uint8_t* HWY_RESTRICT p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  const hn::Rebind<uint16_t, D> du16;
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(df, hn::BitCast(dh, hn::Set(du16, bits)));
}

// N int8 values at p as floats.
template <class D>
HWY_INLINE hn::Vec<D> LoadQ8(D df, const int8_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(hn::Rebind<int8_t, D>(), p)));
}

// N bytes of nibbles at p: low nibbles (value j) and high nibbles (value
// j + B/2), as floats minus 8.
template <class D>
HWY_INLINE void LoadQ4(D df, const uint8_t* HWY_RESTRICT p, hn::Vec<D>& lo, hn::Vec<D>& hi) {
  const hn::RebindToSigned<D> di;
  const auto b = hn::PromoteTo(di, hn::LoadU(hn::Rebind<uint8_t, D>(), p));
  const auto eight = hn::Set(df, 8.0f);
  lo = hn::Sub(hn::ConvertTo(df, hn::And(b, hn::Set(di, 15))), eight);
  hi = hn::Sub(hn::ConvertTo(df, hn::ShiftRight<4>(b)), eight);
}

// Block geometry: B values per block, 2 + B (q8_0) or 2 + B/2 (q4_0) bytes.
struct BlockShape {
  int dim, block, block_bytes, row_bytes;
  bool q4;
};

// <q_g, row> for GH (4 or 1) heads, one row.
template <int GH, class D>
HWY_INLINE void DotRow(D df, const BlockShape& s, const float* HWY_RESTRICT q,
                       const uint8_t* HWY_RESTRICT row, hn::Vec<D>* HWY_RESTRICT acc) {
  using V = hn::Vec<D>;
  const int N = int(hn::Lanes(df));
  for (int b = 0; b < s.dim / s.block; ++b) {
    const uint8_t* blk = row + size_t(b) * s.block_bytes;
    const V scale = BlockScale(df, blk);
    const float* qb = q + size_t(b) * s.block;
    if (!s.q4) {
      const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
      for (int v = 0; v < s.block; v += N) {
        const V x = hn::Mul(LoadQ8(df, qs + v), scale);
        for (int g = 0; g < GH; ++g)
          acc[g] = hn::MulAdd(hn::LoadU(df, qb + size_t(g) * s.dim + v), x, acc[g]);
      }
    } else {
      const int half = s.block / 2;
      for (int v = 0; v < half; v += N) {
        V lo, hi;
        LoadQ4(df, blk + 2 + v, lo, hi);
        lo = hn::Mul(lo, scale);
        hi = hn::Mul(hi, scale);
        for (int g = 0; g < GH; ++g) {
          acc[g] = hn::MulAdd(hn::LoadU(df, qb + size_t(g) * s.dim + v), lo, acc[g]);
          acc[g] = hn::MulAdd(hn::LoadU(df, qb + size_t(g) * s.dim + half + v), hi, acc[g]);
        }
      }
    }
  }
}

template <class D>
HWY_NOINLINE void ScoreBlocksTag(D df, const BlockShape& s, const float* HWY_RESTRICT q, int G,
                                 const uint8_t* HWY_RESTRICT rows, int n,
                                 float* HWY_RESTRICT scores, size_t stride) {
  using V = hn::Vec<D>;
  int g = 0;
  if constexpr (hn::MaxLanes(D()) >= 4) {
    for (; g + 4 <= G; g += 4) {
      float* sc = scores + size_t(g) * stride;
      for (int t = 0; t < n; ++t) {
        V acc[4] = {hn::Zero(df), hn::Zero(df), hn::Zero(df), hn::Zero(df)};
        DotRow<4>(df, s, q + size_t(g) * s.dim, rows + size_t(t) * s.row_bytes, acc);
        HWY_ALIGN float r[4];
        simd::Reduce4(df, acc[0], acc[1], acc[2], acc[3], r);
        for (int j = 0; j < 4; ++j) sc[j * stride + t] = r[j];
      }
    }
  }
  for (; g < G; ++g) {
    for (int t = 0; t < n; ++t) {
      V acc[1] = {hn::Zero(df)};
      DotRow<1>(df, s, q + size_t(g) * s.dim, rows + size_t(t) * s.row_bytes, acc);
      scores[size_t(g) * stride + t] = hn::GetLane(hn::SumOfLanes(df, acc[0]));
    }
  }
}

// acc[g][c0 + ...] += sum_t p_g(t) * value_t over VB vectors (q8_0) or VB
// nibble-byte vectors (q4_0: 2 * VB vectors) of block b, starting at vector
// v0 of the block.
template <int GH, int VB, class D>
HWY_NOINLINE void AccumulateBlockPart(D df, const BlockShape& s, const float* HWY_RESTRICT p,
                                      size_t stride, const uint8_t* HWY_RESTRICT rows, int n, int b,
                                      int v0, float* HWY_RESTRICT acc) {
  using V = hn::Vec<D>;
  const int N = int(hn::Lanes(df));
  constexpr int kParts = 2;  // q4_0: low and high nibbles
  const int half = s.block / 2;
  const int c0 = b * s.block + v0 * N;
  V a[GH][VB][kParts];
  for (int g = 0; g < GH; ++g)
    for (int v = 0; v < VB; ++v) {
      a[g][v][0] = hn::LoadU(df, acc + size_t(g) * s.dim + c0 + v * N);
      a[g][v][1] = s.q4 ? hn::LoadU(df, acc + size_t(g) * s.dim + c0 + half + v * N) : a[g][v][0];
    }
  for (int t = 0; t < n; ++t) {
    const uint8_t* blk = rows + size_t(t) * s.row_bytes + size_t(b) * s.block_bytes;
    const V scale = BlockScale(df, blk);
    V w[GH];
    for (int g = 0; g < GH; ++g) w[g] = hn::Mul(hn::Set(df, p[size_t(g) * stride + t]), scale);
    if (!s.q4) {
      const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2) + v0 * N;
      for (int v = 0; v < VB; ++v) {
        const V x = LoadQ8(df, qs + v * N);
        for (int g = 0; g < GH; ++g) a[g][v][0] = hn::MulAdd(w[g], x, a[g][v][0]);
      }
    } else {
      for (int v = 0; v < VB; ++v) {
        V lo, hi;
        LoadQ4(df, blk + 2 + (v0 + v) * N, lo, hi);
        for (int g = 0; g < GH; ++g) {
          a[g][v][0] = hn::MulAdd(w[g], lo, a[g][v][0]);
          a[g][v][1] = hn::MulAdd(w[g], hi, a[g][v][1]);
        }
      }
    }
  }
  for (int g = 0; g < GH; ++g)
    for (int v = 0; v < VB; ++v) {
      hn::StoreU(a[g][v][0], df, acc + size_t(g) * s.dim + c0 + v * N);
      if (s.q4) hn::StoreU(a[g][v][1], df, acc + size_t(g) * s.dim + c0 + half + v * N);
    }
}

template <int GH, class D>
HWY_INLINE void AccumulateBlocksHeads(D df, const BlockShape& s, const float* p, size_t stride,
                                      const uint8_t* rows, int n, float* acc) {
  const int N = int(hn::Lanes(df));
  // Vectors per block (q4_0: of nibble bytes, each giving two).
  const int per_block = (s.q4 ? s.block / 2 : s.block) / N;
  // Register budget: GH x VB x (1 or 2) accumulators.
  constexpr int kMaxVB = hn::MaxLanes(D()) >= 16 ? 4 : 2;
  for (int b = 0; b < s.dim / s.block; ++b) {
    int v = 0;
    if (!s.q4) {
      for (; v + kMaxVB <= per_block; v += kMaxVB)
        AccumulateBlockPart<GH, kMaxVB>(df, s, p, stride, rows, n, b, v, acc);
    }
    for (; v + 2 <= per_block; v += 2)
      AccumulateBlockPart<GH, 2>(df, s, p, stride, rows, n, b, v, acc);
    for (; v < per_block; ++v) AccumulateBlockPart<GH, 1>(df, s, p, stride, rows, n, b, v, acc);
  }
}

template <class D>
HWY_INLINE void AccumulateBlocksTag(D df, const BlockShape& s, const float* p, int G, size_t stride,
                                    const uint8_t* rows, int n, float* acc) {
  int g = 0;
  for (; g + 4 <= G; g += 4)
    AccumulateBlocksHeads<4>(df, s, p + size_t(g) * stride, stride, rows, n,
                             acc + size_t(g) * s.dim);
  for (; g < G; ++g)
    AccumulateBlocksHeads<1>(df, s, p + size_t(g) * stride, stride, rows, n,
                             acc + size_t(g) * s.dim);
}

BlockShape MakeShape(int dim, int block, bool q4) {
  BlockShape s;
  s.dim = dim;
  s.block = block;
  s.q4 = q4;
  s.block_bytes = 2 + (q4 ? block / 2 : block);
  s.row_bytes = (dim / block) * s.block_bytes;
  return s;
}

void ScoreBlocks(const float* q, int G, int dim, int block, bool q4, const uint8_t* rows, int n,
                 float* scores, size_t stride) {
  const BlockShape s = MakeShape(dim, block, q4);
  simd::WithTagDividing(size_t(q4 ? block / 2 : block),
                        [&](auto df) { ScoreBlocksTag(df, s, q, G, rows, n, scores, stride); });
}

void AccumulateBlocks(const float* p, int G, size_t stride, const uint8_t* rows, int n, int dim,
                      int block, bool q4, float* acc) {
  const BlockShape s = MakeShape(dim, block, q4);
  simd::WithTagDividing(size_t(q4 ? block / 2 : block),
                        [&](auto df) { AccumulateBlocksTag(df, s, p, G, stride, rows, n, acc); });
}

}  // namespace tkv::kv::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv::kernels {

HWY_EXPORT(ScoreBlocks);
HWY_EXPORT(AccumulateBlocks);

void score_blocks(const float* q, int G, int dim, int block, bool q4, const uint8_t* rows, int n,
                  float* scores, size_t stride) {
  HWY_DYNAMIC_DISPATCH(ScoreBlocks)(q, G, dim, block, q4, rows, n, scores, stride);
}
void accumulate_blocks(const float* p, int G, size_t stride, const uint8_t* rows, int n, int dim,
                       int block, bool q4, float* acc) {
  HWY_DYNAMIC_DISPATCH(AccumulateBlocks)(p, G, stride, rows, n, dim, block, q4, acc);
}

}  // namespace tkv::kv::kernels
#endif  // HWY_ONCE
