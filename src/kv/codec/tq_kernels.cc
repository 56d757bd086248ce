// Fused attention kernels of the TurboQuant codecs, reading the tile layout
// of tq_layout.h directly (no decoded copy of anything).
//
// Keys (score): tokens in lanes. For each coordinate i, one shift of the
// loaded 32-bit word puts 16 tokens' codes in the low bits, one permute
// turns them into centroid values (the codebook sits in a register), and one
// FMA per query head adds q'_g[i] * c to the 16 tokens' scores. The G heads
// share the shift and the permute. Per token and head: head_dim / 16 FMAs;
// no horizontal sums; finally multiplied by the 16 norms.
//
// Values (accumulate): coordinates in lanes, in the rotated domain. For each
// token, its 32-bit words are broadcast and shifted lane by lane (variable
// shift) so each lane holds its coordinate's code; a permute gives the
// centroids and G FMAs add w_g = p_g * norm_t times them into G x MB vector
// accumulators that stay in registers while the tokens stream by.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/f16.h"
#include "kv/codec/kernels.h"
#include "kv/codec/tq_layout.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/codec/tq_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kv/codec/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace simd = tkv::kv::simd::HWY_NAMESPACE;

// Word j of a plane for the N tokens starting at lane0 (full or partial word).
template <class DU>
HWY_INLINE hn::Vec<DU> LoadPlaneWord(DU du, const uint8_t* HWY_RESTRICT tile, const TqPlane& pl,
                                     int j, size_t lane0) {
  if (j < pl.full_words)
    return hn::LoadU(du, reinterpret_cast<const uint32_t*>(tile + pl.offset + 64 * j) + lane0);
  const uint8_t* tail = tile + pl.offset + 64 * pl.full_words;
  if (pl.tail_bytes == 1)
    return hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint8_t, DU>(), tail + lane0));
  if (pl.tail_bytes == 2)
    return hn::PromoteTo(
        du, hn::LoadU(hn::Rebind<uint16_t, DU>(), reinterpret_cast<const uint16_t*>(tail) + lane0));
  return hn::LoadU(du, reinterpret_cast<const uint32_t*>(tail) + lane0);
}

// (mask & yes) | (~mask & no), bit by bit (Highway's IfVecThenElse is a
// lane select on some targets). One vpternlogd on AVX-512.
template <class V>
HWY_INLINE V BitSelect(V mask, V yes, V no) {
  return hn::Or(hn::And(mask, yes), hn::AndNot(mask, no));
}

// Codes of coordinate i for N tokens (runtime position: the tail path).
template <class DU>
HWY_INLINE hn::Vec<DU> CodesAt(DU du, const TqGeometry& geo, const uint8_t* HWY_RESTRICT tile,
                               size_t lane0, int i) {
  const TqPlane& p0 = geo.plane[0];
  const int bit0 = i * p0.width;
  const auto c = hn::ShiftRightSame(LoadPlaneWord(du, tile, p0, bit0 / 32, lane0), bit0 % 32);
  if (geo.n_planes == 1) return c;
  const auto h = hn::ShiftRightSame(LoadPlaneWord(du, tile, geo.plane[1], i / 32, lane0), i % 32);
  return hn::Or(hn::And(c, hn::Set(du, 3u)), hn::ShiftLeft<2>(hn::And(h, hn::Set(du, 1u))));
}

// ---------------------------------------------------------------- keys ----

