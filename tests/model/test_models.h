// Small synthesized models for the model tests, and a GGUF rewriter that
// makes broken variants of them (missing tensor, wrong shape, ...).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/synth.h"

namespace tkv::test {

// `preset`'s architecture features (arch, rope scaling, tied output, sliding
// window, rope base, eps) at test dimensions: 2 layers, d256, 4 heads over
// 2 KV heads of 64, FFN 768, vocabulary 512; a MoE preset keeps its
// architecture with 4 of 16 experts of width 256.
model::SynthSpec small_spec(const std::string& preset);

// Largest |model - reference forward| over every logit of every position,
// on a cache of f32 K and V: the model prefills all but the last 3 tokens
// in chunks of `ubatch`, then decodes those one at a time. Expects (gtest)
// every position's logits once, in order.
double max_logit_error(const std::string& path, int n_tokens, int ubatch, int threads);

// Synthesizes `spec` into a fresh temporary directory; returns the path.
std::string write_model(const model::SynthSpec& spec, const std::string& type = "f32",
                        uint64_t seed = 7, const std::string& vocab_from = "");

// Copies the GGUF at `src` to `dst`, passing every metadata entry and
// tensor through the editors first: `edit_meta` may change the list of
// metadata; `edit_tensor` returns false to drop a tensor and may change its
// name, type, shape and bytes.
struct TensorCopy {
  std::string name;
  DType type;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void rewrite_gguf(
    const std::string& src, const std::string& dst,
    const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&)>& edit_meta,
    const std::function<bool(TensorCopy&)>& edit_tensor);

}  // namespace tkv::test
