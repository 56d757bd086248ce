// Text <-> token ids for GGUF llama-family models, reproducing llama.cpp's
// tokenization (llama-vocab.cpp) id for id:
//  - SPM (tokenizer.ggml.model = "llama"): spaces become U+2581, an optional
//    leading space is added, score-driven merges, byte fallback <0xNN>;
//  - BPE (tokenizer.ggml.model = "gpt2"): regex pre-tokenizer chosen by
//    tokenizer.ggml.pre, GPT-2 byte-level alphabet, ranked merges;
//    "gemma4": the same merges over SentencePiece spellings (spaces as
//    U+2581, raw UTF-8, <0xNN> byte fallback).
// Special tokens (control, user-defined, unknown) are cut out of the text
// first: user-defined ones always, control and unknown ones only when
// parse_special is set (otherwise their text is tokenized as plain text).
//
// A Tokenizer is immutable after construction, cheap to copy (shared state)
// and safe to use from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::tok {

class Tokenizer {
 public:
  // Loads tokenizer.ggml.* from a GGUF file; errors name the file and key.
  static Tokenizer from_gguf(const gguf::GgufFile& file);
  // Validates the vocabulary (Vocab::validate) and builds the lookup tables.
  explicit Tokenizer(Vocab vocab);

  // add_special: BOS / EOS as the vocabulary asks (add_bos / add_eos).
  // parse_special: control tokens written in the text (e.g. "<|eot_id|>")
  // become those tokens. Any bytes are accepted, including invalid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // How far encode(text, false, parse_special) agrees with `ids`, which
  // must be encode(other, false, parse_special) of some text: the length of
  // their common prefix, and whether text's whole encoding is in it. The
  // same answer as encoding text and comparing, at a fraction of the cost
  // where the two texts share a long start (a chat's prompt beside a
  // rendering of its earlier messages): a text fragment between two special
  // tokens whose bytes ids spell out, up to the same next special token, is
  // not encoded again (a fragment's tokens depend only on its bytes and on
  // whether a special token precedes it), so a long shared start costs a
  // walk over its pieces.
  struct EncodingMatch {
    size_t common = 0;   // leading ids that text's encoding shares
    bool whole = false;  // text's encoding is exactly ids' first `common`
  };
  EncodingMatch match_encoding(std::span<const int32_t> ids, std::string_view text,
                               bool parse_special) const;

  // The bytes the ids stand for: the tokens' pieces (token_to_piece)
  // concatenated. With SPM's space prefix the first text token (the first
  // one, or the second after a leading BOS) loses one leading space, so
  // decode(encode(s, add_special, false)) == s for any bytes s (given a
  // vocabulary that can spell every byte). Unlike llama.cpp's detokenize,
  // the space is dropped after a BOS too (as SentencePiece and llama2.c do),
  // and no "clean up tokenization spaces" rewriting is done: it would break
  // that round trip, and streamed output would disagree with decode().
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  // The bytes of one token in running text (no leading-space stripping): a
  // byte token gives its byte, an SPM piece has U+2581 turned back into
  // spaces, a BPE piece is mapped back from the byte alphabet. Empty for
  // control/unknown tokens unless render_special. Out-of-range id: tkv::Error.
  const std::string& token_to_piece(int32_t id, bool render_special = false) const;
  // The token's spelling in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>").
  const std::string& token_text(int32_t id) const;
  // Id of the token spelled exactly `text`, or kNoToken.
  int32_t find_token(std::string_view text) const;

  int32_t n_vocab() const;
  VocabType type() const;
  // Canonical pre-tokenizer name ("llama3", "qwen2", ...; "" for SPM).
  const std::string& pre_tokenizer() const;
  int32_t bos() const;  // kNoToken when the vocabulary has none
  int32_t eos() const;
  int32_t eot()
      const;  // end of turn (<|eot_id|>, <|im_end|>, ...), auto-detected by text as llama.cpp does
  int32_t eom() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  // End of generation: EOS, EOT, EOM and the tokens llama.cpp recognizes by
  // their text (<|im_end|>, <end_of_turn>, <|endoftext|>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;
  // Control or unknown: rendered only on request, never produced from plain text.
  bool is_control(int32_t id) const;
  const std::string& chat_template() const;
  // Bytes the tables hold (vocabulary, lookup maps, pieces, merges, the
  // compiled pre-tokenizer): an estimate from the containers' sizes, for
  // memory reports. Copies share them.
  uint64_t memory_bytes() const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

}  // namespace tkv::tok
