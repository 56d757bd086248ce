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
  SpmEncoder(const TokenMap& tokens, const std::vector<float>& scores,
             const std::array<int32_t, 256>& byte_tokens, int32_t unk)
      : tokens_(tokens), scores_(scores), byte_tokens_(byte_tokens), unk_(unk) {}

  // `text` is already escaped (spaces as U+2581, prefix applied).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  const TokenMap& tokens_;
  const std::vector<float>& scores_;
  const std::array<int32_t, 256>& byte_tokens_;
  int32_t unk_;
};

}  // namespace tkv::tok
