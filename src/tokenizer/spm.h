// SentencePiece-style tokenization of one text fragment (llama.cpp's
// llm_tokenizer_spm): start from single UTF-8 characters, repeatedly merge
// the adjacent pair whose concatenation is the vocabulary token with the
// highest score (ties: leftmost pair first), then emit each final piece as
// its token, or as byte tokens <0xNN> when it is not one.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/token_map.h"

namespace tkv::tok {

class SpmEncoder {
 public:
  // byte_tokens[b]: the token for byte b (<0xNN>, else the one-byte token,
  // else kNoToken); unk: used for a byte without a token (kNoToken: error).
  // words_are_independent: see vocab_has_no_inner_space().
  SpmEncoder(const TokenMap& tokens, const std::vector<float>& scores,
             const std::array<int32_t, 256>& byte_tokens, int32_t unk, bool words_are_independent)
      : tokens_(tokens),
        scores_(scores),
        byte_tokens_(byte_tokens),
        unk_(unk),
        words_are_independent_(words_are_independent) {}

  // `text` is already escaped (spaces as U+2581, prefix applied).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // True when no token has a U+2581 that follows another character than
  // U+2581 (true of Llama 2, Phi-3 and the test models). Then no merge can
  // span the start of a word ("x▁y" | "▁z"), so words can be merged one at a
  // time with the same result as merging the whole text at once (merges in
  // different words never interact), and with small, cache-friendly queues.
  static bool vocab_has_no_inner_space(const std::vector<std::string>& tokens);

 private:
  struct Symbol {
    uint32_t begin;
    uint32_t len;  // 0 once merged into its left neighbour
    int32_t prev;  // live neighbours in text order, -1 at the ends
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t len;  // left.len + right.len when queued; stale once either changes
  };
  void encode_segment(std::string_view text, std::vector<Symbol>& symbols,
                      std::vector<Bigram>& heap, std::vector<int32_t>& out) const;

  const TokenMap& tokens_;
  const std::vector<float>& scores_;
  const std::array<int32_t, 256>& byte_tokens_;
  int32_t unk_;
  bool words_are_independent_;
};

}  // namespace tkv::tok