// Calls fn(tag, i, cv) for every coordinate i in order, cv = the centroid
// values of coordinate i for the N tokens at lane0 of a tile. On the
// unrolled full-word path tag is std::integral_constant<int, i % 8> (so a
// caller can pick a register by it at compile time); on the tail path
// (codes in partial words) it is std::integral_constant<int, -1>.
template <int kBits, class DU, class CB, class Fn>
HWY_INLINE void ForEachKeyCoordinate(DU du, const TqGeometry& geo, const CB& cb,
                                     const uint8_t* HWY_RESTRICT tile, size_t lane0, const Fn& fn) {
  using VU = hn::Vec<DU>;
  const TqPlane& p0 = geo.plane[0];
  const TqPlane& p1 = geo.plane[1];
  if constexpr (kBits != 3) {
    constexpr int kPer = 32 / kBits;
    for (int j = 0; j < p0.full_words; ++j) {
      const VU w =
          hn::LoadU(du, reinterpret_cast<const uint32_t*>(tile + p0.offset + 64 * j) + lane0);
      simd::Unroll<kPer>([&](auto c) HWY_ATTR {
        constexpr int kC = decltype(c)::value;
        fn(std::integral_constant<int, kC % 8>(), j * kPer + kC, cb(hn::ShiftRight<kBits * kC>(w)));
      });
    }
  } else {
    const VU bit2 = hn::Set(du, 4u);
    for (int j = 0; j < p1.full_words; ++j) {
      const uint32_t* hi = reinterpret_cast<const uint32_t*>(tile + p1.offset + 64 * j);
      const uint32_t* lo = reinterpret_cast<const uint32_t*>(tile + p0.offset + 128 * j);
      const VU hw = hn::LoadU(du, hi + lane0);
      const VU lw0 = hn::LoadU(du, lo + lane0);
      const VU lw1 = hn::LoadU(du, lo + 16 + lane0);
      simd::Unroll<32>([&](auto c) HWY_ATTR {
        constexpr int kC = decltype(c)::value;
        const VU low = hn::ShiftRight<2 * (kC % 16)>(kC < 16 ? lw0 : lw1);
        VU high;
        if constexpr (kC >= 2) {
          high = hn::ShiftRight<kC - 2>(hw);
        } else {
          high = hn::ShiftLeft<2 - kC>(hw);
        }
        fn(std::integral_constant<int, kC % 8>(), 32 * j + kC, cb(BitSelect(bit2, high, low)));
      });
    }
  }
  for (int i = geo.full_coords(); i < geo.head_dim; ++i)
    fn(std::integral_constant<int, -1>(), i, cb(CodesAt(du, geo, tile, lane0, i)));
}

template <int kBits, int GH, class D>
HWY_NOINLINE void ScoreHeads(D df, const TqGeometry& geo, const float* HWY_RESTRICT table16,
                             const float* HWY_RESTRICT q, const uint8_t* HWY_RESTRICT page,
                             int page_tokens, int begin, int end, float* HWY_RESTRICT scores,
                             size_t stride) {
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<hwy::float16_t, D> dh;
  const int N = int(hn::Lanes(df));
  const int dim = geo.head_dim;
  const simd::Codebook16<D, (1 << kBits)> cb(df, table16);
  const auto* norms = reinterpret_cast<const hwy::float16_t*>(page + geo.norms_offset(page_tokens));
  // An FMA has a latency of 4 cycles and two issue ports: 8 independent
  // accumulator chains keep both busy. With fewer heads, consecutive
  // coordinates alternate between kChains copies, summed at the end.
  constexpr int kChains = GH >= 8 ? 1 : 8 / GH;

  for (int tile_first = begin - begin % kTqTileTokens; tile_first < end;
       tile_first += kTqTileTokens) {
    const uint8_t* tile = page + size_t(tile_first / kTqTileTokens) * geo.tile_bytes;
    for (int lane0 = 0; lane0 < kTqTileTokens; lane0 += N) {
      const int s0 = tile_first + lane0;
      if (s0 + N <= begin || s0 >= end) continue;
      V acc[kChains][GH];
      for (int k = 0; k < kChains; ++k)
        for (int g = 0; g < GH; ++g) acc[k][g] = hn::Zero(df);
      // Adds q'_g[i] * c for every head into chain `chain`.
      const auto add = [&](int chain, const float* HWY_RESTRICT qi, V cv) HWY_ATTR {
        for (int g = 0; g < GH; ++g)
          acc[chain][g] = hn::MulAdd(hn::Set(df, qi[size_t(g) * dim]), cv, acc[chain][g]);
      };
      ForEachKeyCoordinate<kBits>(du, geo, cb, tile, size_t(lane0),
                                  [&](auto tag, int i, V cv) HWY_ATTR {
                                    constexpr int kTag = decltype(tag)::value;
                                    if constexpr (kTag >= 0) {
                                      add(kTag % kChains, q + i, cv);
                                    } else {
                                      add(i % kChains, q + i, cv);
                                    }
                                  });
      for (int k = 1; k < kChains; ++k)
        for (int g = 0; g < GH; ++g) acc[0][g] = hn::Add(acc[0][g], acc[k][g]);

      const V nv = hn::PromoteTo(df, hn::LoadU(dh, norms + s0));
      if (s0 >= begin && s0 + N <= end) {
        for (int g = 0; g < GH; ++g)
          hn::StoreU(hn::Mul(acc[0][g], nv), df, scores + size_t(g) * stride + (s0 - begin));
      } else {
        HWY_ALIGN float buf[kTqTileTokens];
        const int lo = std::max(begin, s0), hi = std::min(end, s0 + N);
        for (int g = 0; g < GH; ++g) {
          hn::Store(hn::Mul(acc[0][g], nv), df, buf);
          for (int s = lo; s < hi; ++s) scores[size_t(g) * stride + (s - begin)] = buf[s - s0];
        }
      }
    }
  }
}

