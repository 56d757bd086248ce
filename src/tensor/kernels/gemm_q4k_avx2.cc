// Q4_K and Q6_K prefill products on AVX2 without the dot-product
// instructions: the integer-dot arithmetic of intdot-inl.h in a tile shaped
// for 16 registers.
//
// intdot-inl.h's token tiles unpack a weight block into registers (8 chunks
// of u8 weights and their int16 scales: 16 vectors) and run 8 tokens over
// it, so on AVX2 (16 vector registers) the unpacked block lives on the
// stack. Here a panel of rows (kPanelBytes of unpacked blocks, in L2) is
// unpacked once (UnpackBlock, the same canonical form) into a thread-local
// buffer, in pair form (PackedQ4K, InterleavePair: chunks 2p and 2p + 1
// interleaved by int16 lanes, the tokens' activations likewise, made once
// per panel and token tile), and swept by tiles of 2 rows x 5 tokens. Per
// chunk pair, row and token: two vpmaddubsw (one per 32 values) whose int16
// pair sums are added (vpaddw; they share a scale lane by lane) + one
// vpmaddwd (the pair's scales) + vpaddd into the block's int32 lanes,
// i.e. 3 multiplies per 2 chunks where one vpmaddwd per chunk took 4. The
// 10 lane vectors of a tile stay in registers over the block (written in
// assembly, BlockSums2x5: GCC spilled them). Then the float step per (row,
// token) and super-block, the scale products of a row's 5 tokens one vector
// multiply and the mins term two (row, token) per 256-bit instruction, its
// scale products spread by shuffles (MinsStep). Q6_K runs the same
// tiles with its signed weights as vpmaddubsw's s8 operand and the
// activations + 128 as the u8 one (ChunkPair, PackBlock), token by token.
// Rows of more than kSliceBlocks blocks are swept a slice of blocks at a
// time (PanelTokens) so that a token tile's activations stay in L1.
//
// The arithmetic is bound by its multiply ports: 12 multiplies per (row,
// token, block) in the int32 sums and ~4 in the float step (q4_K's mins
// term 1.7 of them, MinsStep; the outputs' sums, Finish8, are shuffles and
// adds), so the chunk pairs halve the vpmaddwd per chunk, and the kernel
// beats both one vpmaddwd per chunk and the f32 GEMM on dequantized rows.
//
// The numbers are intdot-inl.h's: the int32 lanes of a super-block are
// exact and hold the same products as matvec's (InterleavePair keeps each
// product in its int32 lane; only the order of the integer additions
// differs), and the float step, acc = fma(d_w * d_x, float(lanes), acc) and
// the mins term, runs per (row, token) in block order with the same
// operations on every lane; FinishInt makes the output. So every (row,
// token) is bit-identical to int_dot_rows (matvec) and to int_gemm_rows,
// whatever n, tiling, slicing or thread split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/gemm_q4k_avx2.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>
#include <utility>

#include "hwy/highway.h"
#include "tensor/kernels/gemm_q4k_avx2.h"
#include "tensor/kernels/gemm_scratch.h"
#include "tensor/kernels/intdot-inl.h"
#include "tensor/matmul.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

// Bytes of rows unpacked at a time (448 per block: 146 rows at 2048
// columns, 36 at 8192): read from L2 by every token tile, whose per-block
// data (TileBlock, pair-form activations) is made once per panel.
inline constexpr size_t kPanelBytes = 512 << 10;
// A tile: its kRows x kTokens int32 block sums are 10 of the 16 registers
// while the 4 chunk pairs of a block are swept (a pair's two operand
// vectors and two temporaries besides); the rest are memory operands.
inline constexpr int kRows = 2, kTokens = 5;
inline constexpr int kPairs = (kTokens + 1) / 2;
// Blocks of a slice (2048 columns: 10 KiB of a token tile's pair-form
// activations, with a row pair's 7 KiB of weights well within L1) and the
// rows whose accumulators are kept from slice to slice (4.5 KiB).
inline constexpr size_t kSliceBlocks = 8;
inline constexpr int64_t kGroupRows = 16;

