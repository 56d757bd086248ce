// synth's presets: the shapes of real models' config.json (and test-sized
// ones), by name. The hybrids' are in synth_hybrid.cc.
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "model/synth.h"
#include "model/synth_plan.h"

namespace tkv::model {

using synth_detail::make_spec;

namespace {

SynthSpec with_llama3_rope(SynthSpec s, float factor) {
  s.llama3_factor = factor;
  s.llama3_low_freq_factor = 1.0f;
  s.llama3_high_freq_factor = 4.0f;
  s.llama3_orig_ctx = 8192;
  return s;
}

SynthSpec with_experts(SynthSpec s, int n, int used, int ff) {
  s.n_experts = n;
  s.n_experts_used = used;
  s.n_ff_expert = ff;
  return s;
}

SynthSpec with_gemma3_attention(SynthSpec s, int window) {
  s.sliding_window = window;
  s.swa_period = 6;
  s.rope_base_swa = 10000.0f;
  s.rope_linear_factor = 8.0f;
  return s;
}

// Gemma 2's attention: every other layer a window (the first one), both
// capped (scores at 50, logits at 30); one rope base.
SynthSpec with_gemma2_attention(SynthSpec s, int window) {
  s.sliding_window = window;
  s.swa_period = 2;
  s.attn_logit_softcap = 50.0f;
  s.final_logit_softcap = 30.0f;
  return s;
}

// Gemma 4's attention: window layers of head size 256 (rope base 10000),
// the global layers' head_dim with a quarter rotated (rope base 1e6);
// kv_swa > 0: the window layers' KV heads differ and the global layers' V is
// K (attention_k_eq_v).
SynthSpec gemma4(SynthSpec s, int window, int period, int kv_swa) {
  s.sliding_window = window;
  s.swa_period = period;
  s.rope_base_swa = 10000.0f;
  s.head_dim_swa = 256;
  s.rope_partial_global = 0.25f;
  s.final_logit_softcap = 30.0f;
  s.n_kv_heads_swa = kv_swa;
  s.global_v_from_k = kv_swa > 0;
  return s;
}

// Gemma 2, Gemma 3 and Gemma 4 (their configs' text_config).
void add_gemma_presets(std::vector<SynthSpec>& p) {
  // Gemma 2: window layers of 4096 tokens alternating with global ones.
  for (const SynthSpec& s : {make_spec("gemma-2-2b", "gemma2", 2304, 26, 8, 4, 256, 9216, 256000,
                                       8192, 1e4f, 1e-6f, true),
                             make_spec("gemma-2-9b", "gemma2", 3584, 42, 16, 8, 256, 14336, 256000,
                                       8192, 1e4f, 1e-6f, true),
                             make_spec("gemma-2-27b", "gemma2", 4608, 46, 32, 16, 128, 36864,
                                       256000, 8192, 1e4f, 1e-6f, true)})
    p.push_back(with_gemma2_attention(s, 4096));
  // Test-sized: 4 layers of 256 (window 16, global), scores capped.
  p.push_back(with_gemma2_attention(
      make_spec("tiny-gemma2", "gemma2", 256, 4, 4, 2, 64, 768, 512, 4096, 10000.0f, 1e-6f, true),
      16));
  // Gemma 3: window layers of 1024 tokens (rope base 10000), every sixth
  // layer global (rope base 1e6, linearly scaled by 8).
  p.push_back(with_gemma3_attention(make_spec("gemma-3-12b", "gemma3", 3840, 48, 16, 8, 256, 15360,
                                              262208, 131072, 1e6f, 1e-6f, true),
                                    1024));
  p.push_back(with_gemma3_attention(make_spec("gemma-3-27b", "gemma3", 5376, 62, 32, 16, 128, 21504,
                                              262208, 131072, 1e6f, 1e-6f, true),
                                    1024));
  p.push_back(with_gemma3_attention(
      make_spec("tiny-gemma3", "gemma3", 256, 6, 4, 2, 64, 768, 512, 4096, 1e6f, 1e-6f, true), 16));
  // Gemma 4: window layers of head size 256, global layers of 512 with a
  // quarter of each head rotated; logits softcapped at 30. The E models add
  // per-layer embeddings and KV-shared layers; 31B and 26B-A4B have fewer KV
  // heads on the global layers, whose V is K.
  SynthSpec e2b = gemma4(make_spec("gemma-4-e2b", "gemma4", 1536, 35, 8, 1, 512, 6144, 262144,
                                   131072, 1e6f, 1e-6f, true),
                         512, 5, 0);
  e2b.n_kv_shared_layers = 20;
  e2b.n_embd_per_layer = 256;
  e2b.double_wide_kv_shared_ff = true;
  p.push_back(e2b);
  SynthSpec e4b = gemma4(make_spec("gemma-4-e4b", "gemma4", 2560, 42, 8, 2, 512, 10240, 262144,
                                   131072, 1e6f, 1e-6f, true),
                         512, 6, 0);
  e4b.n_kv_shared_layers = 18;
  e4b.n_embd_per_layer = 256;
  p.push_back(e4b);
  p.push_back(gemma4(make_spec("gemma-4-31b", "gemma4", 5376, 60, 32, 4, 512, 21504, 262144, 262144,
                               1e6f, 1e-6f, true),
                     1024, 6, 16));
  p.push_back(with_experts(gemma4(make_spec("gemma-4-26b-a4b", "gemma4", 2816, 30, 16, 2, 512, 2112,
                                            262144, 262144, 1e6f, 1e-6f, true),
                                  1024, 6, 8),
                           128, 8, 704));
  // Test-sized: 6 layers of 256 (5 window layers of head size 32, then a
  // global one of 64), window 16, 2 experts of 4 chosen beside the FFN.
  SynthSpec tiny4 = with_experts(gemma4(make_spec("tiny-gemma4", "gemma4", 256, 6, 4, 1, 64, 512,
                                                  512, 4096, 1e6f, 1e-6f, true),
                                        16, 6, 2),
                                 4, 2, 256);
  tiny4.head_dim_swa = 32;
  p.push_back(tiny4);
  // Test-sized E model: 8 layers (window layers of head size 32, every
  // fourth global), the last 4 reading layers 2 and 3's K/V, per-layer
  // embeddings of 64, the KV-shared layers' FFN twice as wide.
  SynthSpec tiny4e = gemma4(
      make_spec("tiny-gemma4-e", "gemma4", 256, 8, 4, 1, 64, 512, 512, 4096, 1e6f, 1e-6f, true), 16,
      4, 0);
  tiny4e.head_dim_swa = 32;
  tiny4e.n_kv_shared_layers = 4;
  tiny4e.n_embd_per_layer = 64;
  tiny4e.double_wide_kv_shared_ff = true;
  p.push_back(tiny4e);
}

// The shapes of the real models' config.json.
std::vector<SynthSpec> all_presets() {
  std::vector<SynthSpec> p;
  p.push_back(make_spec("tiny", "llama", 256, 2, 4, 2, 64, 768, 512, 2048, 10000.0f, 1e-5f, false));
  p.push_back(with_llama3_rope(make_spec("llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256,
                                         131072, 500000.0f, 1e-5f, true),
                               32.0f));
  p.push_back(with_llama3_rope(make_spec("llama-3.2-3b", "llama", 3072, 28, 24, 8, 128, 8192,
                                         128256, 131072, 500000.0f, 1e-5f, true),
                               32.0f));
  p.push_back(with_llama3_rope(make_spec("llama-3.1-8b", "llama", 4096, 32, 32, 8, 128, 14336,
                                         128256, 131072, 500000.0f, 1e-5f, false),
                               8.0f));
  p.push_back(make_spec("qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1e6f,
                        1e-6f, true));
  p.push_back(make_spec("qwen2.5-7b", "qwen2", 3584, 28, 28, 4, 128, 18944, 152064, 32768, 1e6f,
                        1e-6f, false));
  p.push_back(make_spec("qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6f,
                        1e-6f, false));
  p.push_back(make_spec("mistral-7b", "llama", 4096, 32, 32, 8, 128, 14336, 32768, 32768, 1e6f,
                        1e-5f, false));
  p.push_back(with_experts(make_spec("qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 128, 6144,
                                     151936, 40960, 1e6f, 1e-6f, false),
                           128, 8, 768));
  SynthSpec oss = with_experts(make_spec("gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 64, 2880,
                                         201088, 131072, 150000.0f, 1e-5f, false),
                               32, 4, 2880);
  oss.sliding_window = 128;
  oss.yarn_factor = 32.0f;
  oss.yarn_orig_ctx = 4096;
  p.push_back(oss);
  p.push_back(with_experts(
      make_spec("tiny-moe", "qwen3moe", 256, 2, 4, 2, 64, 768, 512, 2048, 1e6f, 1e-6f, false), 8, 2,
      128));
  SynthSpec v01 = make_spec("mistral-7b-v0.1", "llama", 4096, 32, 32, 8, 128, 14336, 32000, 32768,
                            10000.0f, 1e-5f, false);
  v01.sliding_window = 4096;
  p.push_back(v01);
  add_gemma_presets(p);
  synth_detail::add_qwen35_presets(p);
  return p;
}

}  // namespace

std::vector<std::string> synth_preset_names() {
  std::vector<std::string> names;
  for (const auto& s : all_presets()) names.push_back(s.preset);
  return names;
}

SynthSpec synth_preset(std::string_view name) {
  std::string known;
  for (const auto& s : all_presets()) {
    if (s.preset == name) return s;
    known += (known.empty() ? "" : ", ") + s.preset;
  }
  fail("synth: unknown model '", name, "' (known: ", known, ")");
}

}  // namespace tkv::model