template <int kBits, class D>
HWY_INLINE void ScoreAll(D df, const TqGeometry& geo, const float* table16, const float* q, int G,
                         const uint8_t* page, int page_tokens, int begin, int end, float* scores,
                         size_t stride) {
  const size_t dim = size_t(geo.head_dim);
  int g = 0;
  for (; g + 8 <= G; g += 8)
    ScoreHeads<kBits, 8>(df, geo, table16, q + g * dim, page, page_tokens, begin, end,
                         scores + g * stride, stride);
  if (g + 4 <= G) {
    ScoreHeads<kBits, 4>(df, geo, table16, q + g * dim, page, page_tokens, begin, end,
                         scores + g * stride, stride);
    g += 4;
  }
  if (g + 2 <= G) {
    ScoreHeads<kBits, 2>(df, geo, table16, q + g * dim, page, page_tokens, begin, end,
                         scores + g * stride, stride);
    g += 2;
  }
  if (g < G)
    ScoreHeads<kBits, 1>(df, geo, table16, q + g * dim, page, page_tokens, begin, end,
                         scores + g * stride, stride);
}

// Prefill (many query rows per call) on 16-register targets: each 16-token
// tile is decoded to centroid values once (tokens in lanes, ct[i * 16 +
// lane]) and every block of R rows scores it, R x 16 / N accumulators fed by
// one load of the tile's values and one broadcast of q'_r[i] per
// coordinate (simd::ScoreTokenLanes), instead of each group of 8 heads
// unpacking the tile again. The sums run in coordinate order, as
// ScoreHeads<.., 8> runs them.
inline constexpr bool kBlockedPrefill = HWY_TARGET == HWY_AVX2;
inline constexpr int kMaxBlockedDim = 256;

