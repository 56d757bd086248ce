// The mixture-of-experts FFN (model/moe.h) against a plain double-precision
// reading of llama.cpp's build_moe_ffn, for every variant the MoeSpec
// describes: gating, renormalization, scale, activations, biases, per-expert
// scales and the gated shared expert.
#include "model/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "tensor/dtype.h"

namespace tkv::model {
namespace {

constexpr int kEmbd = 64;

// A matrix of f32 values that outlives its WeightMatrix.
struct Matrix {
  std::vector<float> v;
  WeightMatrix w;
  Matrix(int rows, int cols, std::mt19937& rng, float scale = 0.2f) : v(size_t(rows) * cols) {
    std::uniform_real_distribution<float> d(-scale, scale);
    for (float& x : v) x = d(rng);
    w = make_weight(DType::F32, v.data(), rows, cols);
  }
  double dot(int r, const std::vector<double>& x) const {
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += double(v[size_t(r * w.cols + c)]) * x[size_t(c)];
    return s;
  }
  std::vector<double> mul(const std::vector<double>& x) const {
    std::vector<double> y(size_t(w.rows));
    for (int r = 0; r < int(w.rows); ++r) y[size_t(r)] = dot(r, x);
    return y;
  }
};

std::vector<float> random_values(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Experts, router and shared expert of one test layer.
struct Layer {
  MoeSpec spec;
  std::vector<Matrix> mats;  // owns the values
  MoeWeights w;

  Layer(const MoeSpec& s, std::mt19937& rng) : spec(s) {
    mats.reserve(size_t(3 * s.n_experts + 5));
    const auto add = [&](int rows, int cols) -> const WeightMatrix& {
      mats.emplace_back(rows, cols, rng);
      return mats.back().w;
    };
    w.router = add(s.n_experts, kEmbd);
    for (int e = 0; e < s.n_experts; ++e) {
      w.gate.push_back(add(s.n_ff, kEmbd));
      w.up.push_back(add(s.n_ff, kEmbd));
      w.down.push_back(add(kEmbd, s.n_ff));
    }
    if (s.router_bias) w.router_bias = random_values(size_t(s.n_experts), rng, 0.5f);
    if (s.expert_bias) {
      w.gate_bias = random_values(size_t(s.n_experts * s.n_ff), rng, 0.1f);
      w.up_bias = random_values(size_t(s.n_experts * s.n_ff), rng, 0.1f);
      w.down_bias = random_values(size_t(s.n_experts * kEmbd), rng, 0.1f);
    }
    if (s.n_ff_shared > 0) {
      w.shared_gate = add(s.n_ff_shared, kEmbd);
      w.shared_up = add(s.n_ff_shared, kEmbd);
      w.shared_down = add(kEmbd, s.n_ff_shared);
      if (s.shared_gate) w.shared_router = add(1, kEmbd);
    }
  }
  const Matrix& of(const WeightMatrix& m) const {
    for (const Matrix& x : mats)
      if (x.w.data == m.data) return x;
    ADD_FAILURE() << "no such matrix";
    return mats[0];
  }
};

double act(GatedActivation a, double g, double u) {
  switch (a) {
    case GatedActivation::SwiGlu:
      return g / (1 + std::exp(-g)) * u;
    case GatedActivation::SwiGluOai: {
      const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
      return x / (1 + std::exp(-1.702 * x)) * (y + 1);
    }
    case GatedActivation::GeGlu:
      return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * g * (1 + 0.044715 * g * g))) * u;
  }
  return 0;
}

// llama.cpp's build_moe_ffn for one row, in double.
std::vector<double> reference(const Layer& L, const std::vector<double>& h) {
  const MoeSpec& s = L.spec;
  const MoeWeights& w = L.w;
  std::vector<double> logits = L.of(w.router).mul(h);
  for (size_t e = 0; e < w.router_bias.size(); ++e) logits[e] += w.router_bias[e];
  std::vector<double> p = logits;
  const auto softmax = [](std::vector<double>& v) {
    const double mx = *std::max_element(v.begin(), v.end());
    double sum = 0;
    for (double& x : v) sum += (x = std::exp(x - mx));
    for (double& x : v) x /= sum;
  };
  if (s.gating == MoeGating::Softmax) softmax(p);
  std::vector<int> idx(p.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
  idx.resize(size_t(s.n_used));
  std::vector<double> wt;
  for (int e : idx) wt.push_back(p[size_t(e)]);
  if (s.gating == MoeGating::SoftmaxChosen) softmax(wt);
  if (s.normalize) {
    const double sum = std::max(std::accumulate(wt.begin(), wt.end(), 0.0), 6.103515625e-5);
    for (double& x : wt) x /= sum;
  }
  for (double& x : wt) x *= s.weights_scale;
  std::vector<double> out(h.size(), 0.0);
  for (size_t k = 0; k < idx.size(); ++k) {
    const int e = idx[k];
    std::vector<double> g = L.of(w.gate[size_t(e)]).mul(h), u = L.of(w.up[size_t(e)]).mul(h);
    for (int i = 0; i < s.n_ff; ++i) {
      if (!w.gate_bias.empty()) g[size_t(i)] += w.gate_bias[size_t(e * s.n_ff + i)];
      if (!w.up_bias.empty()) u[size_t(i)] += w.up_bias[size_t(e * s.n_ff + i)];
      g[size_t(i)] = act(s.activation, g[size_t(i)], u[size_t(i)]);
    }
    std::vector<double> d = L.of(w.down[size_t(e)]).mul(g);
    for (int i = 0; i < kEmbd; ++i) {
      if (!w.down_scale.empty()) d[size_t(i)] *= w.down_scale[size_t(e)];
      if (!w.down_bias.empty()) d[size_t(i)] += w.down_bias[size_t(e * kEmbd + i)];
      out[size_t(i)] += wt[k] * d[size_t(i)];
    }
  }
  if (s.n_ff_shared > 0) {
    std::vector<double> g = L.of(w.shared_gate).mul(h), u = L.of(w.shared_up).mul(h);
    for (size_t i = 0; i < g.size(); ++i) g[i] = act(GatedActivation::SwiGlu, g[i], u[i]);
    std::vector<double> d = L.of(w.shared_down).mul(g);
    const double gate = s.shared_gate ? 1 / (1 + std::exp(-L.of(w.shared_router).dot(0, h))) : 1;
    for (size_t i = 0; i < d.size(); ++i) out[i] += gate * d[i];
  }
  return out;
}

// moe_ffn over `rows` rows (the first n_exact on the exact kernels, the
// rest on the GEMM) against the reference, row by row.
void check(const Layer& L, int rows, int n_exact, int max_rows, const char* what) {
  std::mt19937 rng(11);
  const std::vector<float> h = random_values(size_t(rows) * kEmbd, rng, 1.0f);
  std::vector<float> base = random_values(size_t(rows) * kEmbd, rng, 1.0f);
  std::vector<float> y = base;
  MoeScratch scratch;
  ThreadPool pool(2);
  moe_ffn(L.spec, L.w, h.data(), nullptr, n_exact, rows, max_rows, y.data(), scratch, pool);
  for (int r = 0; r < rows; ++r) {
    const std::vector<double> hr(h.begin() + r * kEmbd, h.begin() + (r + 1) * kEmbd);
    const std::vector<double> want = reference(L, hr);
    for (int i = 0; i < kEmbd; ++i)
      ASSERT_NEAR(y[size_t(r * kEmbd + i)] - base[size_t(r * kEmbd + i)], want[size_t(i)], 2e-4)
          << what << " row " << r << " value " << i;
  }
}

MoeSpec spec(int n, int k, int ff) {
  MoeSpec s;
  s.n_experts = n;
  s.n_used = k;
  s.n_ff = ff;
  return s;
}

TEST(Moe, SoftmaxTopKRenormalizedMatchesLlamaCpp) {  // qwen3moe, Mixtral
  std::mt19937 rng(1);
  MoeSpec s = spec(8, 2, 32);
  s.normalize = true;
  const Layer L(s, rng);
  check(L, 1, 1, 256, "one decode row");
  check(L, 40, 5, 256, "5 exact rows then 35 GEMM rows");
  check(L, 40, 40, 7, "exact rows in calls of at most 7");
}

TEST(Moe, ScaleWithoutRenormalization) {
  std::mt19937 rng(2);
  MoeSpec s = spec(16, 4, 32);
  s.weights_scale = 2.5f;
  const Layer L(s, rng);
  check(L, 21, 3, 256, "softmax weights times 2.5");
}

TEST(Moe, GptOssExpertsMatchLlamaCpp) {  // top-k of the logits, softmax over those
  std::mt19937 rng(3);
  MoeSpec s = spec(8, 4, 32);
  s.gating = MoeGating::SoftmaxChosen;
  s.activation = GatedActivation::SwiGluOai;
  s.router_bias = s.expert_bias = true;
  Layer L(s, rng);
  // Inputs large enough that the clamps at +-7 bite.
  for (auto& m : L.mats)
    for (float& v : m.v) v *= 8.0f;
  check(L, 19, 2, 256, "gpt-oss");
}

TEST(Moe, GeluExpertsWithPerExpertScales) {  // Gemma 4's experts
  std::mt19937 rng(4);
  MoeSpec s = spec(8, 2, 32);
  s.activation = GatedActivation::GeGlu;
  s.normalize = true;
  Layer L(s, rng);
  L.w.down_scale = random_values(8, rng, 2.0f);
  check(L, 18, 1, 256, "GeGLU with down scales");
}

TEST(Moe, SigmoidGatedSharedExpert) {  // qwen35moe
  std::mt19937 rng(5);
  MoeSpec s = spec(8, 2, 32);
  s.normalize = true;
  s.n_ff_shared = 48;
  s.shared_gate = true;
  const Layer L(s, rng);
  check(L, 20, 4, 8, "shared expert, calls of 8 rows");
}

// route(): ggml's softmax then top-k by probability, largest first, ties
// to the lower index; weights renormalized with the sum clamped at 2^-14.
TEST(Moe, RouteRanksAndNormalizes) {
  MoeSpec s = spec(4, 2, 1);
  s.normalize = true;
  const float logits[8] = {0.0f, 2.0f, 1.0f, 2.0f, -1.0f, -1.0f, -1.0f, 3.0f};
  int32_t chosen[4];
  float w[4];
  RouteScratch scratch;
  route(s, logits, 2, chosen, w, scratch);
  EXPECT_EQ(chosen[0], 1);
  EXPECT_EQ(chosen[1], 3);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);
  EXPECT_EQ(chosen[2], 3);
  EXPECT_EQ(chosen[3], 0);
  EXPECT_FLOAT_EQ(w[2] + w[3], 1.0f);
  s.normalize = false;
  s.gating = MoeGating::SoftmaxChosen;
  route(s, logits, 1, chosen, w, scratch);
  EXPECT_FLOAT_EQ(w[0], 0.5f);  // softmax over two equal logits
}

// The bytes a call streams: each chosen expert's three matrices once,
// however many rows chose it; the experts no row chose, never.
TEST(Moe, CountsTheExpertBytesItReads) {
  std::mt19937 rng(8);
  MoeSpec s = spec(16, 4, 32);
  const Layer L(s, rng);
  const uint64_t per_expert =
      L.w.gate[0].total_bytes() + L.w.up[0].total_bytes() + L.w.down[0].total_bytes();
  ThreadPool pool(2);
  MoeScratch scratch;
  const std::vector<float> h = random_values(size_t(2) * kEmbd, rng, 1.0f);
  std::vector<float> y(h.size(), 0.0f);
  moe_ffn(s, L.w, h.data(), nullptr, 1, 1, 256, y.data(), scratch, pool);
  EXPECT_EQ(scratch.expert_bytes_read, 4 * per_expert);
  // The same row twice: the same four experts, each streamed once.
  const std::vector<float> twice = {h.begin(), h.begin() + kEmbd};
  std::vector<float> both(twice);
  both.insert(both.end(), twice.begin(), twice.end());
  moe_ffn(s, L.w, both.data(), nullptr, 2, 2, 256, y.data(), scratch, pool);
  EXPECT_EQ(scratch.expert_bytes_read, 8 * per_expert);
}

// A row's output is the same alone as among others, exact or GEMM.
TEST(Moe, RowsAreBatchInvariant) {
  std::mt19937 rng(6);
  MoeSpec s = spec(16, 4, 64);
  s.normalize = true;
  const Layer L(s, rng);
  const std::vector<float> h = random_values(size_t(30) * kEmbd, rng, 1.0f);
  ThreadPool pool(2);
  MoeScratch scratch;
  std::vector<float> all(h.size(), 0.0f);
  moe_ffn(s, L.w, h.data(), nullptr, 10, 30, 256, all.data(), scratch, pool);
  for (int r : {0, 9}) {  // exact rows alone
    std::vector<float> one(kEmbd, 0.0f);
    moe_ffn(s, L.w, h.data() + r * kEmbd, nullptr, 1, 1, 256, one.data(), scratch, pool);
    for (int i = 0; i < kEmbd; ++i) ASSERT_EQ(one[size_t(i)], all[size_t(r * kEmbd + i)]) << r;
  }
  std::vector<float> gemm(size_t(20) * kEmbd, 0.0f);  // the GEMM rows without the exact ones
  moe_ffn(s, L.w, h.data() + 10 * kEmbd, nullptr, 0, 20, 256, gemm.data(), scratch, pool);
  for (size_t i = 0; i < gemm.size(); ++i) ASSERT_EQ(gemm[i], all[10 * kEmbd + i]) << i;
}

// Experts of real weight types at widths that a decode step on many
// threads cuts into several pieces of rows, the last one short.
struct TypedLayer {
  static constexpr int kE = 256;
  MoeSpec spec;
  std::vector<std::vector<uint8_t>> bytes;  // owns the experts' bytes
  std::vector<float> router;
  MoeWeights w;

