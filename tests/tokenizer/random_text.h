// Random byte strings for round-trip tests: valid UTF-8 drawn from scripts
// that stress tokenizers (CJK, emoji with ZWJ and variation selectors,
// combining marks, Unicode spaces, RTL), and arbitrary (mostly invalid) bytes.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace tkv::tok::test {

std::string random_utf8(std::mt19937& rng, size_t max_code_points);
std::string random_bytes(std::mt19937& rng, size_t max_bytes);

}  // namespace tkv::tok::test
