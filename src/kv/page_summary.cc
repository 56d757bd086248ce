#include "kv/page_summary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tkv::kv {

namespace {

constexpr float kCodeMax = 127.0f;

// min/max (head_dim floats each) -> scale + outward-rounded int8 codes.
void quantize_outward(const float* lo, const float* hi, int head_dim, uint8_t* summary) {
  float absmax = 0;
  for (int c = 0; c < head_dim; ++c)
    absmax = std::max({absmax, std::fabs(lo[c]), std::fabs(hi[c])});
  // A little head room so that rounding outward never needs a code past 127.
  const float scale = absmax > 0 ? absmax / (kCodeMax - 1.0f) : 1.0f;
  std::memcpy(summary, &scale, sizeof scale);
  int8_t* mn = reinterpret_cast<int8_t*>(summary + sizeof(float));
  int8_t* mx = mn + head_dim;
  for (int c = 0; c < head_dim; ++c) {
    float a = std::floor(lo[c] / scale), b = std::ceil(hi[c] / scale);
    // The division rounds; step outward until the dequantized bound covers.
    while (a * scale > lo[c]) a -= 1.0f;
    while (b * scale < hi[c]) b += 1.0f;
    mn[c] = int8_t(std::clamp(a, -kCodeMax, kCodeMax));
    mx[c] = int8_t(std::clamp(b, -kCodeMax, kCodeMax));
  }
}

}  // namespace

void summarize_vectors(const float* keys, int n, int head_dim, uint8_t* summary) {
  float lo[1024], hi[1024];
  std::fill(lo, lo + head_dim, std::numeric_limits<float>::infinity());
  std::fill(hi, hi + head_dim, -std::numeric_limits<float>::infinity());
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < head_dim; ++c) {
      const float x = keys[size_t(t) * head_dim + c];
      lo[c] = std::min(lo[c], x);
      hi[c] = std::max(hi[c], x);
    }
  quantize_outward(lo, hi, head_dim, summary);
}

void summarize_keys(const Codec& k_codec, const uint8_t* k_page, int page_tokens, int filled,
                    uint8_t* summary, float* work) {
  const int hd = k_codec.head_dim();
  float lo[1024], hi[1024];
  std::fill(lo, lo + hd, std::numeric_limits<float>::infinity());
  std::fill(hi, hi + hd, -std::numeric_limits<float>::infinity());
  for (int t = 0; t < filled; ++t) {
    k_codec.decode(k_page, page_tokens, t, work);
    for (int c = 0; c < hd; ++c) {
      lo[c] = std::min(lo[c], work[c]);
      hi[c] = std::max(hi[c], work[c]);
    }
  }
  quantize_outward(lo, hi, hd, summary);
}

float summary_bound(const float* q, const uint8_t* summary, int head_dim) {
  float scale;
  std::memcpy(&scale, summary, sizeof scale);
  const int8_t* mn = reinterpret_cast<const int8_t*>(summary + sizeof(float));
  const int8_t* mx = mn + head_dim;
  // Eight independent sums: the compiler keeps them in one vector register.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int c = 0;
  for (; c + 8 <= head_dim; c += 8)
    for (int i = 0; i < 8; ++i)
      acc[i] += std::max(q[c + i] * float(mn[c + i]), q[c + i] * float(mx[c + i]));
  for (; c < head_dim; ++c) acc[0] += std::max(q[c] * float(mn[c]), q[c] * float(mx[c]));
  float s = 0;
  for (float a : acc) s += a;
  return s * scale;
}

}  // namespace tkv::kv
