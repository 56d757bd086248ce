// Tensor element types, numbered exactly as ggml numbers them in GGUF files.
// Every type ggml has defined is listed so that the GGUF reader can compute
// (and bounds-check) the byte size of any tensor; `supported` says which ones
// turbokv can compute with. Block layouts are in tensor/blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tkv {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct DTypeTraits {
  DType type;
  std::string_view name;  // as ggml spells it: "f16", "q4_K", ...
  uint32_t block_size;    // elements per block
  uint32_t block_bytes;   // bytes per block
  bool supported;         // turbokv has dequant + matmul kernels for it
};

// Traits of a known type; nullopt for a number ggml never defined.
std::optional<DTypeTraits> dtype_traits(uint32_t raw_type);
const DTypeTraits& traits(DType t);  // t must be a known type

inline std::string_view dtype_name(DType t) {
  return traits(t).name;
}
// Parses "f16", "Q8_0", "q4_k" (case-insensitive); nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const auto& tr = traits(t);
  return size_t(n / tr.block_size) * tr.block_bytes;
}

}  // namespace tkv