template <int kBits, class D>
HWY_INLINE void ScoreBlocked(D df, const TqGeometry& geo, const float* table16, const float* q,
                             int G, const uint8_t* page, int page_tokens, int begin, int end,
                             float* scores, size_t stride) {
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<hwy::float16_t, D> dh;
  const size_t N = hn::Lanes(df);
  const int dim = geo.head_dim;
  const simd::Codebook16<D, (1 << kBits)> cb(df, table16);
  const auto* norms = reinterpret_cast<const hwy::float16_t*>(page + geo.norms_offset(page_tokens));
  // R x 16 / N accumulators, 16 / N tile vectors and the broadcast query.
  constexpr int kG = kTqTileTokens / hn::MaxLanes(D());
  constexpr int kR = (simd::kVectorRegisters - kG - 1) / kG;
  HWY_ALIGN float ct[kMaxBlockedDim * kTqTileTokens];
  HWY_ALIGN float nf[kTqTileTokens];
  for (int tile_first = begin - begin % kTqTileTokens; tile_first < end;
       tile_first += kTqTileTokens) {
    const uint8_t* tile = page + size_t(tile_first / kTqTileTokens) * geo.tile_bytes;
    for (size_t lane0 = 0; lane0 < size_t(kTqTileTokens); lane0 += N) {
      ForEachKeyCoordinate<kBits>(du, geo, cb, tile, lane0, [&](auto, int i, V cv) HWY_ATTR {
        hn::Store(cv, df, ct + size_t(i) * kTqTileTokens + lane0);
      });
      hn::Store(hn::PromoteTo(df, hn::LoadU(dh, norms + tile_first + lane0)), df, nf + lane0);
    }
    // Tile lanes [lo, hi) are in [begin, end); s: the score of lane 0.
    const int lo = std::max(begin, tile_first) - tile_first;
    const int hi = std::min(end, tile_first + kTqTileTokens) - tile_first;
    float* s = scores + (tile_first - begin);
    int g = 0;
    for (; g + kR <= G; g += kR)
      simd::ScoreTokenLanes<kR>(df, q + size_t(g) * dim, dim, ct, nf, s + size_t(g) * stride,
                                stride, lo, hi);
    for (; g + 4 <= G; g += 4)
      simd::ScoreTokenLanes<4>(df, q + size_t(g) * dim, dim, ct, nf, s + size_t(g) * stride, stride,
                               lo, hi);
    for (; g < G; ++g)
      simd::ScoreTokenLanes<1>(df, q + size_t(g) * dim, dim, ct, nf, s + size_t(g) * stride, stride,
                               lo, hi);
  }
}

// Tokens in lanes: any full vector width divides the 16-token tile.
// fn(std::integral_constant<int, bits>) for bits 1..4: the code width is a
// template parameter of every kernel so unpacking compiles to fixed shifts.
template <class Fn>
HWY_INLINE void WithBits(int bits, const Fn& fn) {
  switch (bits) {
    case 1:
      return fn(std::integral_constant<int, 1>());
    case 2:
      return fn(std::integral_constant<int, 2>());
    case 3:
      return fn(std::integral_constant<int, 3>());
    default:
      return fn(std::integral_constant<int, 4>());
  }
}

template <class Fn>
HWY_INLINE void WithTokenTag(const Fn& fn) {
  const hn::ScalableTag<float> dfull;
  if (hn::Lanes(dfull) <= kTqTileTokens && kTqTileTokens % hn::Lanes(dfull) == 0) return fn(dfull);
  return fn(hn::CappedTag<float, kTqTileTokens>());
}

void TqScore(const TqGeometry& geo, const float* table16, const float* q, int G,
             const uint8_t* page, int page_tokens, int begin, int end, float* scores,
             size_t stride) {
  if (end <= begin) return;
  WithTokenTag([&](auto df) {
    WithBits(geo.bits, [&](auto bits) {
      constexpr int kBits = decltype(bits)::value;
      if constexpr (kBlockedPrefill) {
        if (G >= 8 && geo.head_dim <= kMaxBlockedDim)
          return ScoreBlocked<kBits>(df, geo, table16, q, G, page, page_tokens, begin, end, scores,
                                     stride);
      }
      ScoreAll<kBits>(df, geo, table16, q, G, page, page_tokens, begin, end, scores, stride);
    });
  });
}

// -------------------------------------------------------------- values ----