// One Q4_K or Q6_K block of one row in the panel's pair form: chunks 2p and
// 2p + 1 interleaved by int16 lanes (InterleavePair) into w[2p] (A) and
// w[2p + 1] (B), whose vpmaddubsw pair sums at one lane have one scale, so
// that they are added in int16 and take one vpmaddwd with s[p].
struct alignas(32) PackedQ4K {
  __m256i w[8];  // Q4_K: u8 weights 0..15; Q6_K: s8 weights q - 32
  __m256i s[4];  // int16 scales of pair p: chunk 2p's even lanes, 2p + 1's odd
  __m256i mins;  // Q4_K: the 8 int16 mins in both halves; Q6_K: bias (PackBlock)
  float d, dm;
  uint8_t pad[24];
};
static_assert(sizeof(PackedQ4K) == 448);

// Two 32-value chunks c0, c1 as the vectors a, b whose vpmaddubsw sums add
// lane by lane within one sub-block. In int16 lanes (two values each):
// a = (c0[0], c1[1], c0[2], c1[3], ...), b = (c0[1], c1[0], c0[3], c1[2], ...),
// so lane 2j of a + b holds c0's values 4j..4j+3 and lane 2j + 1 c1's, and
// vpmaddwd by (s_c0[2j], s_c1[2j + 1]) puts into int32 lane j exactly the
// products intdot-inl.h's chunk steps put there (vpmaddwd(pairs_c, s_c) of
// c0 and c1): the same integers, added in another order. The weights and the
// activations take the same permutation, so each product meets its
// partner. The int16 sum never wraps: q4_K |2 * 2 * 15 * 128| = 7680, q6_K
// (x + 128 as u8 times q - 32) at most 2 * 2 * 255 * 32 = 32640.
HWY_INLINE void InterleavePair(__m256i c0, __m256i c1, __m256i* a, __m256i* b) {
  *a = _mm256_blend_epi16(c0, c1, 0xAA);
  const __m256i swapped = _mm256_blend_epi16(c1, c0, 0xAA);  // (c1[0], c0[1], ...)
  *b = _mm256_shuffle_epi8(
      swapped, _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6,
                                7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
}

// What a tile of tokens needs per block besides the activations: their d
// (lane t: token t; with an odd count, the last token's d again in the lane
// after it) and, per pair of tokens, the group sums laid out for a 256-bit
// mins step (low half the even token, high half the odd one; an odd last
// token in both halves: the two rows' mins step of that token, MinsStep).
struct alignas(32) TileBlock {
  float dx[8];
  int16_t psums_pair[kPairs][16];
};

// The float accumulators of a tile: v per (row, token), m per (row, pair of
// tokens), lanes 0..3 the even token, 4..7 the odd one. With 2 rows and an
// odd number of tokens the last token's mins of both rows share one vector,
// m[0][kP - 1] (row 0 low, row 1 high; m[1][kP - 1] unused): 5 mins steps
// per 2 x 5 tile and block instead of 6.
template <int R, int NT>
struct TileAcc {
  static constexpr int kP = (NT + 1) / 2;
  static constexpr bool kRowPairLast = R == 2 && NT % 2 == 1;
  __m256 v[R][NT];
  __m256 m[R][kP];
  // The 4 mins lanes of (row i, token j).
  __m128 Mins(int i, int j) const {
    const bool shared = kRowPairLast && j == NT - 1;
    const __m256 x = m[shared ? 0 : i][j / 2];
    return (shared ? i : j % 2) ? _mm256_extractf128_ps(x, 1) : _mm256_castps256_ps128(x);
  }
};

// One (row, token, chunk pair p) of a tile: the pair's int32 lanes with
// the scales folded in, added to l (or l's first value). Q4_K: the u8
// weights wa, wb against the activations xp[0], xp[1] (pair form). Q6_K:
// its signed weights q - 32 (-32..31) are vpmaddubsw's s8 operand and the
// token's activations plus 128 (u8, xp) the other, whose 128 w part the
// row's bias removes per block.
template <DType T>
HWY_INLINE __m256i ChunkPair(bool first, __m256i l, __m256i wa, __m256i wb, const __m256i* xp,
                             const __m256i* s) {
  const __m256i xa = _mm256_load_si256(xp), xb = _mm256_load_si256(xp + 1);
  const __m256i sums =
      T == DType::Q6_K
          ? _mm256_add_epi16(_mm256_maddubs_epi16(xa, wa), _mm256_maddubs_epi16(xb, wb))
          : _mm256_add_epi16(_mm256_maddubs_epi16(wa, xa), _mm256_maddubs_epi16(wb, xb));
  const __m256i prod = _mm256_madd_epi16(sums, _mm256_load_si256(s));
  return first ? prod : _mm256_add_epi32(l, prod);
}

// The int32 block sums of the full tile (2 rows x 5 tokens, block b) in
// assembly: GCC keeps neither the 10 sums in registers nor the adds of each
// as one chain (it reassociates them into trees and spills the products),
// which halved the throughput. Per chunk pair, row and token two vpmaddubsw
// (one operand from memory) + vpaddw + vpmaddwd (the pair's scales, in a
// register) + vpaddd. 5 tokens rather than 6 leave registers for the
// scales: 2 loads per (row, token, pair) instead of 3.3.
// clang-format off
#define TKV_MAC(ma, mb, ms, A) \
  "vpmaddubsw " ma ", %[va], %[t]\n\t" \
  "vpmaddubsw " mb ", %[vb], %[u]\n\t" \
  "vpaddw %[u], %[t], %[t]\n\t" \
  "vpmaddwd " ms ", %[t], %[t]\n\t" \
  "vpaddd %[t], %[" A "], %[" A "]\n\t"
#define TKV_MAC0(ma, mb, ms, A) \
  "vpmaddubsw " ma ", %[va], %[t]\n\t" \
  "vpmaddubsw " mb ", %[vb], %[u]\n\t" \
  "vpaddw %[u], %[t], %[t]\n\t" \
  "vpmaddwd " ms ", %[t], %[" A "]\n\t"
// Q4_K, row by row: the row's pair (wa, wb: offsets in PackedQ4K) in
// va, vb and its scales (so) in sc; token j's pair-form activations at
// ob + 256 j as memory operands.
#define TKV_ROW(M, wa, wb, so, wp, A0, A1, A2, A3, A4) \
  "vmovdqa " wa "(%[" wp "]), %[va]\n\t" \
  "vmovdqa " wb "(%[" wp "]), %[vb]\n\t" \
  "vmovdqa " so "(%[" wp "]), %[sc]\n\t" \
  M(wa "(%[ob])", wb "(%[ob])", "%[sc]", A0) \
  M(wa "+256(%[ob])", wb "+256(%[ob])", "%[sc]", A1) \
  M(wa "+512(%[ob])", wb "+512(%[ob])", "%[sc]", A2) \
  M(wa "+768(%[ob])", wb "+768(%[ob])", "%[sc]", A3) \
  M(wa "+1024(%[ob])", wb "+1024(%[ob])", "%[sc]", A4)
#define TKV_PAIR(M, wa, wb, so) \
  TKV_ROW(M, wa, wb, so, "p0", "a0", "a1", "a2", "a3", "a4") \
  TKV_ROW(M, wa, wb, so, "p1", "a5", "a6", "a7", "a8", "a9")
// Q6_K, token by token: the two rows' scales in s0, s1, token j's pair
// (activations + 128) in va, vb, the rows' weights as memory operands.
#define TKV_Q6TOKEN(M, wa, wb, xo, A, B) \
  "vmovdqa " wa "+" xo "(%[ob]), %[va]\n\t" \
  "vmovdqa " wb "+" xo "(%[ob]), %[vb]\n\t" \
  M(wa "(%[p0])", wb "(%[p0])", "%[s0]", A) \
  M(wa "(%[p1])", wb "(%[p1])", "%[s1]", B)
#define TKV_Q6PAIR(M, wa, wb, so) \
  "vmovdqa " so "(%[p0]), %[s0]\n\t" \
  "vmovdqa " so "(%[p1]), %[s1]\n\t" \
  TKV_Q6TOKEN(M, wa, wb, "0", "a0", "a5") TKV_Q6TOKEN(M, wa, wb, "256", "a1", "a6") \
  TKV_Q6TOKEN(M, wa, wb, "512", "a2", "a7") TKV_Q6TOKEN(M, wa, wb, "768", "a3", "a8") \
  TKV_Q6TOKEN(M, wa, wb, "1024", "a4", "a9")
#define TKV_BLOCK(P) \
  P(TKV_MAC0, "0", "32", "256") P(TKV_MAC, "64", "96", "288") \
  P(TKV_MAC, "128", "160", "320") P(TKV_MAC, "192", "224", "352")
// clang-format on

// xp: the pair-form activations of the tile's 5 tokens for block b.
template <DType T>
HWY_INLINE void BlockSums2x5(const PackedQ4K* u0, const PackedQ4K* u1, const __m256i* xp,
                             __m256i* l) {
  static_assert(offsetof(PackedQ4K, s) == 256 && kTokens == 5);
  __m256i va, vb, t, u, s0, s1;
#define TKV_SUMS                                                                                \
  [a0] "=&x"(l[0]), [a1] "=&x"(l[1]), [a2] "=&x"(l[2]), [a3] "=&x"(l[3]), [a4] "=&x"(l[4]),     \
      [a5] "=&x"(l[5]), [a6] "=&x"(l[6]), [a7] "=&x"(l[7]), [a8] "=&x"(l[8]), [a9] "=&x"(l[9]), \
      [va] "=&x"(va), [vb] "=&x"(vb), [t] "=&x"(t), [u] "=&x"(u)
#define TKV_INPUTS : [p0] "r"(u0), [p1] "r"(u1), [ob] "r"(xp) : "memory"
  if constexpr (T == DType::Q6_K) {
    __asm__(TKV_BLOCK(TKV_Q6PAIR) : TKV_SUMS, [s0] "=&x"(s0), [s1] "=&x"(s1)TKV_INPUTS);
  } else {
    (void)s1;
    __asm__(TKV_BLOCK(TKV_PAIR) : TKV_SUMS, [sc] "=&x"(s0)TKV_INPUTS);
  }
#undef TKV_INPUTS
#undef TKV_SUMS
}
#undef TKV_BLOCK
#undef TKV_PAIR
#undef TKV_ROW
#undef TKV_Q6PAIR
#undef TKV_Q6TOKEN
#undef TKV_MAC0
#undef TKV_MAC

// Lanes 0..3 lane a of v, 4..7 lane b.
HWY_INLINE __m256 SpreadPair(__m256 v, int a, int b) {
  return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(a, a, a, a, b, b, b, b));
}

