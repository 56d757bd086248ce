// Activation quantization of the integer-dot kernels (act_blocks.h): the
// formats and the scalar reference that act_quant_simd.cc's Highway version
// equals byte for byte.
#include "tensor/kernels/act_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tkv::kernels {

ActFormat act_format(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::MXFP4:
      return ActFormat::kQ8x32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return ActFormat::kQ8x256;
    default:
      return ActFormat::kNone;
  }
}

size_t act_row_bytes(ActFormat format, int64_t cols) {
  switch (format) {
    case ActFormat::kQ8x32:
      return size_t(cols / 32) * sizeof(ActBlock32);
    case ActFormat::kQ8x256:
      return size_t(cols / 256) * sizeof(ActBlock256);
    case ActFormat::kNone:
      break;
  }
  return 0;
}

namespace {

// d and q of one block of K values (see act_blocks.h); returns sum of q.
template <int K>
int quantize_block(const float* x, float* d, int8_t* q) {
  float amax = 0.0f;
  for (int k = 0; k < K; ++k) {
    if (std::isnan(x[k])) {
      // The scale carries the NaN to the outputs, as on the float path.
      *d = std::numeric_limits<float>::quiet_NaN();
      std::memset(q, 0, K);
      return 0;
    }
    amax = std::max(amax, std::fabs(x[k]));
  }
  *d = K == 32 ? act_scale32(amax) : amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  // v + 1.5 * 2^23 - 1.5 * 2^23 rounds |v| <= 2^22 to the nearest integer,
  // ties to even; |x * inv| <= 127 up to one rounding, then clamped. An
  // infinite x (inv = 0) gives NaN here, whose quant is 0.
  constexpr float kMagic = 12582912.0f;
  int sum = 0;
  for (int k = 0; k < K; ++k) {
    float v = (x[k] * inv + kMagic) - kMagic;
    v = v != v ? 0.0f : std::clamp(v, -127.0f, 127.0f);
    q[k] = int8_t(v);
    sum += q[k];
  }
  return sum;
}

}  // namespace

void quantize_act_scalar(ActFormat format, const float* x, int64_t cols, uint8_t* dst) {
  if (format == ActFormat::kQ8x32) {
    ActBlock32* b = reinterpret_cast<ActBlock32*>(dst);
    for (int64_t i = 0; i < cols / 32; ++i, x += 32) {
      b[i].sum = int16_t(quantize_block<32>(x, &b[i].d, b[i].q));
      b[i].pad = 0;
    }
  } else if (format == ActFormat::kQ8x256) {
    ActBlock256* b = reinterpret_cast<ActBlock256*>(dst);
    for (int64_t i = 0; i < cols / 256; ++i, x += 256) {
      quantize_block<256>(x, &b[i].d, b[i].q);
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int k = 0; k < 16; ++k) s += b[i].q[16 * g + k];
        b[i].bsums[g] = int16_t(s);
      }
      for (int k = 0; k < 8; ++k)
        b[i].psums[k] = int16_t(b[i].bsums[2 * k] + b[i].bsums[2 * k + 1]);
      std::memset(b[i].pad, 0, sizeof(b[i].pad));
    }
  }
}

void quantize_act(ActFormat format, const float* x, int64_t cols, uint8_t* dst) {
  quantize_act_simd(format, x, cols, dst);
}

}  // namespace tkv::kernels
