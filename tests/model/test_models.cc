#include "test_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "common/error.h"
#include "common/test_util.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "reference_forward.h"

namespace tkv::test {

model::SynthSpec small_spec(const std::string& preset) {
  model::SynthSpec s = model::synth_preset(preset);
  s.n_layers = 2;
  s.n_embd = 256;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.n_ff = 768;
  s.n_vocab = 512;
  s.n_ctx = 4096;
  if (s.n_experts > 0) {  // 16 experts of 256 (whole K-quant blocks), 4 chosen
    s.n_experts = 16;
    s.n_experts_used = 4;
    s.n_ff_expert = 256;
  }
  return s;
}

std::string write_model(const model::SynthSpec& spec, const std::string& type, uint64_t seed,
                        const std::string& vocab_from) {
  model::SynthOptions opts;
  opts.type = type;
  opts.seed = seed;
  opts.vocab_from = vocab_from;
  const std::string path = temp_dir() + "/" + spec.preset + "-" + type + ".gguf";
  model::write_synth_model(spec, opts, path);
  return path;
}

void rewrite_gguf(
    const std::string& src, const std::string& dst,
    const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&)>& edit_meta,
    const std::function<bool(TensorCopy&)>& edit_tensor) {
  const gguf::GgufFile in = gguf::GgufFile::open(src);
  gguf::GgufWriter out;
  auto meta = in.metadata();
  if (edit_meta) edit_meta(meta);
  for (auto& [key, value] : meta) {
    if (key != "general.alignment") out.set(key, value);
  }
  for (const auto& t : in.tensors()) {
    TensorCopy c{t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.n_bytes)};
    if (edit_tensor && !edit_tensor(c)) continue;
    out.add_tensor(c.name, c.type, c.shape, c.bytes.data(), c.bytes.size());
  }
  out.write(dst);
}

namespace {

kv::KvConfig f32_kv() {
  kv::KvConfig c;
  c.k = kv::CodecSpec{kv::CodecKind::F32};
  c.v = kv::CodecSpec{kv::CodecKind::F32};
  return c;
}

}  // namespace

double max_logit_error(const std::string& path, int n_tokens, int ubatch, int threads) {
  auto m = model::Model::load(path);
  ReferenceForward ref(path);
  const auto tokens = random_tokens(n_tokens, m->config().n_vocab, 3);
  const auto expect = ref.run(tokens);
  kv::KvCache cache(m->kv_shape(), f32_kv());
  ThreadPool pool(threads);
  model::EvalOptions opts;
  opts.ubatch = ubatch;
  opts.all_logits = true;
  double worst = 0;
  int64_t seen = 0;
  // Prefill all but the last 3 tokens, then decode those one at a time.
  const size_t prefill = tokens.size() - 3;
  auto check = [&](int64_t pos, std::span<const float> logits) {
    EXPECT_EQ(pos, seen++);
    for (size_t i = 0; i < logits.size(); ++i) {
      worst = std::max(worst, std::fabs(double(logits[i]) - expect[size_t(pos)][i]));
    }
  };
  m->eval(cache, std::span<const int32_t>(tokens.data(), prefill), pool, check, opts);
  for (size_t i = prefill; i < tokens.size(); ++i) {
    m->eval(cache, std::span<const int32_t>(&tokens[i], 1), pool, check, opts);
  }
  EXPECT_EQ(seen, n_tokens);
  return worst;
}

}  // namespace tkv::test