// Q4_K's mins term of a tile's block, DotRowsInt's m = fma(dm_w d_x,
// float(mins . group sums), m) two (row, token) per instruction: the scale
// products dm_w d_x of a row's tokens one multiply (lane t), spread to the
// pair's halves by vpermps (a shuffle, not a multiply: the multiply ports
// are the tile's bound), and an odd last token's two rows in one vector.
template <int R, int NT>
HWY_INLINE void MinsStep(const PackedQ4K* const* u, const TileBlock& k, TileAcc<R, NT>& acc) {
  constexpr int kP = TileAcc<R, NT>::kP;
  constexpr bool kRowPairLast = TileAcc<R, NT>::kRowPairLast;
  const __m256 dx = _mm256_load_ps(k.dx);
  __m256 dmdx[R];
  for (int r = 0; r < R; ++r) dmdx[r] = _mm256_mul_ps(_mm256_set1_ps(u[r]->dm), dx);
  auto step = [&](__m256& m, __m256 scale, __m256i mins, int q) {
    const __m256i sums = _mm256_load_si256(reinterpret_cast<const __m256i*>(k.psums_pair[q]));
    m = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, sums)), m);
  };
  // Pairs of one row (an odd last token: the lane after it holds its d
  // again, its group sums fill both halves, the high half unused).
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < (kRowPairLast ? kP - 1 : kP); ++q)
      step(acc.m[r][q], SpreadPair(dmdx[r], 2 * q, 2 * q + 1), u[r]->mins, q);
  if constexpr (kRowPairLast) {
    // The last token (NT - 1) of row 0 (low half) and row 1 (high half).
    const __m256 scale = SpreadPair(_mm256_blend_ps(dmdx[0], dmdx[1], 1 << NT), NT - 1, NT);
    step(acc.m[0][kP - 1], scale, _mm256_blend_epi32(u[0]->mins, u[1]->mins, 0xF0), kP - 1);
  }
}

