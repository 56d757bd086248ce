#include "test_models.h"

#include "common/error.h"
#include "common/test_util.h"

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

}  // namespace tkv::test
