// Scalar dequantization, one function per type, written after ggml's
// dequantize_row_* so that every value is the same f32 ggml produces.
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/f16.h"
#include "tensor/blocks.h"
#include "tensor/reference.h"

namespace tkv {

namespace {

template <typename Block>
const Block* blocks_of(const uint8_t* src) {
  return reinterpret_cast<const Block*>(src);
}

void deq_q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = float((b.qs[j] & 0xF) - 8) * d;
    y[j + 16] = float((b.qs[j] >> 4) - 8) * d;
  }
}

void deq_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < 16; ++j) {
    y[j] = float(b.qs[j] & 0xF) * d + m;
    y[j + 16] = float(b.qs[j] >> 4) * d + m;
  }
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void deq_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < 16; ++j) {
    const int hi0 = int((qh >> j) & 1) << 4;
    const int hi1 = int((qh >> (j + 16)) & 1) << 4;
    y[j] = float(((b.qs[j] & 0xF) | hi0) - 16) * d;
    y[j + 16] = float(((b.qs[j] >> 4) | hi1) - 16) * d;
  }
}

void deq_q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < 16; ++j) {
    const int hi0 = int((qh >> j) & 1) << 4;
    const int hi1 = int((qh >> (j + 16)) & 1) << 4;
    y[j] = float((b.qs[j] & 0xF) | hi0) * d + m;
    y[j + 16] = float((b.qs[j] >> 4) | hi1) * d + m;
  }
}

void deq_q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 32; ++j) y[j] = float(b.qs[j]) * d;
}

void deq_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int i = 0; i < kQK; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const int g = 8 * h + 2 * j + l / 16;
    const int q = (b.qs[32 * h + l] >> (2 * j)) & 3;
    const float dl = d * float(b.scales[g] & 0xF);
    const float ml = dmin * float(b.scales[g] >> 4);
    y[i] = dl * float(q) - ml;
  }
}

// Signed scale of group g of a Q3_K block (see blocks.h).
int q3_k_scale(const BlockQ3_K& b, int g) {
  const int low = g < 8 ? (b.scales[g] & 0xF) : (b.scales[g - 8] >> 4);
  const int high = (b.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

void deq_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < kQK; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const int g = 8 * h + 2 * j + l / 16;
    const int low = (b.qs[32 * h + l] >> (2 * j)) & 3;
    const int q = low - ((b.hmask[l] >> (i / 32)) & 1 ? 0 : 4);
    const float dl = d * float(q3_k_scale(b, g));
    y[i] = dl * float(q);
  }
}

void deq_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    k4_scale_min(g, b.scales, &sc, &m);
    const float dl = d * float(sc), ml = dmin * float(m);
    const uint8_t* q = b.qs + 32 * (g / 2);
    for (int l = 0; l < 32; ++l) {
      const int v = (g & 1) ? (q[l] >> 4) : (q[l] & 0xF);
      y[32 * g + l] = dl * float(v) - ml;
    }
  }
}

void deq_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    k4_scale_min(g, b.scales, &sc, &m);
    const float dl = d * float(sc), ml = dmin * float(m);
    const uint8_t* q = b.qs + 32 * (g / 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((g & 1) ? (q[l] >> 4) : (q[l] & 0xF)) + (((b.qh[l] >> g) & 1) << 4);
      y[32 * g + l] = dl * float(v) - ml;
    }
  }
}

void deq_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < kQK; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const uint8_t ql = b.ql[64 * h + 32 * (k & 1) + l];
    const int low = k < 2 ? (ql & 0xF) : (ql >> 4);
    const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
    const int q = (low | (high << 4)) - 32;
    y[i] = d * float(b.scales[8 * h + 2 * k + l / 16]) * float(q);
  }
}

void deq_iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIQ4NLValues[b.qs[j] & 0xF]);
    y[j + 16] = d * float(kIQ4NLValues[b.qs[j] >> 4]);
  }
}