// R rows (their nb blocks at p, p + nb, ...), blocks [b0, b1), times NT
// tokens (their
// pair-form activations xp, per-block data tb) into acc. Per chunk pair and
// (row, token) two vpmaddubsw + vpaddw + vpmaddwd (the pair's scales) +
// vpaddd into the int32 lanes of the block;
// then DotRowsInt's float step: v = fma(d_w d_x, float(lanes), v) and, two
// tokens per instruction, m = fma(dm_w d_x, float(mins . group sums), m).
template <DType T, int R, int NT>
HWY_INLINE void Tile(const PackedQ4K* HWY_RESTRICT p, size_t nb, size_t b0, size_t b1,
                     const TileBlock* HWY_RESTRICT tb, const __m256i* HWY_RESTRICT xp,
                     TileAcc<R, NT>& acc) {
  for (size_t b = b0; b < b1; ++b) {
    const PackedQ4K* u[R];
    for (int r = 0; r < R; ++r) u[r] = p + size_t(r) * nb + b;
    // The tile's int32 block sums, l[r * NT + t].
    __m256i l[R * NT];
    if constexpr (R == kRows && NT == kTokens) {
      BlockSums2x5<T>(u[0], u[1], xp + b * kTokens * 8, l);
    } else {
      auto pair = [&]<size_t... I>(std::index_sequence<I...>, int q, bool first) {
        __m256i wa[R], wb[R];
        for (int r = 0; r < R; ++r)
          wa[r] = _mm256_load_si256(&u[r]->w[2 * q]),
          wb[r] = _mm256_load_si256(&u[r]->w[2 * q + 1]);
        ((l[I] = ChunkPair<T>(first, l[I], wa[I / NT], wb[I / NT],
                              xp + (b * kTokens + I % NT) * 8 + 2 * q, &u[I / NT]->s[q])),
         ...);
      };
      pair(std::make_index_sequence<R * NT>(), 0, true);
      for (int q = 1; q < 4; ++q) pair(std::make_index_sequence<R * NT>(), q, false);
    }
    if constexpr (T == DType::Q6_K)
      for (int i = 0; i < R * NT; ++i) l[i] = _mm256_sub_epi32(l[i], u[i / NT]->mins);
    const TileBlock& k = tb[b];
    alignas(32) float scale[R][8];
    for (int r = 0; r < R; ++r)
      _mm256_store_ps(scale[r], _mm256_mul_ps(_mm256_set1_ps(u[r]->d), _mm256_load_ps(k.dx)));
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((acc.v[I / NT][I % NT] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[I / NT][I % NT]),
                                                _mm256_cvtepi32_ps(l[I]), acc.v[I / NT][I % NT])),
       ...);
    }
    (std::make_index_sequence<R * NT>());
    if constexpr (T == DType::Q4_K) MinsStep(u, k, acc);
    // The float accumulators go back to memory between blocks, leaving the
    // registers to the int32 sums (kept in registers, GCC spills those).
    __asm__ volatile("" : : "r"(&acc) : "memory");
  }
}

