#include "tokenizer/vocab.h"

#include <optional>

#include "common/error.h"
#include "common/escape.h"
#include "gguf/gguf.h"
#include "tokenizer/pre_tokenizer.h"

namespace tkv::tok {

std::string_view vocab_type_name(VocabType type) {
  return type == VocabType::kSpm ? "llama" : "gpt2";
}

namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTokenType = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";

struct SpecialKey {
  const char* key;
  int32_t Vocab::*field;
};
constexpr SpecialKey kSpecialKeys[] = {
    {"tokenizer.ggml.bos_token_id", &Vocab::bos},
    {"tokenizer.ggml.eos_token_id", &Vocab::eos},
    {"tokenizer.ggml.eot_token_id", &Vocab::eot},
    {"tokenizer.ggml.eom_token_id", &Vocab::eom},
    {"tokenizer.ggml.unknown_token_id", &Vocab::unk},
    {"tokenizer.ggml.padding_token_id", &Vocab::pad},
};

bool is_byte_spelling(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

}  // namespace

void Vocab::validate() const {
  const size_t n = tokens.size();
  if (n == 0) fail(kTokens, " is empty");
  if (n > size_t(INT32_MAX)) fail(kTokens, " has ", n, " entries, more than token ids can address");
  if (!scores.empty() && scores.size() != n) {
    fail(kScores, " has ", scores.size(), " entries, expected one per token (", n, ")");
  }
  if (!types.empty() && types.size() != n) {
    fail(kTokenType, " has ", types.size(), " entries, expected one per token (", n, ")");
  }
  // SPM and SentencePiece-style BPE (Gemma 4) spell byte tokens <0xNN>.
  int hex_bytes = -1;  // decided at the first byte token
  for (size_t i = 0; i < types.size(); ++i) {
    const auto t = int32_t(types[i]);
    if (t < 0 || t > int32_t(TokenType::kByte)) {
      fail(kTokenType, "[", i, "] = ", t, " is not a token type (0..6)");
    }
    if (types[i] != TokenType::kByte) continue;
    if (hex_bytes < 0) {
      hex_bytes = type == VocabType::kSpm || pre_tokenizer_spec(pre).spm_style;
    }
    if (hex_bytes && !is_byte_spelling(tokens[i])) {
      fail(kTokenType, "[", i, "] marks '", escape_bytes(tokens[i]),
           "' as a byte token, which must be spelled <0xNN>");
    }
  }
  for (const SpecialKey& k : kSpecialKeys) {
    const int32_t id = this->*k.field;
    if (id != kNoToken && (id < 0 || size_t(id) >= n)) {
      fail(k.key, " = ", id, " is out of range (the vocabulary has ", n, " tokens)");
    }
  }
  if (add_bos && bos == kNoToken) {
    fail(
        "tokenizer.ggml.add_bos_token is set but there is no BOS token "
        "(tokenizer.ggml.bos_token_id)");
  }
  if (add_eos && eos == kNoToken) {
    fail(
        "tokenizer.ggml.add_eos_token is set but there is no EOS token "
        "(tokenizer.ggml.eos_token_id)");
  }
  if (type == VocabType::kBpe && merges.empty())
    fail(kMerges, " is missing or empty (needed by BPE)");
}

Vocab Vocab::from_gguf(const gguf::GgufFile& file) {
  Vocab v;
  try {
    const std::optional<std::string> model = file.get_string(kModel);
    if (!model) fail("missing metadata key '", kModel, "' (the file has no tokenizer)");
    if (*model == "llama") {
      v.type = VocabType::kSpm;
    } else if (*model == "gpt2") {
      v.type = VocabType::kBpe;
    } else if (*model == "gemma4") {
      v.type = VocabType::kBpe;  // with the gemma4 pre-tokenizer, whatever the file says
    } else {
      fail(kModel, " '", *model,
           "' is not supported (supported: 'llama' = SentencePiece, 'gpt2' = byte-level BPE, "
           "'gemma4' = SentencePiece-style BPE)");
    }
    v.pre = *model == "gemma4" ? "gemma4" : file.get_string(kPre).value_or("");
    v.model_name = file.get_string("general.name").value_or("");

    const std::vector<std::string>* tokens = file.get_strings(kTokens);
    if (!tokens) fail("missing metadata key '", kTokens, "'");
    v.tokens = *tokens;
    if (auto scores = file.get_floats(kScores)) v.scores = std::move(*scores);
    if (auto types = file.get_ints(kTokenType)) {
      v.types.reserve(types->size());
      for (size_t i = 0; i < types->size(); ++i) {
        const int64_t t = (*types)[i];
        if (t < 0 || t > int64_t(TokenType::kByte)) {
          fail(kTokenType, "[", i, "] = ", t, " is not a token type (0..6)");
        }
        v.types.push_back(TokenType(t));
      }
    }
    if (v.type == VocabType::kBpe) {
      const std::vector<std::string>* merges = file.get_strings(kMerges);
      if (!merges) fail("missing metadata key '", kMerges, "' (needed by BPE)");
      v.merges = *merges;
    }

    // Defaults as llama.cpp's llama_vocab::load, then the file's keys.
    const auto n = int64_t(v.tokens.size());
    auto default_id = [n](int32_t id) { return id < n ? id : kNoToken; };
    if (v.type == VocabType::kSpm) {
      v.bos = default_id(1);
      v.eos = default_id(2);
      v.unk = default_id(0);
      v.add_bos = true;
      v.add_space_prefix = true;
    } else {
      v.add_bos = pre_tokenizer_spec(v.pre).add_bos;
    }
    for (const SpecialKey& k : kSpecialKeys) {
      const std::optional<int64_t> id = file.get_int(k.key);
      if (!id) continue;
      // Converters write 0xFFFFFFFF (or -1) for "no such token".
      if (*id == -1 || *id == int64_t(UINT32_MAX)) {
        v.*k.field = kNoToken;
        continue;
      }
      if (*id < 0 || *id >= n)
        fail(k.key, " = ", *id, " is out of range (the vocabulary has ", n, " tokens)");
      v.*k.field = int32_t(*id);
    }
    // A default "add BOS" means nothing when the file says there is no BOS.
    if (v.bos == kNoToken) v.add_bos = false;
    if (auto b = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
    if (auto b = file.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
    // llama.cpp always adds Gemma 4's BOS (its files may say otherwise).
    if (v.type == VocabType::kBpe && pre_tokenizer_spec(v.pre).spm_style) v.add_bos = true;
    if (auto b = file.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
    v.chat_template = file.get_string("tokenizer.chat_template").value_or("");
    v.validate();
  } catch (const Error& e) {
    // GgufFile's own errors already start with the path.
    const std::string msg = e.what();
    if (msg.rfind(file.path(), 0) == 0) throw;
    fail(file.path(), ": ", msg);
  }
  return v;
}

}  // namespace tkv::tok