  // gate and up of `up_type`, down of `down_type`, spec.n_ff wide; F16
  // matrices in row blocks where this machine prefers them (as the model
  // loads them).
  TypedLayer(const MoeSpec& s, DType up_type, DType down_type, std::mt19937& rng) : spec(s) {
    router = random_values(size_t(s.n_experts) * kE, rng, 0.2f);
    w.router = make_weight(DType::F32, router.data(), s.n_experts, kE);
    bytes.reserve(size_t(3 * s.n_experts));
    ThreadPool pool(1);
    const auto add = [&](DType type, int rows, int cols) {
      const std::vector<float> v = random_values(size_t(rows) * size_t(cols), rng, 0.2f);
      const size_t rb = row_bytes(type, cols);
      std::vector<uint8_t>& b = bytes.emplace_back(rb * size_t(rows));
      for (int r = 0; r < rows; ++r)
        quantize_row(type, v.data() + size_t(r) * size_t(cols), b.data() + size_t(r) * rb, cols);
      const WeightMatrix m = make_weight(type, b.data(), rows, cols);
      return row_blocks_pay_off(m) ? to_row_blocks(m, b.data(), pool) : m;
    };
    for (int e = 0; e < s.n_experts; ++e) {
      w.gate.push_back(add(up_type, s.n_ff, kE));
      w.up.push_back(add(up_type, s.n_ff, kE));
      w.down.push_back(add(down_type, kE, s.n_ff));
    }
  }
};

// moe_ffn of `rows` exact rows on a pool of `threads`, and which way the
// step spread its experts.
struct Decoded {
  std::vector<float> y;
  bool one_per_task = false, cut = false;
};
Decoded decode_on(const TypedLayer& L, const std::vector<float>& h, int rows, int threads) {
  ThreadPool pool(threads);
  MoeScratch scratch;
  Decoded d;
  d.y.assign(size_t(rows) * TypedLayer::kE, 0.0f);
  moe_ffn(L.spec, L.w, h.data(), nullptr, rows, rows, 256, d.y.data(), scratch, pool);
  d.one_per_task = !scratch.by_rows.empty();
  d.cut = !scratch.pieces.empty();
  return d;
}

// A call without rows (a step whose items all sit out a layer) reads
// nothing, on any pool.
TEST(Moe, NoRowsReadNoExperts) {
  std::mt19937 rng(10);
  const Layer L(spec(8, 2, 32), rng);
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    MoeScratch scratch;
    float y = 1.0f;
    moe_ffn(L.spec, L.w, &y, nullptr, 0, 0, 256, &y, scratch, pool);
    EXPECT_EQ(scratch.expert_bytes_read, 0u);
    EXPECT_EQ(y, 1.0f);
  }
}

