// An independent, straightforward forward pass for tests: reads the GGUF
// itself (its own metadata parsing, its own tensor binding), dequantizes every
// weight with the scalar reference (tensor/reference.h) into double, and runs
// the network one token at a time in double with plain arrays holding all of
// K and V (qwen35's recurrent layers keep their own state:
// reference_recurrent.h). No SIMD, no KvCache, no code shared with
// src/model. Test-only: the engine itself keeps K/V nowhere but in the
// paged cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tkv::test {

class ReferenceForward {
 public:
  explicit ReferenceForward(const std::string& gguf_path);
  ~ReferenceForward();

  int n_vocab() const;
  // Logits after each token of `tokens` (teacher forced from position 0).
  std::vector<std::vector<double>> run(const std::vector<int32_t>& tokens);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tkv::test
