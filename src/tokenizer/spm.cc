#include "tokenizer/spm.h"

#include <algorithm>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace tkv::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

}  // namespace

bool SpmEncoder::vocab_has_no_inner_space(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    for (size_t at = t.find(kSpace, 1); at != std::string::npos; at = t.find(kSpace, at + 1)) {
      if (at < kSpace.size() || t.compare(at - kSpace.size(), kSpace.size(), kSpace) != 0) {
        return false;
      }
    }
  }
  return true;
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  // Symbol offsets are 32-bit.
  if (text.size() >= UINT32_MAX) fail("tokenizer: a text of ", text.size(), " bytes is too long");
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
  if (!words_are_independent_) {
    encode_segment(text, symbols, heap, out);
    return;
  }
  // Cut before every U+2581 that follows another character: "▁a▁▁b" -> "▁a", "▁▁b".
  size_t begin = 0;
  for (size_t at = text.find(kSpace, 1); at != std::string_view::npos;
       at = text.find(kSpace, at + 1)) {
    if (at >= begin + kSpace.size() &&
        text.compare(at - kSpace.size(), kSpace.size(), kSpace) != 0) {
      encode_segment(text.substr(begin, at - begin), symbols, heap, out);
      begin = at;
    }
  }
  encode_segment(text.substr(begin), symbols, heap, out);
}

void SpmEncoder::encode_segment(std::string_view text, std::vector<Symbol>& symbols,
                                std::vector<Bigram>& heap, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  symbols.clear();
  for (size_t pos = 0; pos < text.size();) {
    // One symbol per character. An invalid byte is a symbol of its own:
    // llama.cpp sizes symbols by the lead byte alone, so a truncated sequence
    // swallows the next bytes (possibly half of an escaped space, which then
    // comes back as U+2581 instead of a space); for valid UTF-8 both agree.
    uint32_t cp = 0;
    const size_t len = std::max<size_t>(utf8_decode(text, pos, &cp), 1);
    const auto index = int32_t(symbols.size());
    symbols.push_back({uint32_t(pos), uint32_t(len), index - 1, -1});
    pos += len;
    if (pos < text.size()) symbols.back().next = index + 1;
  }

  // Highest score on top; on equal scores the leftmost pair (llama.cpp's
  // order, which the test vectors depend on).
  auto lower_priority = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  heap.clear();
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[size_t(left)];
    const uint32_t len = l.len + symbols[size_t(right)].len;
    const int32_t id = tokens_.find(text.substr(l.begin, len));
    if (id == kNoToken) return;
    const float score = scores_.empty() ? 0.0f : scores_[size_t(id)];
    heap.push_back({score, left, right, len});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  for (int32_t i = 1; i < int32_t(symbols.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = symbols[size_t(b.left)];
    Symbol& r = symbols[size_t(b.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[size_t(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[size_t(i)].next) {
    const Symbol& s = symbols[size_t(i)];
    const std::string_view piece = text.substr(s.begin, s.len);
    const int32_t id = tokens_.find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    // Not a token: byte fallback. (llama.cpp first tries to re-split the
    // piece along the merges that built it, but a merge only ever produces
    // a piece that is a token, so that path never finds anything.)
    for (char c : piece) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t bt = byte_tokens_[byte];
      if (bt == kNoToken) bt = unk_;
      if (bt == kNoToken) {
        fail("tokenizer: byte 0x", "0123456789ABCDEF"[byte >> 4], "0123456789ABCDEF"[byte & 15],
             " has no token (no <0xNN> byte token, no unknown token) in this vocabulary");
      }
      out.push_back(bt);
    }
  }
}

}  // namespace tkv::tok
