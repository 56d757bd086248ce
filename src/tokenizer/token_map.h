// Token text -> id, looked up with string_views (no temporary strings on the
// hot paths of SPM and BPE).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tokenizer/heap_bytes.h"
#include "tokenizer/vocab.h"

namespace tkv::tok {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class TokenMap {
 public:
  // When two ids share a text the later one wins, as in llama.cpp.
  void insert(std::string text, int32_t id) { map_[std::move(text)] = id; }
  int32_t find(std::string_view text) const {
    auto it = map_.find(text);
    return it == map_.end() ? kNoToken : it->second;
  }
  size_t size() const { return map_.size(); }
  void reserve(size_t n) { map_.reserve(n); }
  size_t heap_bytes() const { return tok::heap_bytes(map_); }

 private:
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> map_;
};

}  // namespace tkv::tok
