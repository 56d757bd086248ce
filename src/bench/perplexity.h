// `turbokv perplexity`: the plain single-configuration version of bench
// quality -- perplexity of a text file with every past token read from the
// (compressed) KV cache, optionally KL divergence and top-1 agreement
// against a baseline cache. The CLI (apps/turbokv/cmd_perplexity.cc) parses
// the shared model / thread / KV flags (src/cli) and calls run_perplexity().
#pragma once

#include <functional>
#include <string>

#include "kv/kv_config.h"

namespace tkv::model {
class Model;
}

namespace tkv::bench {

struct PerplexityOptions {
  std::string model_path;
  std::string text_path;
  kv::KvConfig config;
  int threads = 1;
  int ubatch = 512;
  int window_tokens = 0;  // 0: min(1024, the model's trained context)
  int windows = 0;        // 0: every full window of the text
  std::string baseline;   // "" (perplexity only), "f16" or "f32"
  std::string json_out;   // "" or a file for the result as JSON
  bool progress = true;   // one line per window on stderr
  // Called once the model is loaded, before `config` is used: the CLI checks
  // its KV flags against the model there (its errors name the flag).
  std::function<void(const model::Model&)> check_model;
};

// Prints the result on stdout; throws tkv::Error for bad input.
int run_perplexity(const PerplexityOptions& opts);

}  // namespace tkv::bench
