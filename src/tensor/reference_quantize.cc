// Scalar quantizers (used by `turbokv synth --type X` and the tests).
//
// The 32-value types follow ggml's reference quantizers (quantize_row_*_ref),
// so a file we write quantizes the way llama.cpp's reference path would. The
// K-quants and IQ4 types use a plain fit instead of llama-quantize's search:
// each sub-block gets its own min/max (or signed absmax) scale, the sub-block
// scales are quantized against one f16 super-block scale, and each value is
// rounded against the scale that the dequantizer will actually use, so the
// round-trip error is at most about half a quantization step.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/f16.h"
#include "tensor/blocks.h"
#include "tensor/reference.h"

namespace tkv {

namespace {

int nearest(float v) {
  return int(std::lrintf(v));
}
int clampi(int v, int lo, int hi) {
  return std::min(hi, std::max(lo, v));
}

// The value of largest magnitude in x[0..n), sign kept (0 for all zeros).
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

void quant_q4_0(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x, 32) / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    const uint8_t q0 = uint8_t(std::min(15, int(int8_t(x[j] * id + 8.5f))));
    const uint8_t q1 = uint8_t(std::min(15, int(int8_t(x[j + 16] * id + 8.5f))));
    b.qs[j] = uint8_t(q0 | (q1 << 4));
  }
}

void quant_q4_1(const float* x, BlockQ4_1& b) {
  const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
  const float d = (mx - mn) / 15;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(mn);
  for (int j = 0; j < 16; ++j) {
    const uint8_t q0 = uint8_t(std::min(15, int(int8_t((x[j] - mn) * id + 0.5f))));
    const uint8_t q1 = uint8_t(std::min(15, int(int8_t((x[j + 16] - mn) * id + 0.5f))));
    b.qs[j] = uint8_t(q0 | (q1 << 4));
  }
}

void quant_q5_0(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x, 32) / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, int(int8_t(x[j] * id + 16.5f)));
    const int q1 = std::min(31, int(int8_t(x[j + 16] * id + 16.5f)));
    b.qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= uint32_t((q0 >> 4) & 1) << j;
    qh |= uint32_t((q1 >> 4) & 1) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
}

void quant_q5_1(const float* x, BlockQ5_1& b) {
  const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
  const float d = (mx - mn) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(mn);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, int((x[j] - mn) * id + 0.5f));
    const int q1 = std::min(31, int((x[j + 16] - mn) * id + 0.5f));
    b.qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= uint32_t((q0 >> 4) & 1) << j;
    qh |= uint32_t((q1 >> 4) & 1) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
}

void quant_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(std::round(x[j] * id));
}

// Asymmetric fit of n values as scale * q - min_off, q in [0, qmax], with
// min_off >= 0 (ggml's K-quants cannot represent a positive minimum).
void fit_min_max(const float* x, int n, int qmax, float* scale, float* min_off) {
  float mn = std::min(0.0f, *std::min_element(x, x + n));
  const float mx = *std::max_element(x, x + n);
  *scale = mx > mn ? (mx - mn) / float(qmax) : 0.0f;
  *min_off = -mn;
}

// Quantizes a non-negative sub-block quantity against a super-block scale
// with `levels` steps: returns the f16 super-block scale, fills q[].
uint16_t quantize_scales(const float* v, int n, int levels, int* q) {
  const float vmax = *std::max_element(v, v + n);
  const uint16_t d16 = f32_to_f16(vmax / float(levels));
  const float d = f16_to_f32(d16);
  for (int i = 0; i < n; ++i) q[i] = d > 0 ? clampi(nearest(v[i] / d), 0, levels) : 0;
  return d16;
}

// Signed version: the largest-magnitude entry maps to -levels_neg.
uint16_t quantize_signed_scales(const float* v, int n, int lo, int hi, int* q) {
  const float vmax = signed_absmax(v, n);
  const uint16_t d16 = f32_to_f16(vmax / float(lo));
  const float d = f16_to_f32(d16);
  for (int i = 0; i < n; ++i) q[i] = d != 0 ? clampi(nearest(v[i] / d), lo, hi) : 0;
  return d16;
}

// Rounds x to q in [0, qmax] for y = dl * q - ml.
int round_asym(float x, float dl, float ml, int qmax) {
  return dl > 0 ? clampi(nearest((x + ml) / dl), 0, qmax) : 0;
}

