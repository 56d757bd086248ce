// Vocabularies for synthesized models: invented (SPM-style) or copied from a
// real tokenizer's GGUF.
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/synth.h"

namespace tkv::model {

namespace {

// llama.cpp's token types (llama_token_type).
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenUnknown = 2;
constexpr int32_t kTokenControl = 3;
constexpr int32_t kTokenByte = 6;

const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word-start mark

// Pieces in the order a vocabulary would rank them: the word-start mark and
// single printable characters (alone and word-initial), then lowercase
// strings of growing length, word-initial first. Every piece's prefixes come
// earlier, so SentencePiece's pairwise merges can reach each one.
class PieceGenerator {
 public:
  std::string next() {
    if (!emitted_space_) {
      emitted_space_ = true;
      return kSpace;
    }
    if (single_ < 2 * 94) {  // printable ASCII '!'..'~', each word-initial then bare
      const char ch = char('!' + single_ / 2);
      const bool word_start = single_ % 2 == 0;
      ++single_;
      return word_start ? kSpace + ch : std::string(1, ch);
    }
    // Lowercase strings of length len_ >= 2, counter_ enumerates 26^len_ x {word-initial, bare}.
    for (;;) {
      uint64_t combos = 1;
      for (int i = 0; i < len_; ++i) combos *= 26;
      if (counter_ < 2 * combos) break;
      ++len_;
      counter_ = 0;
    }
    uint64_t index = counter_ / 2;
    const bool word_start = counter_ % 2 == 0;
    ++counter_;
    std::string s(size_t(len_), 'a');
    for (int i = len_ - 1; i >= 0; --i) {
      s[size_t(i)] = char('a' + index % 26);
      index /= 26;
    }
    return word_start ? kSpace + s : s;
  }

 private:
  bool emitted_space_ = false;
  int single_ = 0;
  int len_ = 2;
  uint64_t counter_ = 0;
};

}  // namespace

void add_invented_vocab(gguf::GgufWriter& writer, int n_vocab) {
  constexpr int kSpecial = 3 + 256;
  if (n_vocab < kSpecial + 1) {
    fail("synth: an invented vocabulary needs at least ", kSpecial + 1, " tokens (got ", n_vocab,
         ")");
  }
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(size_t(n_vocab));
  auto add = [&](std::string piece, float score, int32_t type) {
    tokens.push_back(std::move(piece));
    scores.push_back(score);
    types.push_back(type);
  };
  add("<unk>", 0.0f, kTokenUnknown);
  add("<s>", 0.0f, kTokenControl);
  add("</s>", 0.0f, kTokenControl);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0.0f, kTokenByte);
  }
  // SentencePiece merges the pair whose result has the highest score first:
  // earlier (shorter) pieces rank higher.
  PieceGenerator gen;
  for (int i = 0; int(tokens.size()) < n_vocab; ++i) add(gen.next(), -float(i), kTokenNormal);

  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string("tokenizer.ggml.pre", "default");
  writer.set("tokenizer.ggml.tokens", gguf::Value::make_strings(std::move(tokens)));
  writer.set("tokenizer.ggml.scores", gguf::Value::make_f32s(scores));
  writer.set("tokenizer.ggml.token_type", gguf::Value::make_i32s(types));
  writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
  writer.set_u32("tokenizer.ggml.bos_token_id", 1);
  writer.set_u32("tokenizer.ggml.eos_token_id", 2);
  writer.set("tokenizer.ggml.add_bos_token", gguf::Value::make_bool(true));
  writer.set("tokenizer.ggml.add_eos_token", gguf::Value::make_bool(false));
}

int copy_vocab(gguf::GgufWriter& writer, const std::string& vocab_path) {
  const gguf::GgufFile vocab = gguf::GgufFile::open(vocab_path);
  const std::vector<std::string>* tokens = vocab.get_strings("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) {
    fail(vocab_path, ": no tokenizer.ggml.tokens to copy the vocabulary from");
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) writer.set(key, value);
  }
  return int(tokens->size());
}

}  // namespace tkv::model