// The tile data of tokens [t, t + nt) (nt <= kTokens), nb blocks, and their
// activations in pair form, xp[(b * kTokens + j) * 8 + 2 p (+ 1)] = A (B) of
// chunk pair p of token j's block b (Q6_K: of the activations plus 128 as
// u8, xor 0x80).
template <DType T>
HWY_INLINE void FillTileBlocks(const kernels::IntDotArgs& a, size_t nb, int64_t t, int nt,
                               TileBlock* tb, __m256i* xp) {
  std::memset(static_cast<void*>(tb), 0, nb * sizeof(TileBlock));
  for (int j = 0; j < nt; ++j) {
    const auto* x = reinterpret_cast<const ActBlock256*>(a.xq + size_t(t + j) * a.xq_stride);
    for (size_t b = 0; b < nb; ++b) {
      TileBlock& k = tb[b];
      k.dx[j] = x[b].d;
      std::memcpy(&k.psums_pair[j / 2][8 * (j % 2)], x[b].psums, 16);
      if (j == nt - 1 && nt % 2 == 1) {  // the odd last token (MinsStep)
        k.dx[j + 1] = x[b].d;
        std::memcpy(&k.psums_pair[j / 2][8], x[b].psums, 16);
      }
      __m256i* o = xp + (b * kTokens + size_t(j)) * 8;
      for (int q = 0; q < 4; ++q) {
        __m256i c0 = Load256(x[b].q + 64 * q), c1 = Load256(x[b].q + 64 * q + 32);
        if constexpr (T == DType::Q6_K) {
          c0 = _mm256_xor_si256(c0, _mm256_set1_epi8(char(0x80)));
          c1 = _mm256_xor_si256(c1, _mm256_set1_epi8(char(0x80)));
        }
        InterleavePair(c0, c1, o + 2 * q, o + 2 * q + 1);
      }
    }
  }
}

