// BPE pre-tokenization: the regexes that cut text into words before merges
// are applied, selected by tokenizer.ggml.pre and run through PCRE2.
//
// Semantics follow llama.cpp's unicode_regex_split exactly:
//  - a pre-tokenizer is a list of regexes applied in turn; each one splits
//    every piece produced so far (a piece is the whole subject of the next
//    regex, so lookaheads and `$` stop at the piece's end), and the text
//    between matches becomes pieces of its own;
//  - `\s` means Unicode White_Space. llama.cpp gets there by replacing every
//    non-ASCII White_Space code point with U+000B before matching; we do the
//    same substitution (found with PCRE2's \p{White_Space}) and compile
//    without PCRE2_UCP, so `\s` is the ASCII set plus those substitutes and
//    explicit non-ASCII ranges in a pattern never match a space (as in
//    llama.cpp). PCRE2_UCP would add U+180E to `\s`, which llama.cpp does not
//    count as a space. `\p{L}`, `\p{N}`, ... are Unicode properties in
//    PCRE2's UTF mode with or without UCP;
//  - invalid UTF-8 bytes match as U+FFFD (llama.cpp's decoder does the
//    same), but the pieces returned are always ranges of the original bytes,
//    so the bytes themselves survive into byte-level BPE.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::tok {

// What a tokenizer.ggml.pre name implies.
struct PreTokenizerSpec {
  std::string name;                   // canonical name ("llama3", "qwen2", ...)
  std::vector<std::string> patterns;  // applied in order
  bool ignore_merges = false;         // a word that is itself a token skips the merges
  bool add_bos = false;               // default for tokenizer.ggml.add_bos_token
  // SentencePiece-style BPE (Gemma 4): the text's spaces become U+2581
  // before splitting (and U+2581 decodes back to a space), words are merged
  // from their raw UTF-8 characters instead of GPT-2's byte alphabet, a piece
  // that is not a token falls back to <0xNN> byte tokens, a word made only
  // of newlines that is itself a token is taken whole, and BOS is added even
  // when tokenizer.ggml.add_bos_token says not to (all as llama.cpp does).
  bool spm_style = false;
};

// Resolves tokenizer.ggml.pre ("" and "default" give llama.cpp's default
// set). Unknown names are a tkv::Error listing the supported ones: guessing
// a pre-tokenizer would silently produce tokens the model was not trained on.
const PreTokenizerSpec& pre_tokenizer_spec(std::string_view pre);
// Every accepted tokenizer.ggml.pre value.
std::vector<std::string> supported_pre_tokenizers();

class PreTokenizer {
 public:
  // Compiles the patterns (PCRE2, UTF, JIT when available); a pattern that
  // does not compile is a tkv::Error quoting it.
  explicit PreTokenizer(const std::vector<std::string>& patterns);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Cuts `text` (any bytes) into consecutive non-empty pieces; returns the end
  // offset of each piece, the last being text.size(). Thread-safe.
  std::vector<size_t> split(std::string_view text) const;
  // Bytes of the compiled patterns and their JIT code (memory reports).
  size_t bytes() const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> impl_;
};

}  // namespace tkv::tok
