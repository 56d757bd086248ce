// Tokenizers: arbitrary text through every vocabulary fixture (SPM and the
// BPE pre-tokenizers), encoded with and without special-token parsing and
// decoded back. Input: one selector byte (vocabulary, flags), then the text.
// Every id must lie inside the vocabulary, and match_encoding of the text's
// first part beside the whole text's ids must equal encoding that part and
// comparing (the part ends where the selector's low bits say).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "fuzz_fixtures.h"
#include "fuzz_target.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::unique_ptr<tkv::tok::Tokenizer>> load_vocabs() {
  std::vector<std::unique_ptr<tkv::tok::Tokenizer>> out;
  for (const char* name : {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm"}) {
    const std::string path =
        tkv::fuzz::fixture_path(std::string("vocab/ggml-vocab-") + name + ".gguf");
    if (path.empty()) continue;
    out.push_back(std::make_unique<tkv::tok::Tokenizer>(
        tkv::tok::Tokenizer::from_gguf(tkv::gguf::GgufFile::open(path))));
  }
  if (out.empty()) tkv::fuzz::missing_fixture("vocab/ggml-vocab-*.gguf");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto vocabs = load_vocabs();
  if (vocabs.empty() || size == 0) return 0;
  const tkv::tok::Tokenizer& tok = *vocabs[data[0] % vocabs.size()];
  const bool add_special = data[0] & 0x40, parse_special = data[0] & 0x80;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.n_vocab()) {
        std::fprintf(stderr, "token id %d outside the vocabulary of %d\n", id, tok.n_vocab());
        std::abort();
      }
    (void)tok.decode(ids, parse_special);
    const std::string_view part = text.substr(0, text.size() * (data[0] & 0x3f) / 0x3f);
    const std::vector<int32_t> want = tok.encode(part, false, parse_special);
    const std::vector<int32_t> all = tok.encode(text, false, parse_special);
    const size_t common = size_t(
        std::mismatch(want.begin(), want.end(), all.begin(), all.end()).first - want.begin());
    const tkv::tok::Tokenizer::EncodingMatch got = tok.match_encoding(all, part, parse_special);
    if (got.common != common || got.whole != (common == want.size())) {
      std::fprintf(stderr, "match_encoding: %zu%s, encoding gives %zu%s\n", got.common,
                   got.whole ? " (whole)" : "", common, common == want.size() ? " (whole)" : "");
      std::abort();
    }
  } catch (const tkv::Error&) {
  }
  return 0;
}