template <int R, int NT>
HWY_INLINE void Clear(TileAcc<R, NT>& acc) {
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < NT; ++t) acc.v[r][t] = _mm256_setzero_ps();
    for (int q = 0; q < TileAcc<R, NT>::kP; ++q) acc.m[r][q] = _mm256_setzero_ps();
  }
}

// Lanes r[k]: rows k (0..3) and k + 4 (4..7) of 8, 4 partial sums x0..x3
// each, to lane k of the result: (x0 + x2) + (x1 + x3), Hsum4's order (the
// shuffles put the values Hsum4 adds side by side).
HWY_INLINE __m256 SumQuads(const __m256* r) {
  auto half = [](__m256 a, __m256 b) {  // (a0 + a2, a1 + a3, b0 + b2, b1 + b3)
    return _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  };
  const __m256 s01 = half(r[0], r[1]), s23 = half(r[2], r[3]);
  return _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The outputs of 4 row pairs' (8 rows') token j as one vector: FinishInt's
// Hsum8(v) (less Hsum4 of the mins lanes) on the 8 side by side, the same
// additions in the same order, with ~a third of the instructions (the
// finish of one (row, token) at a time took ~6% of a 2048-column product).
template <DType T, int NT>
HWY_INLINE __m256 Finish8(const TileAcc<kRows, NT>* acc, int j) {
  static_assert(T == DType::Q4_K || T == DType::Q6_K);
  auto v = [&](int k) { return acc[k / 2].v[k % 2][j]; };
  __m256 r[4];
  for (int k = 0; k < 4; ++k)  // Hsum8's first step: high half + low half
    r[k] = _mm256_add_ps(_mm256_permute2f128_ps(v(k), v(k + 4), 0x31),
                         _mm256_permute2f128_ps(v(k), v(k + 4), 0x20));
  const __m256 sums = SumQuads(r);
  if constexpr (T == DType::Q6_K) return sums;
  __m256 m[4];
  for (int k = 0; k < 4; ++k)
    m[k] = _mm256_set_m128(acc[(k + 4) / 2].Mins((k + 4) % 2, j), acc[k / 2].Mins(k % 2, j));
  return _mm256_sub_ps(sums, SumQuads(m));
}

