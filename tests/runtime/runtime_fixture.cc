#include "runtime_fixture.h"

namespace tkv::runtime {

ModelFixture load_model_fixture(const std::string& path, int ctx, const std::string& prompt_text) {
  ModelFixture f;
  f.model = model::Model::load(path);
  f.tokenizer = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_gguf(f.model->gguf()));
  if (ctx > 0)
    f.session = std::make_unique<Sequence>(*f.model, *f.tokenizer, ctx, kv::KvConfig{}, 1, 64);
  f.prompt = {f.tokenizer->bos()};
  for (int32_t id : f.tokenizer->encode(prompt_text, false, false)) f.prompt.push_back(id);
  return f;
}

}  // namespace tkv::runtime
