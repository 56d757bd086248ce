// BPE of one pre-tokenized word (llama.cpp's llm_tokenizer_bpe): the word's
// bytes are spelled in GPT-2's byte alphabet, one symbol per byte (or, for
// SentencePiece-style vocabularies such as Gemma 4's, the word is taken as
// is, one symbol per UTF-8 character), and the adjacent pair with the lowest
// merge rank is merged until no ranked pair is left (ties: leftmost first).
// Ranks live in a hash map keyed by the token ids of both halves, and the
// merged token's id is precomputed, so merging does no string work.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/token_map.h"

namespace tkv::tok {

class BpeMerges {
 public:
  struct Merge {
    int32_t rank;    // position in tokenizer.ggml.merges (lower merges first)
    int32_t result;  // token id of the concatenation, kNoToken if it is not a token
  };

  // Parses "left right" entries; a malformed entry is a tkv::Error naming
  // tokenizer.ggml.merges[i]. The first of duplicate entries wins.
  BpeMerges(const std::vector<std::string>& merges, const TokenMap& tokens);

  const Merge* find(int32_t left, int32_t right) const {
    auto it = by_ids_.find(key(left, right));
    return it == by_ids_.end() ? nullptr : &it->second;
  }
  // Merges whose halves are not both tokens (rare; empty for real vocabularies).
  const Merge* find_text(std::string_view left, std::string_view right) const;
  bool has_text_merges() const { return !by_text_.empty(); }
  size_t size() const { return by_ids_.size() + by_text_.size(); }
  // Heap bytes of the tables (memory reports).
  size_t heap_bytes() const;

 private:
  static uint64_t key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  static std::string text_key(std::string_view l, std::string_view r);
  std::unordered_map<uint64_t, Merge> by_ids_;
  std::unordered_map<std::string, Merge> by_text_;
};

class BpeEncoder {
 public:
  // byte_tokens[b]: the token for byte b (the byte-level character, or
  // <0xNN> when spm_style; kNoToken if the vocabulary lacks it); unk: stands
  // in for such bytes (kNoToken: error). spm_style: raw UTF-8 symbols, and a
  // word made only of newlines that is a token is taken whole (Gemma 4).
  BpeEncoder(const TokenMap& tokens, const BpeMerges& merges,
             const std::array<int32_t, 256>& byte_tokens, bool ignore_merges, bool spm_style,
             int32_t unk)
      : tokens_(tokens),
        merges_(merges),
        byte_tokens_(byte_tokens),
        ignore_merges_(ignore_merges),
        spm_style_(spm_style),
        unk_(unk) {}

  // Reusable buffers, plus a cache of words already encoded by this session
  // (natural text repeats its words; the cache keys point into the caller's
  // text, so a session must not outlive it).
  struct Session {
    struct Symbol {
      uint32_t begin, len;
      int32_t prev, next;
      int32_t id;  // token of this piece, kNoToken if none
    };
    struct Pair {
      int32_t rank, left, right;
      uint32_t len;
      int32_t result;
    };
    std::vector<Symbol> symbols;
    std::vector<Pair> heap;
    std::string spelled;
    std::vector<uint32_t> spelled_offsets;
    std::vector<int32_t> cached_ids;
    std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
    // Texts prepared by the caller for this session (e.g. with spaces
    // escaped) that cache keys point into; a deque never moves them.
    std::deque<std::string> texts;
  };

  // Appends the tokens of one word (raw bytes, not yet byte-level spelled).
  void encode_word(std::string_view word, Session& s, std::vector<int32_t>& out) const;

 private:
  // Fills s.spelled, s.spelled_offsets (word byte -> spelled offset) and the
  // initial symbols of `word`.
  void spell(std::string_view word, Session& s) const;
  void merge_word(std::string_view word, Session& s, std::vector<int32_t>& out) const;
  std::string_view spelled_piece(const Session& s, uint32_t begin, uint32_t len) const;
  int32_t byte_token(uint8_t b) const;

  const TokenMap& tokens_;
  const BpeMerges& merges_;
  const std::array<int32_t, 256>& byte_tokens_;
  bool ignore_merges_;
  bool spm_style_;
  int32_t unk_;
};

}  // namespace tkv::tok
