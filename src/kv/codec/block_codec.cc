#include "common/error.h"
#include "kv/codec/codec_internal.h"
namespace tkv::kv::detail {
std::unique_ptr<Codec> make_block_codec(const CodecSpec& spec, int,
                                        std::shared_ptr<const Rotation>) {
  fail("kv codec ", spec.name(), ": not available yet");
}
}  // namespace tkv::kv::detail