// w[g][k] = p_g(token) * norm(token) for the tile's tokens in [lo, hi).
template <int GH, class D>
HWY_INLINE void TileWeights(D df, const float* HWY_RESTRICT p, size_t stride, int begin,
                            const hwy::float16_t* HWY_RESTRICT norms, int tile_first, int lo,
                            int hi, float* HWY_RESTRICT w) {
  const hn::Rebind<hwy::float16_t, D> dh;
  const int N = int(hn::Lanes(df));
  HWY_ALIGN float nf[kTqTileTokens];
  for (int k = 0; k < kTqTileTokens; k += N)
    hn::Store(hn::PromoteTo(df, hn::LoadU(dh, norms + tile_first + k)), df, nf + k);
  if (lo == tile_first && hi == tile_first + kTqTileTokens) {
    for (int g = 0; g < GH; ++g)
      for (int k = 0; k < kTqTileTokens; k += N)
        hn::Store(hn::Mul(hn::LoadU(df, p + size_t(g) * stride + (tile_first + k - begin)),
                          hn::Load(df, nf + k)),
                  df, w + g * kTqTileTokens + k);
  } else {
    for (int g = 0; g < GH; ++g)
      for (int s = lo; s < hi; ++s)
        w[g * kTqTileTokens + (s - tile_first)] =
            p[size_t(g) * stride + (s - begin)] * nf[s - tile_first];
  }
}

// The codes of MB blocks of N coordinates from i0 (every code in full
// words) for one token: per block, the byte offset of its word in the tile
// and per-lane shifts, computed once per call; operator() then broadcasts
// the token's word and shifts each lane to its coordinate's code.
template <int kBits, int MB, class D>
class ValueCodes {
  using DU = hn::RebindToUnsigned<D>;
  using VU = hn::Vec<DU>;
  // A block of 16 coordinates of 4-bit codes spans two words (lanes 0..7 and
  // 8..15); every other block lies in one word per plane.
  static constexpr bool kTwoWords = kBits == 4 && hn::MaxLanes(D()) == 16;

 public:
  ValueCodes(D df, const TqGeometry& geo, int i0) {
    const DU du;
    const int N = int(hn::Lanes(df));
    const TqPlane& p0 = geo.plane[0];
    const TqPlane& p1 = geo.plane[1];
    HWY_ALIGN uint32_t tmp[kTqTileTokens];
    for (int m = 0; m < MB; ++m) {
      const int i = i0 + m * N;
      off0_[m] = p0.offset + 64 * (i * p0.width / 32);
      for (int l = 0; l < N; ++l) tmp[l] = uint32_t(((i + l) * p0.width) % 32);
      sh0_[m] = hn::Load(du, tmp);
      off1_[m] = 0;
      sh1_[m] = hn::Zero(du);
      if constexpr (kBits == 3) {
        off1_[m] = p1.offset + 64 * (i / 32);
        for (int l = 0; l < N; ++l) tmp[l] = uint32_t((i + l) % 32);
        sh1_[m] = hn::Load(du, tmp);
      }
    }
  }

  // Codes of block m of the token whose words start at tk (tile + 4 * lane).
  HWY_INLINE VU operator()(const uint8_t* HWY_RESTRICT tk, int m) const {
    const DU du;
    uint32_t word0;
    std::memcpy(&word0, tk + off0_[m], 4);
    VU codes;
    if constexpr (kTwoWords) {
      uint32_t word1;
      std::memcpy(&word1, tk + off0_[m] + 64, 4);
      codes = hn::IfThenElse(hn::Not(hn::FirstN(du, 8)), hn::Set(du, word1), hn::Set(du, word0));
    } else {
      codes = hn::Set(du, word0);
    }
    codes = hn::operator>>(codes, sh0_[m]);
    if constexpr (kBits == 3) {
      uint32_t word1;
      std::memcpy(&word1, tk + off1_[m], 4);
      const VU high = hn::ShiftLeft<2>(hn::operator>>(hn::Set(du, word1), sh1_[m]));
      codes = BitSelect(hn::Set(du, 4u), high, codes);
    }
    return codes;
  }

 private:
  int off0_[MB], off1_[MB];
  VU sh0_[MB], sh1_[MB];
};

