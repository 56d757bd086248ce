#include "tokenizer/special_split.h"

#include "tokenizer/vocab.h"

namespace tkv::tok {

namespace {

// C isspace() in the "C" locale, as llama.cpp uses for lstrip/rstrip.
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

std::vector<Fragment> split_on_special_tokens(std::string_view text,
                                              const std::vector<SpecialToken>& specials) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (const SpecialToken& sp : specials) {
    // Most special tokens never occur; one scan of the whole text rules them out.
    if (sp.text.empty() || text.find(sp.text) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      const size_t end = f.end;
      while (begin < end) {
        const size_t at = text.substr(0, end).find(sp.text, begin);
        if (at == std::string_view::npos) break;
        size_t left_end = at;
        if (sp.lstrip) {
          while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({kNoToken, begin, left_end});
        next.push_back({sp.id, at, at + sp.text.size()});
        begin = at + sp.text.size();
        if (sp.rstrip) {
          while (begin < end && is_ascii_space(text[begin])) ++begin;
        }
      }
      if (begin < end) next.push_back({kNoToken, begin, end});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace tkv::tok
