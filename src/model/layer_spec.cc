#include "model/layer_spec.h"

#include "common/error.h"

namespace tkv::model {

const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::Full:
      return "full attention";
    case AttentionKind::Window:
      return "sliding-window attention";
    case AttentionKind::SharedKv:
      return "attention over another layer's KV";
    case AttentionKind::Recurrent:
      return "recurrent (Gated DeltaNet) state";
  }
  return "?";
}

const char* ffn_kind_name(FfnKind k) {
  switch (k) {
    case FfnKind::Dense:
      return "dense FFN";
    case FfnKind::Moe:
      return "mixture-of-experts FFN";
    case FfnKind::MoePlusDense:
      return "mixture-of-experts FFN beside a dense one";
  }
  return "?";
}

std::string unsupported_reason(const LayerSpec& s, int l) {
  const AttentionSpec& at = s.attention;
  // What the forward runs: model/forward_attention.cc, model/forward_ffn.cc.
  const auto no = [&](const char* what, const std::string& source) {
    return str("layer ", l, ": ", what, " (", source, ") is not supported yet");
  };
  switch (at.kind) {
    case AttentionKind::Full:
      break;
    case AttentionKind::Window:
      if (at.window <= 0)
        return str("layer ", l, ": sliding-window attention without a window size ",
                   "(attention.sliding_window is missing or 0)");
      break;
    case AttentionKind::SharedKv:
      if (at.kv_source < 0 || at.kv_source >= l)
        return str("layer ", l, ": attention over another layer's KV without an earlier layer ",
                   "to read (attention.shared_kv_layers)");
      break;
    case AttentionKind::Recurrent:
      // The geometry comes with the architectures that have such layers
      // (ModelConfig::from_gguf: qwen35, qwen35moe).
      if (at.state_size <= 0) return no(attention_kind_name(at.kind), "full_attention_interval");
      break;
  }
  return "";
}

}  // namespace tkv::model
