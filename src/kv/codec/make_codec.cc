// The codec factory and the validation helpers every codec shares.
#include <cmath>

#include <vector>

#include "common/error.h"
#include "kv/codec/codec.h"
#include "kv/codec/codec_internal.h"

namespace tkv::kv {

namespace detail {

void reject_non_finite(const CodecSpec& spec, int head_dim, const float* x) {
  for (int i = 0; i < head_dim; ++i) {
    if (!std::isfinite(x[i]))
      fail("kv encode (", spec.name(), ", head_dim ", head_dim, "): coordinate ", i, " is ",
           std::isnan(x[i]) ? "NaN" : (x[i] > 0 ? "+Inf" : "-Inf"),
           "; non-finite keys/values are rejected (see docs/KV_FORMAT.md)");
  }
  fail("kv encode (", spec.name(), ", head_dim ", head_dim,
       "): non-finite intermediate from finite input (internal error)");
}

void reject_f16_overflow(const CodecSpec& spec, int head_dim, const char* what, double value) {
  fail("kv encode (", spec.name(), ", head_dim ", head_dim, "): ", what, " ", value,
       " exceeds the f16 range (65504) this codec stores it in; rejected (see docs/KV_FORMAT.md)");
}

void check_slot(const CodecSpec& spec, int page_tokens, int slot) {
  if (page_tokens <= 0 || slot < 0 || slot >= page_tokens)
    fail("kv codec ", spec.name(), ": slot ", slot, " outside a page of ", page_tokens, " tokens");
}

void check_range(const CodecSpec& spec, int page_tokens, int begin, int end) {
  if (page_tokens <= 0 || begin < 0 || end > page_tokens || begin > end)
    fail("kv codec ", spec.name(), ": slot range [", begin, ", ", end, ") outside a page of ",
         page_tokens, " tokens");
}

}  // namespace detail

void Codec::prefetch(const uint8_t* page, int page_tokens) const {
  const size_t bytes = page_bytes(page_tokens);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(page + off, 0, 3);
}

void Codec::copy_slot(const uint8_t* src, int src_tokens, int src_slot, uint8_t* dst,
                      int dst_tokens, int dst_slot) const {
  std::vector<float> x(static_cast<size_t>(head_dim_));
  decode(src, src_tokens, src_slot, x.data());
  encode(x.data(), dst, dst_tokens, dst_slot);
}

std::unique_ptr<Codec> make_codec(const CodecSpec& spec, int head_dim,
                                  std::shared_ptr<const Rotation> rotation) {
  if (head_dim < 1 || head_dim > 4096)
    fail("kv codec ", spec.name(), ": head_dim ", head_dim, " is outside 1..4096");
  const bool rotates =
      spec.kind == CodecKind::TQ ||
      ((spec.kind == CodecKind::Q8_0 || spec.kind == CodecKind::Q4_0) && spec.rotate);
  if (rotates) {
    if (!rotation) fail("kv codec ", spec.name(), ": needs the layer's rotation, none was given");
    if (rotation->dim() != head_dim)
      fail("kv codec ", spec.name(), ": rotation of dimension ", rotation->dim(),
           " does not match head_dim ", head_dim);
  }
  switch (spec.kind) {
    case CodecKind::F32:
    case CodecKind::F16:
      return detail::make_float_codec(spec, head_dim);
    case CodecKind::Q8_0:
    case CodecKind::Q4_0:
      return detail::make_block_codec(spec, head_dim, rotates ? rotation : nullptr);
    case CodecKind::TQ:
      if (spec.bits < 1 || spec.bits > 4)
        fail("kv codec ", spec.name(), ": bits ", spec.bits, " outside 1..4");
      return detail::make_tq_codec(spec, head_dim, rotation);
  }
  fail("kv codec: unknown codec kind ", int(spec.kind));
}

}  // namespace tkv::kv