TEST(Moe, DecodeSpreadsFewExpertsOverEveryThread) {
  EXPECT_TRUE(experts_one_per_task(8, true, 2));    // one row, top-8, 2 threads
  EXPECT_TRUE(experts_one_per_task(4, true, 4));    // one row, top-4, 4 threads
  EXPECT_FALSE(experts_one_per_task(4, true, 16));  // ... 16 threads: 12 would idle
  EXPECT_FALSE(experts_one_per_task(2, true, 4));
  EXPECT_FALSE(experts_one_per_task(6, false, 2));  // rows of unequal experts
  EXPECT_TRUE(experts_one_per_task(40, false, 8));  // a batch's many experts
}

// Cut by rows or one expert per task, a decode step gives the bits of the
// row-parallel path (a pool of one thread) for every weight type's kernels,
// with biases, per-expert scales and every activation; 296 wide, the
// activation's pieces end in its scalar tail.
TEST(Moe, DecodeBitsDoNotDependOnHowExpertsAreSpread) {
  struct Case {
    DType up, down;
    GatedActivation act;
    bool extras;  // expert biases and down scales
    int n_ff, experts, top;
  };
  bool several_rows_one_per_task = false, several_rows_cut = false;
  for (const Case& c :
       {Case{DType::Q4_K, DType::MXFP4, GatedActivation::SwiGlu, false, 288, 8, 2},
        Case{DType::Q6_K, DType::Q8_0, GatedActivation::SwiGluOai, true, 288, 16, 4},
        Case{DType::F16, DType::F32, GatedActivation::GeGlu, true, 288, 8, 2},
        Case{DType::F32, DType::F16, GatedActivation::SwiGlu, false, 296, 16, 4}}) {
    std::mt19937 rng(9);
    MoeSpec s = spec(c.experts, c.top, c.n_ff);
    s.normalize = true;
    s.activation = c.act;
    TypedLayer L(s, c.up, c.down, rng);
    if (c.extras) {
      L.w.gate_bias = random_values(size_t(c.experts * c.n_ff), rng, 0.1f);
      L.w.up_bias = random_values(size_t(c.experts * c.n_ff), rng, 0.1f);
      L.w.down_bias = random_values(size_t(c.experts * TypedLayer::kE), rng, 0.1f);
      L.w.down_scale = random_values(size_t(c.experts), rng, 2.0f);
    }
    const std::string what =
        std::string(dtype_name(c.up)) + " / " + std::string(dtype_name(c.down));
    for (int rows : {1, 3, 6}) {
      const std::vector<float> h = random_values(size_t(rows) * TypedLayer::kE, rng, 1.0f);
      const Decoded want = decode_on(L, h, rows, 1);
      for (int threads : {2, 3, 4, 8}) {
        const Decoded got = decode_on(L, h, rows, threads);
        EXPECT_NE(got.one_per_task, got.cut) << what;
        if (rows > 1) {
          several_rows_one_per_task |= got.one_per_task;
          several_rows_cut |= got.cut;
        }
        for (size_t i = 0; i < want.y.size(); ++i)
          ASSERT_EQ(got.y[i], want.y[i])
              << what << ", " << rows << " rows, " << threads << " threads, value " << i;
      }
    }
  }
  EXPECT_TRUE(several_rows_one_per_task);
  EXPECT_TRUE(several_rows_cut);
}

}  // namespace
}  // namespace tkv::model
