// Splitting text on special tokens before it is tokenized (llama.cpp's
// tokenizer_st_partition): each special token's exact text, longest token
// first, is cut out of the text fragments that remain, so "<|im_start|>user"
// becomes [token <|im_start|>] + "user". A special token may strip the ASCII
// whitespace on its left or right (lstrip / rstrip).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::tok {

struct SpecialToken {
  std::string text;
  int32_t id;
  bool lstrip = false;
  bool rstrip = false;
};

struct Fragment {
  int32_t token;      // the special token, or kNoToken for a text fragment
  size_t begin, end;  // text fragment: byte range of the input
};

// `specials` must be sorted by decreasing text length (ties: increasing id).
// Returns the fragments in order; text fragments are never empty.
std::vector<Fragment> split_on_special_tokens(std::string_view text,
                                              const std::vector<SpecialToken>& specials);

}  // namespace tkv::tok
