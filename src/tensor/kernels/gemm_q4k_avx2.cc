// Q4_K prefill product on AVX2 without the dot-product instructions: the
// integer-dot arithmetic of intdot-inl.h in a tile shaped for 16 registers.
//
// intdot-inl.h's token tiles unpack a weight block into registers (8 chunks
// of u8 weights and their int16 scales: 16 vectors) and run 8 tokens over
// it, so on AVX2 (16 vector registers) the unpacked block lives on the
// stack. Here a panel of kPanelRows rows is unpacked once (UnpackBlock, the
// same canonical form) into a thread-local buffer, and tiles of 2 rows x 4
// tokens sweep it: per 32-value chunk 4 activation loads, and per (row,
// token) vpmaddubsw + vpmaddwd (the chunk's scale folded in) + vpaddd into
// an int32 accumulator that spans the super-block; then one float step per
// (row, token) and super-block. Measured (2048 x 2048, n = 512, AVX2
// without VNNI, two threads of this machine): ~245 GFLOP/s against ~192 for
// the f32 GEMM; llama-3.2-1b Q4_K_M prefill ~90 -> ~100 tok/s against
// intdot-inl.h's tiles (best of runs on a busy machine).
//
// The numbers are intdot-inl.h's: the int32 lanes of a super-block are
// exact (the same sums in another order), and the float step, acc =
// fma(d_w * d_x, float(lanes), acc) and the mins term, runs per (row,
// token) in block order with the same instructions; FinishInt makes the
// output. So every (row, token) is bit-identical to int_dot_rows (matvec)
// and to int_gemm_rows, whatever n, tiling or thread split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/gemm_q4k_avx2.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "tensor/kernels/gemm_q4k_avx2.h"
#include "tensor/kernels/intdot-inl.h"
#include "tensor/matmul.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

// Rows unpacked at a time: their unpacked blocks (544 bytes each: 68 KiB
// at 2048 columns) are read from L1/L2 by every token tile.
inline constexpr int64_t kPanelRows = 16;
inline constexpr int kRows = 2, kTokens = 4;

// One Q4_K block of one row, unpacked (UnpackBlock's canonical form).
struct alignas(32) PackedQ4K {
  __m256i w[8];  // u8 weights of chunk c (0..15)
  __m256i s[8];  // int16 scale of chunk c in every lane
  __m128i mins;  // 8 int16 mins
  float d, dm;
  uint8_t pad[8];
};
static_assert(sizeof(PackedQ4K) == 544);

struct PanelBuffer {
  hwy::AlignedFreeUniquePtr<PackedQ4K[]> data;
  size_t size = 0;
  PackedQ4K* Get(size_t want) {
    if (size < want) {
      data = hwy::AllocateAligned<PackedQ4K>(want);
      HWY_ASSERT(data != nullptr);
      size = want;
    }
    return data.get();
  }
};

// R rows (their nb blocks at p, p + nb, ...) times NT tokens (x[t]).
template <int R, int NT>
HWY_INLINE void Tile(const PackedQ4K* HWY_RESTRICT p, size_t nb, const ActBlock256* const* x,
                     IntAcc* st) {
  for (int i = 0; i < R * NT; ++i) st[i] = IntAcc{};
  for (size_t b = 0; b < nb; ++b) {
    __m256i l[R][NT];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) l[r][t] = _mm256_setzero_si256();
        // Not unrolled: the 8 int32 accumulators, 4 activation vectors and a
        // product fit the 16 registers only one chunk at a time.
#pragma GCC unroll 1
    for (int c = 0; c < 8; ++c) {
      __m256i q[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) q[t] = Load256(x[t][b].q + 32 * c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const PackedQ4K& u = p[size_t(r) * nb + b];
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t)
          l[r][t] = _mm256_add_epi32(l[r][t],
                                     _mm256_madd_epi16(u.s[c], _mm256_maddubs_epi16(u.w[c], q[t])));
      }
    }
    // DotRowsInt's float step, per (row, token).
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const PackedQ4K& u = p[size_t(r) * nb + b];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const ActBlock256& a = x[t][b];
        IntAcc& s = st[r * NT + t];
        s.v = AccLanes(s.v, u.d * a.d, l[r][t]);
        const __m128i s32 = _mm_load_si128(reinterpret_cast<const __m128i*>(a.psums));
        s.m = _mm256_castps128_ps256(_mm_fmadd_ps(_mm_set1_ps(u.dm * a.d),
                                                  _mm_cvtepi32_ps(_mm_madd_epi16(u.mins, s32)),
                                                  _mm256_castps256_ps128(s.m)));
      }
    }
  }
}