void quant_q2_k(const float* x, BlockQ2_K& b) {
  float scale[16], mins[16];
  for (int g = 0; g < 16; ++g) fit_min_max(x + 16 * g, 16, 3, &scale[g], &mins[g]);
  int qs[16], qm[16];
  b.d = quantize_scales(scale, 16, 15, qs);
  b.dmin = quantize_scales(mins, 16, 15, qm);
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int g = 0; g < 16; ++g) b.scales[g] = uint8_t(qs[g] | (qm[g] << 4));
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int i = 0; i < kQK; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32, g = 8 * h + 2 * j + l / 16;
    const int q = round_asym(x[i], d * float(qs[g]), dmin * float(qm[g]), 3);
    b.qs[32 * h + l] |= uint8_t(q << (2 * j));
  }
}

void quant_q3_k(const float* x, BlockQ3_K& b) {
  float scale[16];
  for (int g = 0; g < 16; ++g) scale[g] = signed_absmax(x + 16 * g, 16) / -4;
  int sc[16];
  b.d = quantize_signed_scales(scale, 16, -32, 31, sc);
  const float d = f16_to_f32(b.d);
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int g = 0; g < 16; ++g) {
    const int s = sc[g] + 32;  // 0..63
    b.scales[g % 8] |= uint8_t((s & 0xF) << (g < 8 ? 0 : 4));
    b.scales[8 + g % 4] |= uint8_t((s >> 4) << (2 * (g / 4)));
  }
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int i = 0; i < kQK; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32, g = 8 * h + 2 * j + l / 16;
    const float dl = d * float(sc[g]);
    const int q = dl != 0 ? clampi(nearest(x[i] / dl), -4, 3) + 4 : 4;  // 0..7
    b.qs[32 * h + l] |= uint8_t((q & 3) << (2 * j));
    if (q > 3) b.hmask[l] |= uint8_t(1 << (i / 32));
  }
}

// Packs 6-bit scales and mins of the 8 groups of a Q4_K/Q5_K block.
void pack_k4_scales(const int* sc, const int* m, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = uint8_t(sc[j]);
      s[j + 4] = uint8_t(m[j]);
    } else {
      s[j + 4] = uint8_t((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      s[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      s[j] |= uint8_t((m[j] >> 4) << 6);
    }
  }
}

template <typename Block, int kQMax>
void quant_q45_k(const float* x, Block& b) {
  float scale[8], mins[8];
  for (int g = 0; g < 8; ++g) fit_min_max(x + 32 * g, 32, kQMax, &scale[g], &mins[g]);
  int sc[8], m[8];
  b.d = quantize_scales(scale, 8, 63, sc);
  b.dmin = quantize_scales(mins, 8, 63, m);
  pack_k4_scales(sc, m, b.scales);
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  std::memset(b.qs, 0, sizeof(b.qs));
  if constexpr (kQMax == 31) std::memset(b.qh, 0, sizeof(b.qh));
  for (int g = 0; g < 8; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int q = round_asym(x[32 * g + l], d * float(sc[g]), dmin * float(m[g]), kQMax);
      b.qs[32 * (g / 2) + l] |= uint8_t((q & 0xF) << (4 * (g & 1)));
      if constexpr (kQMax == 31) b.qh[l] |= uint8_t((q >> 4) << g);
    }
  }
}

void quant_q6_k(const float* x, BlockQ6_K& b) {
  float scale[16];
  for (int g = 0; g < 16; ++g) scale[g] = signed_absmax(x + 16 * g, 16) / -32;
  int sc[16];
  b.d = quantize_signed_scales(scale, 16, -128, 127, sc);
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < 16; ++g) b.scales[g] = int8_t(sc[g]);
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < kQK; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const float dl = d * float(sc[8 * h + 2 * k + l / 16]);
    const int q = dl != 0 ? clampi(nearest(x[i] / dl), -32, 31) + 32 : 32;  // 0..63
    b.ql[64 * h + 32 * (k & 1) + l] |= uint8_t((q & 0xF) << (k < 2 ? 0 : 4));
    b.qh[32 * h + l] |= uint8_t((q >> 4) << (2 * k));
  }
}

// Index of the IQ4 level nearest to v.
int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(v - kIQ4NLValues[i]) < std::fabs(v - kIQ4NLValues[best])) best = i;
  return best;
}

void quant_iq4_nl(const float* x, BlockIQ4_NL& b) {
  b.d = f32_to_f16(signed_absmax(x, 32) / kIQ4NLValues[0]);
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    const int q0 = d != 0 ? nearest_iq4(x[j] / d) : 8;
    const int q1 = d != 0 ? nearest_iq4(x[j + 16] / d) : 8;
    b.qs[j] = uint8_t(q0 | (q1 << 4));
  }
}

