#include "tokenizer/bpe.h"

#include <algorithm>

#include "common/error.h"
#include "common/escape.h"
#include "tokenizer/utf8.h"

namespace tkv::tok {

std::string BpeMerges::text_key(std::string_view l, std::string_view r) {
  // Length-prefixed so that ("ab", "c") and ("a", "bc") differ.
  return str(l.size(), ':', l, r);
}

BpeMerges::BpeMerges(const std::vector<std::string>& merges, const TokenMap& tokens) {
  by_ids_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // As llama.cpp: the halves are separated by the first space after the
    // first byte (so a half may itself begin with a space).
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      fail("tokenizer.ggml.merges[", i, "] = '", escape_bytes(m),
           "' is not of the form 'left right'");
    }
    const std::string_view left(m.data(), sp);
    const std::string_view right(m.data() + sp + 1, m.size() - sp - 1);
    joined.assign(left);
    joined += right;
    const Merge merge{int32_t(i), tokens.find(joined)};
    const int32_t l = tokens.find(left), r = tokens.find(right);
    if (l != kNoToken && r != kNoToken) {
      by_ids_.emplace(key(l, r), merge);
    } else {
      by_text_.emplace(text_key(left, right), merge);
    }
  }
}

size_t BpeMerges::heap_bytes() const {
  return tok::heap_bytes(by_ids_) + tok::heap_bytes(by_text_);
}

const BpeMerges::Merge* BpeMerges::find_text(std::string_view left, std::string_view right) const {
  auto it = by_text_.find(text_key(left, right));
  return it == by_text_.end() ? nullptr : &it->second;
}

namespace {

// std heap order: the top is the lowest rank, then the leftmost pair.
struct PairOrder {
  bool operator()(const BpeEncoder::Session::Pair& a, const BpeEncoder::Session::Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Words longer than this are not cached (they rarely repeat).
constexpr size_t kMaxCachedWord = 256;

}  // namespace

std::string_view BpeEncoder::spelled_piece(const Session& s, uint32_t begin, uint32_t len) const {
  const uint32_t from = s.spelled_offsets[begin], to = s.spelled_offsets[begin + len];
  return std::string_view(s.spelled).substr(from, to - from);
}

int32_t BpeEncoder::byte_token(uint8_t b) const {
  int32_t id = byte_tokens_[b];
  if (id == kNoToken) id = unk_;
  if (id == kNoToken) {
    fail("tokenizer: byte 0x", "0123456789ABCDEF"[b >> 4], "0123456789ABCDEF"[b & 15],
         " has no byte token and the vocabulary has no unknown token");
  }
  return id;
}

void BpeEncoder::encode_word(std::string_view word, Session& s, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() <= kMaxCachedWord) {
    if (auto it = s.cache.find(word); it != s.cache.end()) {
      const auto [offset, count] = it->second;
      out.insert(out.end(), s.cached_ids.begin() + offset, s.cached_ids.begin() + offset + count);
      return;
    }
    const size_t first = out.size();
    merge_word(word, s, out);
    const auto offset = uint32_t(s.cached_ids.size());
    s.cached_ids.insert(s.cached_ids.end(), out.begin() + ptrdiff_t(first), out.end());
    s.cache.emplace(word, std::make_pair(offset, uint32_t(out.size() - first)));
    return;
  }
  merge_word(word, s, out);
}

void BpeEncoder::spell(std::string_view word, Session& s) const {
  s.spelled.clear();
  s.spelled_offsets.clear();
  s.symbols.clear();
  if (spm_style_) {
    // The word as is, one symbol per UTF-8 character. (An invalid byte is a
    // symbol of its own; llama.cpp would have replaced it by U+FFFD.)
    s.spelled.assign(word);
    for (size_t i = 0; i <= word.size(); ++i) s.spelled_offsets.push_back(uint32_t(i));
    for (size_t pos = 0; pos < word.size();) {
      uint32_t cp = 0;
      const size_t len = std::max<size_t>(utf8_decode(word, pos, &cp), 1);
      const auto i = int32_t(s.symbols.size());
      s.symbols.push_back(
          {uint32_t(pos), uint32_t(len), i - 1, i + 1, tokens_.find(word.substr(pos, len))});
      pos += len;
    }
  } else {
    // One symbol per byte: each byte is one character of the byte alphabet.
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    for (size_t i = 0; i < word.size(); ++i) {
      const auto b = static_cast<uint8_t>(word[i]);
      s.spelled_offsets.push_back(uint32_t(s.spelled.size()));
      s.spelled += alphabet.spelling(b);
      s.symbols.push_back({uint32_t(i), 1, int32_t(i) - 1, int32_t(i) + 1, byte_tokens_[b]});
    }
    s.spelled_offsets.push_back(uint32_t(s.spelled.size()));
  }
  if (!s.symbols.empty()) s.symbols.back().next = -1;
}

void BpeEncoder::merge_word(std::string_view word, Session& s, std::vector<int32_t>& out) const {
  // Offsets are 32-bit (the byte-level spelling takes up to 2 bytes a byte).
  if (word.size() >= UINT32_MAX / 2)
    fail("tokenizer: a word of ", word.size(), " bytes is too long");
  spell(word, s);

  // Llama 3: a word that is a token is that token, whatever the merges say.
  // Gemma 4: the same for a run of newlines.
  if (ignore_merges_ || (spm_style_ && word.find_first_not_of('\n') == std::string_view::npos)) {
    if (const int32_t id = tokens_.find(s.spelled); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  const auto n = int32_t(s.symbols.size());

  s.heap.clear();
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Session::Symbol& l = s.symbols[size_t(left)];
    const Session::Symbol& r = s.symbols[size_t(right)];
    const BpeMerges::Merge* m = nullptr;
    if (l.id != kNoToken && r.id != kNoToken) {
      m = merges_.find(l.id, r.id);
    } else if (merges_.has_text_merges()) {
      m = merges_.find_text(spelled_piece(s, l.begin, l.len), spelled_piece(s, r.begin, r.len));
    }
    if (!m) return;
    s.heap.push_back({m->rank, left, right, l.len + r.len, m->result});
    std::push_heap(s.heap.begin(), s.heap.end(), PairOrder{});
  };
  for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), PairOrder{});
    const Session::Pair p = s.heap.back();
    s.heap.pop_back();
    Session::Symbol& l = s.symbols[size_t(p.left)];
    Session::Symbol& r = s.symbols[size_t(p.right)];
    // Stale when either side has changed since the pair was queued (both
    // sides are adjacent pieces at fixed offsets, so lengths tell).
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;
    l.len += r.len;
    l.id = p.result;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) s.symbols[size_t(r.next)].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = s.symbols[size_t(i)].next) {
    const Session::Symbol& sym = s.symbols[size_t(i)];
    if (sym.id != kNoToken) {
      out.push_back(sym.id);
      continue;
    }
    // A piece that is not a token (only with an inconsistent vocabulary):
    // emit its bytes one by one rather than drop them.
    for (uint32_t b = sym.begin; b < sym.begin + sym.len; ++b) {
      out.push_back(byte_token(static_cast<uint8_t>(word[b])));
    }
  }
}

}  // namespace tkv::tok
