// Helpers for the codec tests: deterministic random vectors, pages filled
// through encode(), the list of codecs, and a loop over every compiled
// Highway target so each kernel variant (AVX-512, AVX2, SSE4, scalar) runs.
#pragma once

#include "test_util.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/codec/codec.h"

namespace tkv::test {

// N(0, sigma^2) vector of length n from a seeded generator.
std::vector<float> gaussian_vector(std::mt19937_64& rng, int n, float sigma = 1.0f);
// n values uniform in [0, 1) (attention weights for score/accumulate tests).
std::vector<float> uniform_vector(std::mt19937_64& rng, int n);

// A codec plus the rotation it shares (kept alive together).
struct CodecUnderTest {
  std::shared_ptr<const kv::Rotation> rotation;
  std::unique_ptr<kv::Codec> codec;
};
CodecUnderTest make_test_codec(const std::string& name, int head_dim, uint64_t seed = 1234);

// Every canonical codec name.
const std::vector<std::string>& all_codec_names();

// A page of `page_tokens` slots filled by encode() with Gaussian vectors
// (`inputs` receives them, slot-major); the page buffer is 64-byte aligned
// and pre-filled with 0xA5 so unwritten bytes are garbage, not zeros.
struct FilledPage {
  std::vector<uint8_t> storage;
  uint8_t* page = nullptr;
  std::vector<float> inputs;
};
FilledPage fill_page(const kv::Codec& codec, int page_tokens, std::mt19937_64& rng,
                     int slots_to_write = -1);

// ||a - b||^2 / ||a||^2.
double normalized_sq_error(const float* a, const float* b, int n);

}  // namespace tkv::test