// Rows [r0, r0 + nr) of the panel times NT tokens from t: the tokens'
// activations stay in L1 while the panel's row pairs are swept over them.
// Rows wider than kSliceBlocks blocks (ffn_down's 8192 columns: 48 KiB of
// pair-form activations for 5 tokens, more than L1) go kGroupRows rows at a
// time, a slice of blocks at a time, the group's accumulators kept between
// slices: each (row, token) still sees its blocks in order, the same bits.
template <DType T, int NT>
HWY_INLINE void PanelTokens(const kernels::IntDotArgs& a, const PackedQ4K* panel, size_t nb,
                            int64_t r0, int64_t nr, int64_t t, const TileBlock* tb,
                            const __m256i* xp) {
  // The output of (row i, token j) from the tile's accumulators.
  auto finish = [](const auto& acc, int i, int j) {
    IntAcc s;
    s.v = acc.v[i][j];
    s.m = _mm256_castps128_ps256(acc.Mins(i, j));
    return FinishInt<T>(s);
  };
  for (int64_t g = 0; g < nr; g += kGroupRows) {
    const int64_t rows = std::min(kGroupRows, nr - g);
    const int64_t pairs = rows / kRows;
    const bool odd = rows % kRows != 0;
    TileAcc<kRows, NT> acc[kGroupRows / kRows];
    TileAcc<1, NT> last;
    for (int64_t i = 0; i < pairs; ++i) Clear(acc[i]);
    Clear(last);
    for (size_t b0 = 0; b0 < nb; b0 += kSliceBlocks) {
      const size_t b1 = std::min(nb, b0 + kSliceBlocks);
      for (int64_t i = 0; i < pairs; ++i)
        Tile<T, kRows, NT>(panel + size_t(g + kRows * i) * nb, nb, b0, b1, tb, xp, acc[i]);
      if (odd) Tile<T, 1, NT>(panel + size_t(g + kRows * pairs) * nb, nb, b0, b1, tb, xp, last);
    }
    // 4 row pairs at a time, then pair by pair: the same bits either way.
    const int64_t quads = pairs / 4;
    for (int64_t h = 0; h < quads; ++h)
      for (int j = 0; j < NT; ++j)
        _mm256_storeu_ps(a.y + (t + j) * a.y_stride + r0 + g + 8 * h, Finish8<T>(acc + 4 * h, j));
    for (int64_t i = 4 * quads; i < pairs; ++i)
      for (int r = 0; r < kRows; ++r)
        for (int j = 0; j < NT; ++j)
          a.y[(t + j) * a.y_stride + r0 + g + kRows * i + r] = finish(acc[i], r, j);
    if (odd)
      for (int j = 0; j < NT; ++j)
        a.y[(t + j) * a.y_stride + r0 + g + kRows * pairs] = finish(last, 0, j);
  }
}

template <DType T, int NT>
HWY_INLINE void PanelTail(const kernels::IntDotArgs& a, const PackedQ4K* panel, size_t nb,
                          int64_t r0, int64_t nr, int64_t t, const TileBlock* tb,
                          const __m256i* xp) {
  if constexpr (NT > 0) {
    if (a.n - t == NT) return PanelTokens<T, NT>(a, panel, nb, r0, nr, t, tb, xp);
    PanelTail<T, NT - 1>(a, panel, nb, r0, nr, t, tb, xp);
  }
}

