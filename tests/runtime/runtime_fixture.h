// The model, tokenizer and (optionally) an inference session the runtime
// tests share: stories260K loaded once per test.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/generation.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {

struct ModelFixture {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<Sequence> session;  // null when ctx was 0
  std::vector<int32_t> prompt;                // BOS + prompt_text
};

// Loads `path`; with ctx > 0 also an f16 session of ctx tokens (1 thread,
// ubatch 64).
ModelFixture load_model_fixture(const std::string& path, int ctx,
                                const std::string& prompt_text = {});

}  // namespace tkv::runtime