// GH heads x MB blocks of N coordinates starting at coordinate i0, every code
// in full words (fast path).
template <int kBits, int GH, int MB, class D>
HWY_NOINLINE void AccumulateChunk(D df, const TqGeometry& geo, const float* HWY_RESTRICT table16,
                                  const float* HWY_RESTRICT p, size_t stride,
                                  const uint8_t* HWY_RESTRICT page, int page_tokens, int begin,
                                  int end, int i0, float* HWY_RESTRICT acc) {
  using V = hn::Vec<D>;
  const int N = int(hn::Lanes(df));
  const int dim = geo.head_dim;
  const simd::Codebook16<D, (1 << kBits)> cb(df, table16);
  const auto* norms = reinterpret_cast<const hwy::float16_t*>(page + geo.norms_offset(page_tokens));
  const ValueCodes<kBits, MB, D> codes(df, geo, i0);

  // Every loop over the accumulators is unrolled in full (pragmas, not
  // lambdas): then each a[g][m] has a constant index and lives in a
  // register; otherwise GCC keeps the array on the stack and stores every
  // accumulator on every token, which bounds the kernel on AVX2.
  V a[GH][MB];
#pragma GCC unroll 16
  for (int g = 0; g < GH; ++g)
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) a[g][m] = hn::LoadU(df, acc + size_t(g) * dim + i0 + m * N);

  HWY_ALIGN float w[GH * kTqTileTokens];
  for (int tile_first = begin - begin % kTqTileTokens; tile_first < end;
       tile_first += kTqTileTokens) {
    const uint8_t* tile = page + size_t(tile_first / kTqTileTokens) * geo.tile_bytes;
    const int lo = std::max(begin, tile_first);
    const int hi = std::min(end, tile_first + kTqTileTokens);
    TileWeights<GH>(df, p, stride, begin, norms, tile_first, lo, hi, w);
    for (int s = lo; s < hi; ++s) {
      const int k = s - tile_first;
      const uint8_t* tk = tile + 4 * k;
#pragma GCC unroll 16
      for (int m = 0; m < MB; ++m) {
        const V c = cb(codes(tk, m));
#pragma GCC unroll 16
        for (int g = 0; g < GH; ++g)
          a[g][m] = hn::MulAdd(hn::Set(df, w[g * kTqTileTokens + k]), c, a[g][m]);
      }
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < GH; ++g)
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) hn::StoreU(a[g][m], df, acc + size_t(g) * dim + i0 + m * N);
}

// One block of N coordinates with codes in partial words (rare head dims,
// e.g. 8 or 40): codes gathered lane by lane with scalar reads.
template <int GH, class D>
HWY_NOINLINE void AccumulateTailBlock(D df, const TqGeometry& geo, const float* table16,
                                      const float* HWY_RESTRICT p, size_t stride,
                                      const uint8_t* HWY_RESTRICT page, int page_tokens, int begin,
                                      int end, int i0, float* HWY_RESTRICT acc) {
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const int N = int(hn::Lanes(df));
  const int dim = geo.head_dim;
  const simd::Codebook16<D> cb(df, table16);
  const auto* norms = reinterpret_cast<const hwy::float16_t*>(page + geo.norms_offset(page_tokens));
  V a[GH];
  for (int g = 0; g < GH; ++g) a[g] = hn::LoadU(df, acc + size_t(g) * dim + i0);
  HWY_ALIGN float w[GH * kTqTileTokens];
  HWY_ALIGN uint32_t codes[kTqTileTokens];
  for (int tile_first = begin - begin % kTqTileTokens; tile_first < end;
       tile_first += kTqTileTokens) {
    const uint8_t* tile = page + size_t(tile_first / kTqTileTokens) * geo.tile_bytes;
    const int lo = std::max(begin, tile_first);
    const int hi = std::min(end, tile_first + kTqTileTokens);
    TileWeights<GH>(df, p, stride, begin, norms, tile_first, lo, hi, w);
    for (int s = lo; s < hi; ++s) {
      const int k = s - tile_first;
      for (int l = 0; l < N; ++l) codes[l] = uint32_t(tq_code_at(geo, tile, k, i0 + l));
      const V c = cb(hn::Load(du, codes));
      for (int g = 0; g < GH; ++g)
        a[g] = hn::MulAdd(hn::Set(df, w[g * kTqTileTokens + k]), c, a[g]);
    }
  }
  for (int g = 0; g < GH; ++g) hn::StoreU(a[g], df, acc + size_t(g) * dim + i0);
}