// Rows [r0, r0 + nr) of the panel times NT tokens from t: the tokens'
// activations stay in L1 while the panel's row pairs are swept over them.
template <int NT>
HWY_INLINE void PanelTokens(const kernels::IntDotArgs& a, const PackedQ4K* panel, size_t nb,
                            int64_t r0, int64_t nr, int64_t t) {
  const ActBlock256* x[NT];
  for (int j = 0; j < NT; ++j)
    x[j] = reinterpret_cast<const ActBlock256*>(a.xq + size_t(t + j) * a.xq_stride);
  IntAcc st[kRows * NT];
  int64_t r = 0;
  for (; r + kRows <= nr; r += kRows) {
    Tile<kRows, NT>(panel + size_t(r) * nb, nb, x, st);
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < NT; ++j)
        a.y[(t + j) * a.y_stride + r0 + r + i] = FinishInt<DType::Q4_K>(st[i * NT + j]);
  }
  if (r < nr) {
    Tile<1, NT>(panel + size_t(r) * nb, nb, x, st);
    for (int j = 0; j < NT; ++j) a.y[(t + j) * a.y_stride + r0 + r] = FinishInt<DType::Q4_K>(st[j]);
  }
}

void Q4KGemmRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  static thread_local PanelBuffer buffer;
  const size_t nb = size_t(a.cols) / 256;
  PackedQ4K* panel = buffer.Get(size_t(kPanelRows) * nb);
  for (int64_t rp = r0; rp < r1; rp += kPanelRows) {
    const int64_t nr = std::min(kPanelRows, r1 - rp);
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* row = a.w + size_t(rp + r) * a.row_bytes;
      for (size_t b = 0; b < nb; ++b) {
        UnpackedFor<DType::Q4_K> u;
        UnpackBlock<DType::Q4_K>(row + b * sizeof(BlockQ4_K), u);
        PackedQ4K& o = panel[size_t(r) * nb + b];
        for (int c = 0; c < 8; ++c) o.w[c] = u.w[c], o.s[c] = u.s[c];
        o.mins = _mm256_castsi256_si128(u.mins);
        o.d = u.d;
        o.dm = u.dm;
      }
    }
    int64_t t = 0;
    for (; t + kTokens <= a.n; t += kTokens) PanelTokens<kTokens>(a, panel, nb, rp, nr, t);
    switch (a.n - t) {
      case 3:
        PanelTokens<3>(a, panel, nb, rp, nr, t);
        break;
      case 2:
        PanelTokens<2>(a, panel, nb, rp, nr, t);
        break;
      case 1:
        PanelTokens<1>(a, panel, nb, rp, nr, t);
        break;
      default:
        break;
    }
  }
}

// Prefill-sized products only: at 8 tokens (batched decode) unpacking a
// panel per call made it 5-10% slower than intdot-inl.h's tiles.
bool Q4KGemmActive(DType type, int64_t n) {
  return type == DType::Q4_K && n > kIntMatmulMaxTokens && !IntVnniUsable();
}

#else  // not AVX2

void Q4KGemmRows(const kernels::IntDotArgs&, int64_t, int64_t) {
  HWY_ABORT("q4k_gemm_rows: AVX2 only");
}

bool Q4KGemmActive(DType, int64_t) {
  return false;
}

#endif  // HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(Q4KGemmRows);
HWY_EXPORT(Q4KGemmActive);

void q4k_gemm_rows(const IntDotArgs& a, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(Q4KGemmRows)(a, r0, r1);
}

bool q4k_gemm_active(DType type, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(Q4KGemmActive)(type, n);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