void deq_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < 8; ++g) {
    const int ls =
        ((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((b.scales_h >> (2 * g)) & 3) << 4);
    const float dl = d * float(ls - 32);
    const uint8_t* q = b.qs + 16 * g;
    for (int j = 0; j < 16; ++j) {
      y[32 * g + j] = dl * float(kIQ4NLValues[q[j] & 0xF]);
      y[32 * g + j + 16] = dl * float(kIQ4NLValues[q[j] >> 4]);
    }
  }
}

void deq_mxfp4(const BlockMXFP4& b, float* y) {
  const float d = e8m0_half_to_f32(b.e);
  for (int j = 0; j < 16; ++j) {
    y[j] = float(kMXFP4Values[b.qs[j] & 0xF]) * d;
    y[j + 16] = float(kMXFP4Values[b.qs[j] >> 4]) * d;
  }
}

template <typename Block, void (*Fn)(const Block&, float*)>
void deq_blocks(const uint8_t* src, float* dst, int64_t n) {
  const Block* b = blocks_of<Block>(src);
  for (int64_t i = 0; i < n / Block::kValues; ++i) Fn(b[i], dst + i * Block::kValues);
}

}  // namespace

void dequantize_row_ref(DType type, const uint8_t* src, float* dst, int64_t n) {
  const auto& tr = traits(type);
  if (!tr.supported) fail("dequantize: weight type ", tr.name, " is not supported");
  if (n < 0 || n % tr.block_size != 0)
    fail("dequantize: ", n, " values is not a whole number of ", tr.name, " blocks of ",
         tr.block_size);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case DType::Q4_0:
      return deq_blocks<BlockQ4_0, deq_q4_0>(src, dst, n);
    case DType::Q4_1:
      return deq_blocks<BlockQ4_1, deq_q4_1>(src, dst, n);
    case DType::Q5_0:
      return deq_blocks<BlockQ5_0, deq_q5_0>(src, dst, n);
    case DType::Q5_1:
      return deq_blocks<BlockQ5_1, deq_q5_1>(src, dst, n);
    case DType::Q8_0:
      return deq_blocks<BlockQ8_0, deq_q8_0>(src, dst, n);
    case DType::Q2_K:
      return deq_blocks<BlockQ2_K, deq_q2_k>(src, dst, n);
    case DType::Q3_K:
      return deq_blocks<BlockQ3_K, deq_q3_k>(src, dst, n);
    case DType::Q4_K:
      return deq_blocks<BlockQ4_K, deq_q4_k>(src, dst, n);
    case DType::Q5_K:
      return deq_blocks<BlockQ5_K, deq_q5_k>(src, dst, n);
    case DType::Q6_K:
      return deq_blocks<BlockQ6_K, deq_q6_k>(src, dst, n);
    case DType::IQ4_NL:
      return deq_blocks<BlockIQ4_NL, deq_iq4_nl>(src, dst, n);
    case DType::IQ4_XS:
      return deq_blocks<BlockIQ4_XS, deq_iq4_xs>(src, dst, n);
    case DType::MXFP4:
      return deq_blocks<BlockMXFP4, deq_mxfp4>(src, dst, n);
    default:
      break;
  }
  fail("internal error: no reference dequantizer for ", tr.name);
}

void matvec_ref(DType type, const uint8_t* w, int64_t rows, int64_t cols, const float* x,
                float* y) {
  matmul_ref(type, w, rows, cols, x, 1, y);
}

void matmul_ref(DType type, const uint8_t* w, int64_t rows, int64_t cols, const float* x, int64_t n,
                float* y) {
  const size_t rb = row_bytes(type, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_ref(type, w + size_t(r) * rb, row.data(), cols);
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * cols;
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += double(row[size_t(k)]) * double(xi[k]);
      y[i * rows + r] = float(acc);
    }
  }
}

}  // namespace tkv
