#include "model/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/ops.cc"
// Order matters (foreach_target first, math-inl after highway):
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace tkv::model::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of x[i]^2 with two vector accumulators (hides the FMA latency).
float SumOfSquares(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  auto acc0 = hn::Zero(d);
  auto acc1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a = hn::LoadU(d, x + i);
    const auto b = hn::LoadU(d, x + i + N);
    acc0 = hn::MulAdd(a, a, acc0);
    acc1 = hn::MulAdd(b, b, acc1);
  }
  for (; i + N <= n; i += N) {
    const auto a = hn::LoadU(d, x + i);
    acc0 = hn::MulAdd(a, a, acc0);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

// y[i] = x[i] * scale * w[i]
void ScaleMul(const float* x, const float* HWY_RESTRICT w, float scale, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vs = hn::Set(d, scale);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vs), hn::LoadU(d, w + i)), d, y + i);
  }
  for (; i < n; ++i) y[i] = x[i] * scale * w[i];
}

// gate[i] = silu(gate[i]) * up[i]. sigmoid(g) is built from e = exp(-|g|),
// which never overflows: sigmoid = 1/(1+e) for g >= 0, e/(1+e) otherwise.
void SiluMul(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto one = hn::Set(d, 1.0f);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(d, gate + i);
    const auto e = hn::Exp(d, hn::Neg(hn::Abs(g)));
    const auto num = hn::IfThenElse(hn::Ge(g, hn::Zero(d)), one, e);
    const auto sig = hn::Div(num, hn::Add(one, e));
    hn::StoreU(hn::Mul(hn::Mul(g, sig), hn::LoadU(d, up + i)), d, gate + i);
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float e = std::exp(-std::fabs(g));
    const float sig = (g >= 0.0f ? 1.0f : e) / (1.0f + e);
    gate[i] = g * sig * up[i];
  }
}

void Add(float* HWY_RESTRICT y, const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
  }
  for (; i < n; ++i) y[i] += x[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv::model::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::model::ops {

HWY_EXPORT(SumOfSquares);
HWY_EXPORT(ScaleMul);
HWY_EXPORT(SiluMul);
HWY_EXPORT(Add);

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const float ss = HWY_DYNAMIC_DISPATCH(SumOfSquares)(x, n);
  const float scale = 1.0f / std::sqrt(ss / float(n) + eps);
  if (w == nullptr) {  // ggml_rms_norm without a weight
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    return;
  }
  HWY_DYNAMIC_DISPATCH(ScaleMul)(x, w, scale, y, n);
}

void rmsnorm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                  ThreadPool& pool) {
  // A parallel region costs microseconds: worth it for a prefill chunk, not
  // for one token's 32 per-head norms.
  if (rows * n < (int64_t(1) << 15)) {
    for (int64_t r = 0; r < rows; ++r) rmsnorm(x + r * n, w, y + r * n, n, eps);
    return;
  }
  pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) rmsnorm(x + r * n, w, y + r * n, n, eps);
  });
}

void silu_mul(float* gate, const float* up, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, n);
}

void add(float* y, const float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Add)(y, x, n);
}

void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) add(y + r * n, bias, n);
}

void gated_activation_rows(GatedActivation act, float* gate, const float* up, int rows, int n_ff,
                           ThreadPool& pool) {
  const auto row = [&](int64_t r) {
    float* g = gate + size_t(r) * size_t(n_ff);
    const float* u = up + size_t(r) * size_t(n_ff);
    switch (act) {
      case GatedActivation::SwiGlu:
        ops::silu_mul(g, u, n_ff);
        break;
      case GatedActivation::SwiGluOai:  // ggml_swiglu_oai, alpha 1.702, limit 7
        for (int i = 0; i < n_ff; ++i) {
          const float x = std::min(g[i], 7.0f);
          const float y = std::clamp(u[i], -7.0f, 7.0f);
          g[i] = x / (1.0f + std::exp(1.702f * -x)) * (y + 1.0f);
        }
        break;
      case GatedActivation::GeGlu:  // ggml_gelu (tanh form) times up
        for (int i = 0; i < n_ff; ++i) {
          const float x = g[i];
          g[i] =
              0.5f * x * (1.0f + std::tanh(0.7978845608f * x * (1.0f + 0.044715f * x * x))) * u[i];
        }
        break;
    }
  };
  // Row by row (a row's bits must not depend on how rows are split).
  if (rows == 1) return row(0);
  pool.parallel_for(rows, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) row(r);
  });
}

