#include "bench/units.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cli/flags.h"
#include "common/error.h"

namespace tkv::bench {

namespace {

double parse_number(std::string_view text, std::string_view flag, size_t* used) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || errno != 0 || !std::isfinite(v))
    fail(flag, ": '", text, "' is not a number");
  *used = size_t(end - s.c_str());
  return v;
}

}  // namespace

int64_t parse_token_count(std::string_view text, std::string_view flag) {
  size_t used = 0;
  double v = parse_number(text, flag, &used);
  std::string_view rest = text.substr(used);
  if (rest == "k" || rest == "K") {
    v *= 1024;
  } else if (!rest.empty()) {
    fail(flag, ": '", text, "' is not a token count (e.g. 4096 or 4k)");
  }
  if (v < 0 || v != std::floor(v) || v > double(std::numeric_limits<int32_t>::max()))
    fail(flag, ": '", text, "' is not a whole, non-negative token count below 2^31");
  return int64_t(v);
}

std::vector<int64_t> parse_token_counts(std::string_view list, std::string_view flag) {
  std::vector<int64_t> out;
  for (const auto& item : cli::split_list(list, flag)) out.push_back(parse_token_count(item, flag));
  return out;
}

std::vector<double> parse_fractions(std::string_view list, std::string_view flag, double lo,
                                    double hi) {
  std::vector<double> out;
  for (const auto& item : cli::split_list(list, flag)) {
    size_t used = 0;
    const double v = parse_number(item, flag, &used);
    if (used != item.size()) fail(flag, ": '", item, "' is not a number");
    if (v < lo || v > hi) fail(flag, ": ", item, " is outside [", lo, ", ", hi, "]");
    out.push_back(v);
  }
  return out;
}

std::vector<int> parse_ints(std::string_view list, std::string_view flag, int lo, int hi) {
  std::vector<int> out;
  for (const auto& item : cli::split_list(list, flag)) {
    size_t used = 0;
    const double v = parse_number(item, flag, &used);
    if (used != item.size() || v != std::floor(v)) fail(flag, ": '", item, "' is not an integer");
    if (v < lo || v > hi) fail(flag, ": ", item, " is outside [", lo, ", ", hi, "]");
    out.push_back(int(v));
  }
  return out;
}

std::string token_count_label(int64_t n) {
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n / 1024) + "K";
  return std::to_string(n);
}

}  // namespace tkv::bench