void quant_iq4_xs(const float* x, BlockIQ4_XS& b) {
  float scale[8];
  for (int g = 0; g < 8; ++g) scale[g] = signed_absmax(x + 32 * g, 32) / kIQ4NLValues[0];
  int ls[8];
  b.d = quantize_signed_scales(scale, 8, -32, 31, ls);
  const float d = f16_to_f32(b.d);
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof(b.scales_l));
  for (int g = 0; g < 8; ++g) {
    const int s = ls[g] + 32;
    b.scales_l[g / 2] |= uint8_t((s & 0xF) << (4 * (g % 2)));
    b.scales_h = uint16_t(b.scales_h | ((s >> 4) << (2 * g)));
    const float dl = d * float(ls[g]);
    for (int j = 0; j < 16; ++j) {
      const int q0 = dl != 0 ? nearest_iq4(x[32 * g + j] / dl) : 8;
      const int q1 = dl != 0 ? nearest_iq4(x[32 * g + j + 16] / dl) : 8;
      b.qs[16 * g + j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

// ggml's quantize_row_mxfp4_ref: the shared exponent puts amax's binade at
// the top level's (12 * d = 1.5 * 2^floor(log2 amax)), each value takes the
// first level of least |level * d - x|. Where ggml's conversion of the
// exponent to uint8_t is undefined (amax below 2^-125 or infinite) it is
// clamped to 0 .. 254 here.
void quant_mxfp4(const float* x, BlockMXFP4& b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
  int e = 0;
  if (amax > 0.0f) {
    const float fe = std::floor(std::log2(amax)) - 2 + 127;
    e = fe < 0.0f ? 0 : (fe > 254.0f ? 254 : int(fe));
  }
  b.e = uint8_t(e);
  const float d = e8m0_half_to_f32(b.e);
  auto best = [d](float v) {
    int best_index = 0;
    float best_err = std::fabs(float(kMXFP4Values[0]) * d - v);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(float(kMXFP4Values[i]) * d - v);
      if (err < best_err) best_index = i, best_err = err;
    }
    return best_index;
  };
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(best(x[j]) | (best(x[j + 16]) << 4));
}

template <typename Block, void (*Fn)(const float*, Block&)>
void quant_blocks(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / Block::kValues; ++i) {
    Block b;
    Fn(src + i * Block::kValues, b);
    std::memcpy(dst + size_t(i) * sizeof(Block), &b, sizeof(Block));
  }
}

}  // namespace

void quantize_row_ref(DType type, const float* src, uint8_t* dst, int64_t n) {
  const auto& tr = traits(type);
  if (!tr.supported) fail("quantize: weight type ", tr.name, " is not supported");
  if (n < 0 || n % tr.block_size != 0)
    fail("quantize: ", n, " values is not a whole number of ", tr.name, " blocks of ",
         tr.block_size);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::Q4_0:
      return quant_blocks<BlockQ4_0, quant_q4_0>(src, dst, n);
    case DType::Q4_1:
      return quant_blocks<BlockQ4_1, quant_q4_1>(src, dst, n);
    case DType::Q5_0:
      return quant_blocks<BlockQ5_0, quant_q5_0>(src, dst, n);
    case DType::Q5_1:
      return quant_blocks<BlockQ5_1, quant_q5_1>(src, dst, n);
    case DType::Q8_0:
      return quant_blocks<BlockQ8_0, quant_q8_0>(src, dst, n);
    case DType::Q2_K:
      return quant_blocks<BlockQ2_K, quant_q2_k>(src, dst, n);
    case DType::Q3_K:
      return quant_blocks<BlockQ3_K, quant_q3_k>(src, dst, n);
    case DType::Q4_K:
      return quant_blocks<BlockQ4_K, quant_q45_k<BlockQ4_K, 15>>(src, dst, n);
    case DType::Q5_K:
      return quant_blocks<BlockQ5_K, quant_q45_k<BlockQ5_K, 31>>(src, dst, n);
    case DType::Q6_K:
      return quant_blocks<BlockQ6_K, quant_q6_k>(src, dst, n);
    case DType::IQ4_NL:
      return quant_blocks<BlockIQ4_NL, quant_iq4_nl>(src, dst, n);
    case DType::IQ4_XS:
      return quant_blocks<BlockIQ4_XS, quant_iq4_xs>(src, dst, n);
    case DType::MXFP4:
      return quant_blocks<BlockMXFP4, quant_mxfp4>(src, dst, n);
    default:
      break;
  }
  fail("internal error: no reference quantizer for ", tr.name);
}

}  // namespace tkv
