// Pieces shared by the codec implementations (internal to kv/codec).
#pragma once

#include <memory>

#include "kv/codec/codec.h"

namespace tkv::kv::detail {

// Largest finite f16 magnitude; anything stored as f16 (f16 elements, block
// scales, tq norms) must not exceed it.
inline constexpr float kF16Max = 65504.0f;

// Throws the input-validation error of the NaN/Inf policy (docs/KV_FORMAT.md):
// the first non-finite coordinate of x is named.
[[noreturn]] void reject_non_finite(const CodecSpec& spec, int head_dim, const float* x);
// Throws the error for a finite value that a codec would have to store as an
// f16 beyond its range (`what` says which quantity, e.g. "vector norm").
[[noreturn]] void reject_f16_overflow(const CodecSpec& spec, int head_dim, const char* what,
                                      double value);

// Validates the page_tokens / slot arguments of encode/decode and the range of
// score/accumulate (a bug in the caller, reported as an error, not UB).
void check_slot(const CodecSpec& spec, int page_tokens, int slot);
void check_range(const CodecSpec& spec, int page_tokens, int begin, int end);

std::unique_ptr<Codec> make_float_codec(const CodecSpec& spec, int head_dim);
std::unique_ptr<Codec> make_block_codec(const CodecSpec& spec, int head_dim,
                                        std::shared_ptr<const Rotation> rotation);
std::unique_ptr<Codec> make_tq_codec(const CodecSpec& spec, int head_dim,
                                     std::shared_ptr<const Rotation> rotation);

}  // namespace tkv::kv::detail