// One block of a row in the panel's pair form: Q4_K's u8 weights, chunk
// scales and mins; Q6_K's signed weights q - 32, its 16-value group scales and
// the bias of the 128 added to the activations, sum_c vpmaddwd(s_c,
// 128 (w pairs of chunk c)): the block's int32 lanes of 128 sum w s.
template <DType T>
HWY_INLINE void PackBlock(const uint8_t* blk, PackedQ4K& o) {
  UnpackedFor<T> u;
  UnpackBlock<T>(blk, u);
  for (int q = 0; q < 4; ++q) {
    InterleavePair(u.w[2 * q], u.w[2 * q + 1], &o.w[2 * q], &o.w[2 * q + 1]);
    o.s[q] = _mm256_blend_epi16(u.s[2 * q], u.s[2 * q + 1], 0xAA);
  }
  if constexpr (T == DType::Q4_K) {
    o.mins = _mm256_permute2x128_si256(u.mins, u.mins, 0x00);
    o.dm = u.dm;
  } else {
    __m256i bias = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c)
      bias = _mm256_add_epi32(
          bias,
          _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(char(0x80)), u.w[c]), u.s[c]));
    o.mins = bias;
    o.dm = 0.0f;
  }
  o.d = u.d;
}

template <DType T>
void GemmRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  static thread_local kernels::ScratchBuffer<PackedQ4K> panel_buffer;
  static thread_local kernels::ScratchBuffer<TileBlock> tile_buffer;
  static thread_local kernels::ScratchBuffer<__m256i> act_buffer;
  constexpr size_t kBlockBytes = T == DType::Q6_K ? sizeof(BlockQ6_K) : sizeof(BlockQ4_K);
  const size_t nb = size_t(a.cols) / 256;
  // Rows per panel: as many as fit kPanelBytes (an even number, at least 2).
  const int64_t panel_rows =
      std::max<int64_t>(kRows, int64_t(kPanelBytes / (nb * sizeof(PackedQ4K))) / kRows * kRows);
  PackedQ4K* panel = panel_buffer.Get(size_t(panel_rows) * nb);
  TileBlock* tb = tile_buffer.Get(nb);
  __m256i* xp = act_buffer.Get(nb * kTokens * 8);
  for (int64_t rp = r0; rp < r1; rp += panel_rows) {
    const int64_t nr = std::min(panel_rows, r1 - rp);
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* row = a.w + size_t(rp + r) * a.row_bytes;
      for (size_t b = 0; b < nb; ++b)
        PackBlock<T>(row + b * kBlockBytes, panel[size_t(r) * nb + b]);
    }
    for (int64_t t = 0; t < a.n; t += kTokens) {
      const int nt = int(std::min<int64_t>(kTokens, a.n - t));
      FillTileBlocks<T>(a, nb, t, nt, tb, xp);
      if (nt == kTokens)
        PanelTokens<T, kTokens>(a, panel, nb, rp, nr, t, tb, xp);
      else
        PanelTail<T, kTokens - 1>(a, panel, nb, rp, nr, t, tb, xp);
    }
  }
}

void Q4KGemmRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  if (a.type == DType::Q6_K) return GemmRows<DType::Q6_K>(a, r0, r1);
  HWY_DASSERT(a.type == DType::Q4_K);
  GemmRows<DType::Q4_K>(a, r0, r1);
}

// Prefill-sized products only: at a few tokens (batched decode) unpacking
// a panel per call costs more than it saves, and intdot-inl.h's tiles are
// faster. With or without AVX-VNNI: at prefill sizes these tiles (no VNNI)
// beat intdot-inl.h's VNNI tiles too, the same lanes.
bool Q4KGemmActive(DType type, int64_t n) {
  return (type == DType::Q4_K || type == DType::Q6_K) && n > kIntMatmulMaxTokens;
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
