// The tokenizer's input: a vocabulary as GGUF describes it (the
// tokenizer.ggml.* metadata keys), as plain data. The algorithms (SPM, BPE)
// are built from this struct alone, so tests can build small vocabularies by
// hand; Vocab::from_gguf is the thin adapter from a GGUF file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::tok {

// "No such token" (absent special token, failed lookup).
inline constexpr int32_t kNoToken = -1;

// tokenizer.ggml.model: "llama" is SentencePiece (scores-driven merges, byte
// fallback), "gpt2" is byte-level BPE (ranked merges, regex pre-tokenizer),
// "gemma4" is BPE over SentencePiece spellings (kBpe with the "gemma4"
// pre-tokenizer, see PreTokenizerSpec::spm_style).
enum class VocabType { kSpm, kBpe };
std::string_view vocab_type_name(VocabType type);  // "llama" / "gpt2"

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  VocabType type = VocabType::kSpm;
  // tokenizer.ggml.pre: names the BPE pre-tokenizer (regex set); "" = absent.
  std::string pre;
  // general.name. llama.cpp derives some per-token attributes from it (Phi-3
  // special tokens strip the whitespace that follows them), and so do we.
  std::string model_name;

  std::vector<std::string> tokens;  // tokenizer.ggml.tokens, indexed by id
  std::vector<float> scores;        // tokenizer.ggml.scores: empty, or one per token
  std::vector<TokenType> types;  // tokenizer.ggml.token_type: empty (all normal), or one per token
  std::vector<std::string> merges;  // tokenizer.ggml.merges (BPE): "left right", best first

  // tokenizer.ggml.{bos,eos,eot,eom,unknown,padding}_token_id; kNoToken = none.
  int32_t bos = kNoToken;
  int32_t eos = kNoToken;
  int32_t eot = kNoToken;
  int32_t eom = kNoToken;
  int32_t unk = kNoToken;
  int32_t pad = kNoToken;

  bool add_bos = false;           // tokenizer.ggml.add_bos_token
  bool add_eos = false;           // tokenizer.ggml.add_eos_token
  bool add_space_prefix = false;  // tokenizer.ggml.add_space_prefix (SPM only)

  std::string chat_template;  // tokenizer.chat_template ("" = absent)

  // Reads the tokenizer.ggml.* keys. Defaults for absent keys follow
  // llama.cpp: SPM has BOS 1, EOS 2, UNK 0, adds BOS and a space prefix; BPE
  // adds BOS only for the Llama-3 pre-tokenizer family, and Gemma 4 always
  // (whatever tokenizer.ggml.add_bos_token says). Ids stored as
  // 0xFFFFFFFF or -1 (what converters write for "none") count as absent.
  // Errors (tkv::Error) name the file and the key.
  static Vocab from_gguf(const gguf::GgufFile& file);

  // Throws tkv::Error naming the offending key when lengths or ids are
  // inconsistent: scores/token_type length != tokens, empty token list,
  // special ids out of range, BPE without merges, SPM or Gemma 4 byte tokens
  // not spelled <0xNN>.
  void validate() const;

  int32_t n_tokens() const { return int32_t(tokens.size()); }
  TokenType type_of(int32_t id) const {
    return types.empty() ? TokenType::kNormal : types[size_t(id)];
  }
};

}  // namespace tkv::tok
