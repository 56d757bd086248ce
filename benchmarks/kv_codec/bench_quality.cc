// Synthetic attention quality of the codecs (not a timing): does tqNr's norm
// correction help? Gaussian keys, values and queries at head_dim 128, 1024
// keys, scores scaled to standard deviation `scale` (1: flat attention, 3:
// peaked); each stored vector goes through encode -> decode, attention is
// exact in double. Counters: kl (KL divergence of the attention weights,
// exact || codec, mean over 64 queries) and out_err (relative squared error
// of the attention output). The real-model figures (KL of next-token
// distributions) come from `turbokv bench quality`.
//
//   bench_kv_codec --benchmark_filter=SyntheticQuality
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/codec/codec.h"

namespace {

using tkv::kv::make_codec;
using tkv::kv::parse_codec;

void BM_SyntheticQuality(benchmark::State& state, const std::string& kname,
                         const std::string& vname, double scale) {
  const int d = 128, T = 1024, Q = 64, P = 64;
  auto rot = std::make_shared<const tkv::kv::Rotation>(d, 3);
  auto kc = make_codec(*parse_codec(kname), d, rot);
  auto vc = make_codec(*parse_codec(vname), d, rot);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> n01;
  std::vector<float> K(size_t(T) * d), V(K.size()), q(size_t(Q) * d), Kh(K.size()), Vh(K.size());
  for (float& x : K) x = n01(rng);
  for (float& x : V) x = n01(rng);
  for (float& x : q) x = n01(rng);
  double kl = 0, err = 0;
  for (auto _ : state) {
    std::vector<uint8_t> pk(kc->page_bytes(P)), pv(vc->page_bytes(P));
    for (int t = 0; t < T; ++t) {
      kc->encode(&K[size_t(t) * d], pk.data(), P, t % P);
      kc->decode(pk.data(), P, t % P, &Kh[size_t(t) * d]);
      vc->encode(&V[size_t(t) * d], pv.data(), P, t % P);
      vc->decode(pv.data(), P, t % P, &Vh[size_t(t) * d]);
    }
    kl = err = 0;
    const double s = scale / std::sqrt(double(d));
    for (int j = 0; j < Q; ++j) {
      std::vector<double> w(T), wh(T), o(d, 0), oh(d, 0);
      double m = -1e300, mh = -1e300, z = 0, zh = 0;
      for (int t = 0; t < T; ++t) {
        double a = 0, b = 0;
        for (int i = 0; i < d; ++i) {
          a += double(q[size_t(j) * d + i]) * K[size_t(t) * d + i];
          b += double(q[size_t(j) * d + i]) * Kh[size_t(t) * d + i];
        }
        w[t] = a * s;
        wh[t] = b * s;
        m = std::max(m, w[t]);
        mh = std::max(mh, wh[t]);
      }
      for (int t = 0; t < T; ++t) {
        z += (w[t] = std::exp(w[t] - m));
        zh += (wh[t] = std::exp(wh[t] - mh));
      }
      for (int t = 0; t < T; ++t) {
        w[t] /= z;
        wh[t] /= zh;
        kl += w[t] * std::log(w[t] / wh[t]) / Q;
        for (int i = 0; i < d; ++i) {
          o[i] += w[t] * V[size_t(t) * d + i];
          oh[i] += wh[t] * Vh[size_t(t) * d + i];
        }
      }
      double num = 0, den = 0;
      for (int i = 0; i < d; ++i) {
        num += (o[i] - oh[i]) * (o[i] - oh[i]);
        den += o[i] * o[i];
      }
      err += num / den / Q;
    }
  }
  state.counters["kl"] = kl;
  state.counters["out_err"] = err;
}

const int kRegistered = [] {
  const std::pair<const char*, const char*> pairs[] = {
      {"tq4", "f32"}, {"tq4r", "f32"}, {"tq3", "f32"},     {"tq3r", "f32"},
      {"f32", "tq2"}, {"f32", "tq2r"}, {"f32", "tq4"},     {"f32", "tq4r"},
      {"tq4", "tq2"}, {"tq4r", "tq2"}, {"q4_0h", "q4_0h"}, {"q8_0h", "q8_0h"}};
  for (double scale : {1.0, 3.0})
    for (const auto& [k, v] : pairs) {
      const std::string name = std::string("BM_SyntheticQuality/") + k + "/" + v +
                               "/score_std:" + std::to_string(int(scale));
      benchmark::RegisterBenchmark(
          name.c_str(), [=](benchmark::State& st) { BM_SyntheticQuality(st, k, v, scale); })
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  return 0;
}();

}  // namespace
