#include "codec_test_util.h"

#include <gtest/gtest.h>

#include <cstring>

#include "hwy/targets.h"

namespace tkv::test {

std::vector<float> gaussian_vector(std::mt19937_64& rng, int n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> uniform_vector(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = unit(rng);
  return v;
}

CodecUnderTest make_test_codec(const std::string& name, int head_dim, uint64_t seed) {
  const auto spec = kv::parse_codec(name);
  EXPECT_TRUE(spec.has_value()) << name;
  CodecUnderTest c;
  c.rotation = std::make_shared<const kv::Rotation>(head_dim, seed);
  c.codec = kv::make_codec(*spec, head_dim, c.rotation);
  return c;
}

const std::vector<std::string>& all_codec_names() {
  static const std::vector<std::string> names = {"f32",   "f16",  "q8_0", "q8_0h", "q4_0",
                                                 "q4_0h", "tq1",  "tq2",  "tq3",   "tq4",
                                                 "tq1r",  "tq2r", "tq3r", "tq4r"};
  return names;
}

FilledPage fill_page(const kv::Codec& codec, int page_tokens, std::mt19937_64& rng,
                     int slots_to_write) {
  if (slots_to_write < 0) slots_to_write = page_tokens;
  FilledPage fp;
  const size_t bytes = codec.page_bytes(page_tokens);
  fp.storage.assign(bytes + 64, 0xA5);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(fp.storage.data());
  fp.page = fp.storage.data() + ((64 - addr % 64) % 64);
  const int d = codec.head_dim();
  fp.inputs.resize(size_t(page_tokens) * d);
  for (int t = 0; t < slots_to_write; ++t) {
    const auto x = gaussian_vector(rng, d);
    std::memcpy(&fp.inputs[size_t(t) * d], x.data(), sizeof(float) * d);
    codec.encode(x.data(), fp.page, page_tokens, t);
  }
  return fp;
}

double normalized_sq_error(const float* a, const float* b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num += double(a[i] - b[i]) * (a[i] - b[i]);
    den += double(a[i]) * a[i];
  }
  return den > 0 ? num / den : num;
}

}  // namespace tkv::test
