#include "tensor/dtype.h"

#include <cctype>
#include <string>

#include "common/error.h"

namespace tkv {

namespace {

// Supported flags are set for the types with kernels in tensor/.
constexpr DTypeTraits kTraits[] = {
    {DType::F32, "f32", 1, 4, true},
    {DType::F16, "f16", 1, 2, true},
    {DType::Q4_0, "q4_0", 32, 18, true},
    {DType::Q4_1, "q4_1", 32, 20, true},
    {DType::Q5_0, "q5_0", 32, 22, true},
    {DType::Q5_1, "q5_1", 32, 24, true},
    {DType::Q8_0, "q8_0", 32, 34, true},
    {DType::Q8_1, "q8_1", 32, 36, false},
    {DType::Q2_K, "q2_K", 256, 84, true},
    {DType::Q3_K, "q3_K", 256, 110, true},
    {DType::Q4_K, "q4_K", 256, 144, true},
    {DType::Q5_K, "q5_K", 256, 176, true},
    {DType::Q6_K, "q6_K", 256, 210, true},
    {DType::Q8_K, "q8_K", 256, 292, false},
    {DType::IQ2_XXS, "iq2_xxs", 256, 66, false},
    {DType::IQ2_XS, "iq2_xs", 256, 74, false},
    {DType::IQ3_XXS, "iq3_xxs", 256, 98, false},
    {DType::IQ1_S, "iq1_s", 256, 50, false},
    {DType::IQ4_NL, "iq4_nl", 32, 18, true},
    {DType::IQ3_S, "iq3_s", 256, 110, false},
    {DType::IQ2_S, "iq2_s", 256, 82, false},
    {DType::IQ4_XS, "iq4_xs", 256, 136, true},
    {DType::I8, "i8", 1, 1, false},
    {DType::I16, "i16", 1, 2, false},
    {DType::I32, "i32", 1, 4, false},
    {DType::I64, "i64", 1, 8, false},
    {DType::F64, "f64", 1, 8, false},
    {DType::IQ1_M, "iq1_m", 256, 56, false},
    {DType::BF16, "bf16", 1, 2, true},
    {DType::TQ1_0, "tq1_0", 256, 54, false},
    {DType::TQ2_0, "tq2_0", 256, 66, false},
    {DType::MXFP4, "mxfp4", 32, 17, true},
};

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t raw_type) {
  for (const auto& t : kTraits)
    if (uint32_t(t.type) == raw_type) return t;
  return std::nullopt;
}

const DTypeTraits& traits(DType type) {
  for (const auto& t : kTraits)
    if (t.type == type) return t;
  fail("internal error: unknown dtype ", uint32_t(type));
}

std::optional<DType> parse_dtype(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    for (auto& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
    return r;
  };
  const std::string want = lower(name);
  for (const auto& t : kTraits)
    if (lower(t.name) == want) return t.type;
  return std::nullopt;
}

}  // namespace tkv
