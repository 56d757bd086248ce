// Parsing of the list-valued bench flags: token counts ("4k,8k,32768"),
// fractions ("0,0.25,0.5") and plain integer lists ("1,2").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::bench {

// "4k" -> 4096, "1K" -> 1024, "512" -> 512, "1.5k" -> 1536. Throws tkv::Error
// naming `flag` for anything else (negative, empty, trailing junk, > 2^31).
int64_t parse_token_count(std::string_view text, std::string_view flag);
std::vector<int64_t> parse_token_counts(std::string_view list, std::string_view flag);

// Comma-separated numbers in [lo, hi].
std::vector<double> parse_fractions(std::string_view list, std::string_view flag, double lo,
                                    double hi);
std::vector<int> parse_ints(std::string_view list, std::string_view flag, int lo, int hi);

// 4096 -> "4K", 1536 -> "1536", 65536 -> "64K": short labels for tables and plots.
std::string token_count_label(int64_t n);

}  // namespace tkv::bench