template <int kBits, int GH, class D>
HWY_INLINE void AccumulateHeads(D df, const TqGeometry& geo, const float* table16, const float* p,
                                size_t stride, const uint8_t* page, int page_tokens, int begin,
                                int end, float* acc) {
  const int N = int(hn::Lanes(df));
  const int fast_end = geo.full_coords() / N * N;
  // Accumulators held in registers: 16 of the 32 AVX-512 registers, 8 of 16
  // elsewhere.
  constexpr int kRegs = hn::MaxLanes(D()) >= 16 ? 16 : 8;
  constexpr int kMB = kRegs / GH >= 4 ? 4 : (kRegs / GH >= 2 ? 2 : 1);
  int i = 0;
  for (; i + kMB * N <= fast_end; i += kMB * N)
    AccumulateChunk<kBits, GH, kMB>(df, geo, table16, p, stride, page, page_tokens, begin, end, i,
                                    acc);
  for (; i + N <= fast_end; i += N)
    AccumulateChunk<kBits, GH, 1>(df, geo, table16, p, stride, page, page_tokens, begin, end, i,
                                  acc);
  for (; i < geo.head_dim; i += N)
    AccumulateTailBlock<GH>(df, geo, table16, p, stride, page, page_tokens, begin, end, i, acc);
}

template <int kBits, class D>
HWY_INLINE void AccumulateAll(D df, const TqGeometry& geo, const float* table16, const float* p,
                              int G, size_t stride, const uint8_t* page, int page_tokens, int begin,
                              int end, float* acc) {
  const size_t dim = size_t(geo.head_dim);
  int g = 0;
  for (; g + 4 <= G; g += 4)
    AccumulateHeads<kBits, 4>(df, geo, table16, p + g * stride, stride, page, page_tokens, begin,
                              end, acc + g * dim);
  if (g + 2 <= G) {
    AccumulateHeads<kBits, 2>(df, geo, table16, p + g * stride, stride, page, page_tokens, begin,
                              end, acc + g * dim);
    g += 2;
  }
  if (g < G)
    AccumulateHeads<kBits, 1>(df, geo, table16, p + g * stride, stride, page, page_tokens, begin,
                              end, acc + g * dim);
}

// Values of a prefill call on 16-register targets: the weights p * norm of
// up to kBlockRows rows x kBlockTokens tokens are computed once, each block
// of 2 vectors of coordinates of those tokens is decoded to centroid values
// once, and simd::AccumulateRows runs every row block over it, instead of
// each group of 4 heads unpacking the tokens again. The same sums as
// AccumulateChunk: weight p * norm, tokens in order. Head dims whose codes
// are all in full words, in whole blocks (tail coordinates take the
// per-group path).
inline constexpr int kBlockRows = 64, kBlockTokens = 64;