namespace {
// M-RoPE: whether pair i rotates by the fourth position component, which
// is 0 for text (ggml_mrope_cache_init's choice of theta_e).
bool fourth_section(const RopeSpec& s, int i) {
  const auto& n = s.sections;
  const int total = n[0] + n[1] + n[2] + n[3];
  if (total == 0) return false;
  const int sector = i % total;
  if (!s.interleaved) return sector >= n[0] + n[1] + n[2];
  return !((sector % 3 == 1 && sector < 3 * n[1]) || (sector % 3 == 2 && sector < 3 * n[2]) ||
           (sector % 3 == 0 && sector < 3 * n[0]));
}
}  // namespace

RopeFrequencies RopeFrequencies::make(const RopeSpec& spec, std::span<const float> freq_factors) {
  RopeFrequencies r;
  r.style = spec.style;
  r.n_rot = spec.n_rot;
  const int pairs = spec.n_rot / 2;
  TKV_CHECK(freq_factors.empty() || int(freq_factors.size()) == pairs);
  r.inv_freq.resize(pairs);
  r.mscale = spec.attn_factor;
  // YaRN's correction dims, in float as ggml_rope_yarn_corr_dims (their
  // floor and ceil decide which pairs blend).
  float corr_lo = 0.0f, corr_hi = 0.0f;
  if (spec.ext_factor != 0.0f) {
    const auto corr_dim = [&](float beta) {
      return float(spec.n_rot) *
             std::log(float(spec.orig_ctx) / (beta * 2.0f * float(3.14159265358979323846))) /
             (2.0f * std::log(spec.base));
    };
    corr_lo = std::max(0.0f, std::floor(corr_dim(32.0f)));
    corr_hi = std::min(float(spec.n_rot - 1), std::ceil(corr_dim(1.0f)));
    r.mscale *= 1.0f + 0.1f * std::log(1.0f / spec.freq_scale);
  }
  for (int i = 0; i < pairs; ++i) {
    double f = std::pow(double(spec.base), -2.0 * i / double(spec.n_rot));
    if (!freq_factors.empty()) f /= double(freq_factors[i]);
    double scale = double(spec.freq_scale);
    if (spec.ext_factor != 0.0f) {  // rope_yarn_ramp: 1 below corr_lo, 0 above corr_hi
      const float y = (float(i) - corr_lo) / std::max(0.001f, corr_hi - corr_lo);
      const double ramp = double((1.0f - std::min(1.0f, std::max(0.0f, y))) * spec.ext_factor);
      scale = scale * (1.0 - ramp) + ramp;
    }
    r.inv_freq[i] = fourth_section(spec, i) ? 0.0 : f * scale;
  }
  return r;
}

RopeFrequencies RopeFrequencies::make(const ModelConfig& config,
                                      std::span<const float> freq_factors) {
  return make(config.rope_spec(!freq_factors.empty()), freq_factors);
}

void rope_angles(const RopeFrequencies& rope, int64_t pos0, int64_t T, float* cos_out,
                 float* sin_out) {
  const int64_t pairs = rope.n_rot / 2;
  for (int64_t t = 0; t < T; ++t) {
    const double pos = double(pos0 + t);
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = pos * rope.inv_freq[i];
      cos_out[t * pairs + i] = float(std::cos(angle)) * rope.mscale;
      sin_out[t * pairs + i] = float(std::sin(angle)) * rope.mscale;
    }
  }
}

void rope_apply(const RopeFrequencies& rope, float* x, int n_heads, int head_dim,
                const float* cos_row, const float* sin_row) {
  const int pairs = rope.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    if (rope.style == RopeStyle::Normal) {
      for (int i = 0; i < pairs; ++i) {  // pairs (2i, 2i+1)
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cos_row[i] - b * sin_row[i];
        v[2 * i + 1] = a * sin_row[i] + b * cos_row[i];
      }
    } else {
      for (int i = 0; i < pairs; ++i) {  // pairs (i, i + n_rot/2)
        const float a = v[i], b = v[i + pairs];
        v[i] = a * cos_row[i] - b * sin_row[i];
        v[i + pairs] = a * sin_row[i] + b * cos_row[i];
      }
    }
  }
}

}  // namespace tkv::model::ops
#endif  // HWY_ONCE