template <int kBits, class D>
HWY_INLINE void AccumulateBlocked(D df, const TqGeometry& geo, const float* table16, const float* p,
                                  int G, size_t stride, const uint8_t* page, int page_tokens,
                                  int begin, int end, float* acc) {
  constexpr int kMB = 2;
  const int N = int(hn::Lanes(df));
  const int dim = geo.head_dim;
  const simd::Codebook16<D, (1 << kBits)> cb(df, table16);
  const hn::Rebind<hwy::float16_t, D> dh;
  const auto* norms = reinterpret_cast<const uint16_t*>(page + geo.norms_offset(page_tokens));
  HWY_ALIGN float w[kBlockRows * kBlockTokens];
  HWY_ALIGN float nf[kBlockTokens];
  HWY_ALIGN float x[kBlockTokens * kMB * hn::MaxLanes(D())];
  for (int t0 = begin; t0 < end; t0 += kBlockTokens) {
    const int nt = std::min(kBlockTokens, end - t0);
    int tn = 0;
    for (; tn + N <= nt; tn += N)
      hn::Store(hn::PromoteTo(
                    df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(norms) + t0 + tn)),
                df, nf + tn);
    for (; tn < nt; ++tn) nf[tn] = f16_to_f32(norms[t0 + tn]);
    for (int g0 = 0; g0 < G; g0 += kBlockRows) {
      const int ng = std::min(kBlockRows, G - g0);
      for (int r = 0; r < ng; ++r) {
        const float* pr = p + size_t(g0 + r) * stride + (t0 - begin);
        float* wr = w + r * kBlockTokens;
        int t = 0;
        for (; t + N <= nt; t += N)
          hn::Store(hn::Mul(hn::LoadU(df, pr + t), hn::Load(df, nf + t)), df, wr + t);
        for (; t < nt; ++t) wr[t] = pr[t] * nf[t];
      }
      for (int i0 = 0; i0 < dim; i0 += kMB * N) {
        const ValueCodes<kBits, kMB, D> codes(df, geo, i0);
        // Tile by tile: the token's word address is one add per token (no
        // division by the tile size in the loop).
        float* xt = x;
        for (int slot = t0; slot < t0 + nt;) {
          const uint8_t* tile = page + size_t(slot / kTqTileTokens) * geo.tile_bytes;
          const int k0 = slot % kTqTileTokens;
          const int k1 = std::min(kTqTileTokens, k0 + (t0 + nt - slot));
          for (const uint8_t *tk = tile + 4 * k0, *tk_end = tile + 4 * k1; tk < tk_end;
               tk += 4, xt += kMB * N) {
#pragma GCC unroll 4
            for (int m = 0; m < kMB; ++m) hn::Store(cb(codes(tk, m)), df, xt + m * N);
          }
          slot += k1 - k0;
        }
        simd::AccumulateRows<kMB>(df, w, ng, kBlockTokens, x, size_t(kMB * N), nt,
                                  acc + size_t(g0) * dim + i0, size_t(dim));
      }
    }
  }
}

void TqAccumulate(const TqGeometry& geo, const float* table16, const float* p, int G, size_t stride,
                  const uint8_t* page, int page_tokens, int begin, int end, float* acc) {
  if (end <= begin) return;
  simd::WithTagDividing(size_t(geo.head_dim), [&](auto df) {
    WithBits(geo.bits, [&](auto bits) {
      constexpr int kBits = decltype(bits)::value;
      if constexpr (kBlockedPrefill) {
        const int block = int(2 * hn::Lanes(df));
        if (G >= 8 && geo.full_coords() == geo.head_dim && geo.head_dim % block == 0)
          return AccumulateBlocked<kBits>(df, geo, table16, p, G, stride, page, page_tokens, begin,
                                          end, acc);
      }
      AccumulateAll<kBits>(df, geo, table16, p, G, stride, page, page_tokens, begin, end, acc);
    });
  });
}

}  // namespace tkv::kv::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv::kernels {

HWY_EXPORT(TqScore);
HWY_EXPORT(TqAccumulate);

void tq_score(const TqGeometry& geo, const float* table16, const float* q, int G,
              const uint8_t* page, int page_tokens, int begin, int end, float* scores,
              size_t stride) {
  HWY_DYNAMIC_DISPATCH(TqScore)(geo, table16, q, G, page, page_tokens, begin, end, scores, stride);
}
void tq_accumulate(const TqGeometry& geo, const float* table16, const float* p, int G,
                   size_t stride, const uint8_t* page, int page_tokens, int begin, int end,
                   float* acc) {
  HWY_DYNAMIC_DISPATCH(TqAccumulate)
  (geo, table16, p, G, stride, page, page_tokens, begin, end, acc);
}

}  // namespace tkv::kv::kernels
#endif  // HWY_ONCE
