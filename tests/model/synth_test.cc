// Synthesized models of every architecture: they load, and the forward pass
// through the real KvCache matches the independent reference forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "common/test_util.h"
#include "hwy/targets.h"
#include "kv/kv_cache.h"
#include "model/context.h"
#include "model/model.h"
#include "model/synth.h"
#include "reference_forward.h"
#include "tensor/kernel_config.h"
#include "tensor/matmul.h"
#include "test_models.h"

namespace tkv::model {
namespace {

struct ArchCase {
  const char* preset;
  const char* type;
};

class SynthArch : public ::testing::TestWithParam<ArchCase> {};

TEST_P(SynthArch, LogitsMatchReferenceForward) {
  const auto spec = test::small_spec(GetParam().preset);
  const std::string path = test::write_model(spec, GetParam().type);
  const auto m = Model::load(path);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch_name, spec.arch);
  EXPECT_EQ(c.tied_output, spec.tied_output);
  EXPECT_EQ(c.qkv_bias, spec.arch == "qwen2");
  EXPECT_EQ(c.qk_norm, spec.arch == "qwen3" || spec.arch == "qwen3moe");
  EXPECT_EQ(c.layers[0].ffn.kind, spec.n_experts > 0 ? FfnKind::Moe : FfnKind::Dense);
  EXPECT_EQ(c.sliding_window, spec.sliding_window);
  EXPECT_EQ(m->weights().rope_freq_factors.empty(), spec.llama3_factor == 0.0f);
  const DType wtype = m->weights().layers[0].wq.type;
  if (!integer_path_active(wtype)) {
    EXPECT_LE(test::max_logit_error(path, 24, 7, 2), 1e-3)
        << GetParam().preset << " " << GetParam().type;
    return;
  }
  // Quantized weights on the integer path: the reference quantizes its
  // activations as the kernels do, but it computes them in double and the
  // forward pass in f32, so a value within rounding of a quantization
  // boundary may land one step apart now and then (each such step moves a
  // logit by ~1e-2). The forward pass's logic is checked exactly on a target
  // where these types take the float path.
  EXPECT_LE(test::max_logit_error(path, 24, 7, 2), 0.1)
      << GetParam().preset << " " << GetParam().type;
  bool checked_float_path = false;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    if (integer_path_active(wtype)) continue;
    EXPECT_LE(test::max_logit_error(path, 24, 7, 2), 1e-3)
        << GetParam().preset << " " << GetParam().type << " on " << hwy::TargetName(target);
    checked_float_path = true;
    break;
  }
  hwy::SetSupportedTargetsForTest(0);
  // (Every build compiles a target without native integer kernels, unless
  // TURBOKV_SIMD has narrowed the process to one target.)
  if (kernel_config().simd.empty()) {
    EXPECT_TRUE(checked_float_path) << "no float-path target";
  }
}

// A mixture-of-experts prefill whose chunks run the GEMM (more rows than
// kIntMatmulMaxTokens), with experts gathering rows of both kinds.
TEST(SynthMoe, PrefillChunksMatchReferenceForward) {
  const std::string path = test::write_model(test::small_spec("qwen3-30b-a3b"), "f32");
  EXPECT_LE(test::max_logit_error(path, 48, 33, 2), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Archs, SynthArch,
    ::testing::Values(ArchCase{"tiny", "f32"}, ArchCase{"llama-3.1-8b", "f32"},
                      ArchCase{"llama-3.2-1b", "f16"}, ArchCase{"qwen2.5-7b", "f32"},
                      ArchCase{"qwen3-8b", "f32"}, ArchCase{"mistral-7b-v0.1", "f16"},
                      ArchCase{"qwen3-8b", "bf16"}, ArchCase{"llama-3.1-8b", "q8_0"},
                      ArchCase{"qwen2.5-7b", "q4_K"}, ArchCase{"mistral-7b", "q4_K_M"},
                      ArchCase{"qwen3-30b-a3b", "f32"}, ArchCase{"qwen3-30b-a3b", "f16"},
                      ArchCase{"qwen3-30b-a3b", "q8_0"}, ArchCase{"qwen3-30b-a3b", "q4_K_M"}),
    [](const auto& info) {
      std::string n = std::string(info.param.preset) + "_" + info.param.type;
      for (auto& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

// Model::fault_in_weights maps every matrix the forward pass reads; with
// its stop flag set it maps nothing more (`turbokv chat` stops it when the
// first message arrives).
TEST(ModelFaultIn, MapsEveryMatrixUnlessStopped) {
  const auto model =
      Model::load(test::write_model(test::small_spec("llama-3.2-1b"), "f16"), WeightMemory::kMap);
  const ModelWeights& w = model->weights();
  uint64_t matrices = w.output.total_bytes();
  for (const LayerWeights& L : w.layers)
    for (const WeightMatrix* m : L.matrices()) matrices += m->total_bytes();
  const void* mapping = w.layers[0].w_up.data;
  const long long before = resident_bytes_of_mapping(mapping);
  if (before < 0) GTEST_SKIP() << "/proc/self/smaps is not readable here";
  ASSERT_LT(before, (long long)(matrices / 2)) << "loading reads the metadata, not the weights";
  std::atomic<bool> stop{true};
  model->fault_in_weights(&stop);
  EXPECT_EQ(resident_bytes_of_mapping(mapping), before);
  model->fault_in_weights();
  EXPECT_GE(resident_bytes_of_mapping(mapping), (long long)matrices);
}

// The permissions ("r--p") of the mapping that holds p, from /proc/self/maps
// ("lo-hi perms offset dev inode path"); empty when none does.
std::string permissions_of_mapping(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  unsigned long long lo = 0, hi = 0;
  char perms[8] = {};
  std::string line;
  while (std::getline(maps, line))
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &lo, &hi, perms) == 3 && at >= lo && at < hi)
      return perms;
  return {};
}

// The last token's logits of `tokens` through a fresh cache.
std::vector<float> last_logits(const Model& model, const std::vector<int32_t>& tokens,
                               ThreadPool& pool) {
  kv::KvCache seq(model.kv_shape(64), kv::KvConfig{});
  ExecutionContext ctx;
  const BatchItem item{&seq, tokens, Logits::kLast};
  const auto st = model.eval_batch(ctx, std::span<const BatchItem>(&item, 1), pool);
  EXPECT_TRUE(st[0].ok()) << st[0].message;
  const auto l = ctx.logits(0);
  return std::vector<float>(l.begin(), l.end());
}

// A merged ffn_gate_up_exps (each expert's gate rows, then its up rows)
// is read as the separate gate and up tensors: the same logits, bit for bit.
TEST(SynthMoe, MergedGateUpExpertsGiveTheSameLogits) {
  const std::string path = test::write_model(test::small_spec("qwen3-30b-a3b"), "q8_0");
  const std::string merged = path + ".merged.gguf";
  const gguf::GgufFile src = gguf::GgufFile::open(path);
  test::rewrite_gguf(path, merged, nullptr, [&](test::TensorCopy& t) {
    const size_t at = t.name.find("ffn_up_exps");
    if (at != std::string::npos) return false;  // inside the merged tensor
    const size_t g = t.name.find("ffn_gate_exps");
    if (g == std::string::npos) return true;
    const gguf::TensorInfo* up =
        src.find_tensor(t.name.substr(0, g) + "ffn_up_exps" + t.name.substr(g + 13));
    const int64_t X = t.shape[2];
    const size_t per = t.bytes.size() / size_t(X);
    std::vector<uint8_t> both;
    for (int64_t e = 0; e < X; ++e) {
      both.insert(both.end(), t.bytes.begin() + ptrdiff_t(e * per),
                  t.bytes.begin() + ptrdiff_t((e + 1) * per));
      both.insert(both.end(), up->data + e * per, up->data + (e + 1) * per);
    }
    t.name = t.name.substr(0, g) + "ffn_gate_up_exps" + t.name.substr(g + 13);
    t.shape[1] *= 2;
    t.bytes = std::move(both);
    return true;
  });
  const auto a = Model::load(path), b = Model::load(merged);
  ASSERT_NE(gguf::GgufFile::open(merged).find_tensor("blk.0.ffn_gate_up_exps.weight"), nullptr);
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = {1, 17, 301, 42, 7, 99, 5};
  EXPECT_TRUE(test::same_bits(last_logits(*a, tokens, pool), last_logits(*b, tokens, pool)));
}

// --no-mmap's copy holds the file's bytes: read whole at load (nothing left
// to fault in), on a 2 MiB boundary (a huge page can back it), read-only.
// Its F16 matrices are reordered into row blocks, whose decode sums take
// the f32 GEMM's order (and whose prefill, where AMX runs it, AMX's on the
// rows): logits within float rounding of the mapped file's, and bit for bit
// the mapped file's with row blocks off.
TEST(ModelWeightMemory, CopyGivesTheMappedFilesLogits) {
  const test::PreferRowBlocks prefer;
  const std::string path = test::write_model(test::small_spec("llama-3.2-1b"), "f16");
  const std::vector<int32_t> tokens = {1, 17, 301, 42, 7};
  ThreadPool pool(2);
  const auto mapped = Model::load(path, WeightMemory::kMap);
  const auto copied = Model::load(path, WeightMemory::kCopy);
  EXPECT_EQ(mapped->file_memory(), FileMemory::kMap);
  ASSERT_EQ(copied->file_memory(), FileMemory::kCopy);
  const uint8_t* bytes = copied->gguf().mapping()->data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes) % (uintptr_t(2) << 20), 0u);
  const long long resident = resident_bytes_of_mapping(bytes);
  if (resident >= 0) {
    EXPECT_GE(resident, (long long)copied->file_bytes());
  }
  EXPECT_EQ(permissions_of_mapping(bytes), "r--p");

  EXPECT_EQ(mapped->row_block_matrices(), 0);
  const auto want = last_logits(*mapped, tokens, pool);
  const auto got = last_logits(*copied, tokens, pool);
  ASSERT_EQ(got.size(), want.size());
  float scale = 0, diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    diff = std::max(diff, std::fabs(got[i] - want[i]));
  }
  EXPECT_LE(diff, 1e-4f * scale);
  // token_embd (tied: the output too) and every layer's seven matrices.
  EXPECT_EQ(copied->row_block_matrices(), 1 + 7 * copied->config().n_layers);
  test::set_kernel_switch(&KernelConfig::row_blocks, KernelChoice::kOff);
  const auto rows = Model::load(path, WeightMemory::kCopy);
  EXPECT_EQ(rows->row_block_matrices(), 0);
  EXPECT_TRUE(test::same_bits(last_logits(*rows, tokens, pool), want));
}

// A model whose matrices are row blocks keeps the batch invariance of
// batched decode: two sequences prefilled and decoded together give the
// bits each gives alone.
TEST(ModelWeightMemory, RowBlockModelsBatchesEqualEachAlone) {
  const test::PreferRowBlocks prefer;
  const auto model =
      Model::load(test::write_model(test::small_spec("llama-3.2-1b"), "f16"), WeightMemory::kCopy);
  ASSERT_GT(model->row_block_matrices(), 0);
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> prompts = {{1, 17, 301, 42, 7},
                                                     {1, 99, 5, 260, 31, 8, 77}};
  const std::vector<int32_t> next = {11, 12};
  // Prefill then one decode token, for the sequences `which` in one batch
  // per step; the logits of each step, per sequence.
  auto run = [&](const std::vector<size_t>& which) {
    std::vector<std::unique_ptr<kv::KvCache>> seqs;
    for (size_t i = 0; i < which.size(); ++i)
      seqs.push_back(std::make_unique<kv::KvCache>(model->kv_shape(64), kv::KvConfig{}));
    std::vector<std::vector<float>> out(which.size());
    ExecutionContext ctx;
    for (int step = 0; step < 2; ++step) {
      std::vector<BatchItem> items;
      for (size_t i = 0; i < which.size(); ++i) {
        const size_t s = which[i];
        items.push_back(step == 0 ? BatchItem{seqs[i].get(), prompts[s], Logits::kLast}
                                  : BatchItem{seqs[i].get(), std::span<const int32_t>(&next[s], 1),
                                              Logits::kLast});
      }
      const auto st = model->eval_batch(ctx, items, pool);
      for (size_t i = 0; i < which.size(); ++i) {
        EXPECT_TRUE(st[i].ok()) << st[i].message;
        const auto l = ctx.logits(i);
        out[i].insert(out[i].end(), l.begin(), l.end());
      }
    }
    return out;
  };
  const auto together = run({0, 1});
  EXPECT_TRUE(test::same_bits(together[0], run({0})[0]));
  EXPECT_TRUE(test::same_bits(together[1], run({1})[0]));
}

// kAuto copies only where the copy can be in huge pages, the file is large
// enough to gain and fits well in the memory available; the explicit
// choices are taken as given.
TEST(ModelWeightMemory, AutoCopiesWhereHugePagesAndRoomAllowIt) {
  constexpr uint64_t kGiB = uint64_t(1) << 30;
  EXPECT_EQ(choose_file_memory(WeightMemory::kAuto, 2 * kGiB, true, 16 * kGiB), FileMemory::kCopy);
  EXPECT_EQ(choose_file_memory(WeightMemory::kAuto, 2 * kGiB, false, 16 * kGiB), FileMemory::kMap);
  EXPECT_EQ(choose_file_memory(WeightMemory::kAuto, 13 * kGiB, true, 16 * kGiB), FileMemory::kMap);
  EXPECT_EQ(choose_file_memory(WeightMemory::kAuto, 2 * kGiB, true, 0), FileMemory::kMap);
  EXPECT_EQ(choose_file_memory(WeightMemory::kAuto, 64 << 20, true, 16 * kGiB), FileMemory::kCopy);
  EXPECT_EQ(choose_file_memory(WeightMemory::kAuto, 63 << 20, true, 16 * kGiB), FileMemory::kMap);
  EXPECT_EQ(choose_file_memory(WeightMemory::kMap, 2 * kGiB, true, 16 * kGiB), FileMemory::kMap);
  EXPECT_EQ(choose_file_memory(WeightMemory::kCopy, 13 * kGiB, false, 0), FileMemory::kCopy);
  for (WeightMemory m : {WeightMemory::kAuto, WeightMemory::kMap, WeightMemory::kCopy})
    EXPECT_EQ(parse_weight_memory(weight_memory_name(m)), m);
  EXPECT_EQ(parse_weight_memory("huge"), std::nullopt);
}

TEST(Synth, RealVocabularyFromLlamaBpe) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-bpe.gguf");
  auto spec = test::small_spec("llama-3.1-8b");
  spec.n_embd = 64;  // 128256 x 64 keeps the reference's double copy of the embedding small
  spec.n_heads = 2;
  spec.n_kv_heads = 1;
  spec.head_dim = 32;
  spec.n_ff = 128;
  const std::string path = test::write_model(spec, "f16", 7, vocab);
  const auto m = Model::load(path);
  EXPECT_EQ(m->config().n_vocab, 128256);
  const auto copied = m->gguf().get_strings("tokenizer.ggml.tokens");
  const auto original = gguf::GgufFile::open(vocab);
  ASSERT_NE(copied, nullptr);
  EXPECT_EQ(*copied, *original.get_strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(m->gguf().get_string("tokenizer.ggml.model"),
            original.get_string("tokenizer.ggml.model"));
  EXPECT_EQ(m->gguf().get_string("tokenizer.ggml.pre"), original.get_string("tokenizer.ggml.pre"));
  ASSERT_NE(m->gguf().find("tokenizer.ggml.merges"), nullptr);
  EXPECT_LE(test::max_logit_error(path, 8, 4, 2), 1e-3);
}

TEST(Synth, InventedVocabularyIsSpmWithByteTokens) {
  const auto m = Model::load(test::write_model(test::small_spec("tiny")));
  const auto* tokens = m->gguf().get_strings("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ(m->gguf().get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  std::set<std::string> unique(tokens->begin(), tokens->end());
  EXPECT_EQ(unique.size(), tokens->size());
  const auto types = m->gguf().get_ints("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ((*types)[3], 6);    // byte
  EXPECT_EQ((*types)[300], 1);  // normal
  EXPECT_EQ(m->gguf().get_int("tokenizer.ggml.bos_token_id"), 1);
}

std::string file_bytes(const std::string& path) {
  return read_file(path);
}

TEST(Synth, DeterministicForTheSameOptionsWhateverTheThreads) {
  const auto spec = test::small_spec("qwen2.5-7b");
  const std::string dir = test::temp_dir();
  ThreadPool pool(3);
  SynthOptions a;
  a.type = "q8_0";
  a.seed = 42;
  SynthOptions b = a;
  b.pool = &pool;
  uint64_t last_done = 0, calls = 0;
  b.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GT(done, last_done);
    EXPECT_LE(done, total);
    last_done = done;
    ++calls;
  };
  const auto ra = write_synth_model(spec, a, dir + "/a.gguf");
  write_synth_model(spec, b, dir + "/b.gguf");
  EXPECT_EQ(file_bytes(dir + "/a.gguf"), file_bytes(dir + "/b.gguf"));
  EXPECT_EQ(calls, ra.n_tensors);
  EXPECT_EQ(last_done, ra.tensor_bytes);
  SynthOptions c = a;
  c.seed = 43;
  write_synth_model(spec, c, dir + "/c.gguf");
  EXPECT_NE(file_bytes(dir + "/a.gguf"), file_bytes(dir + "/c.gguf"));
  EXPECT_NE(Model::load(dir + "/a.gguf")->fingerprint(),
            Model::load(dir + "/c.gguf")->fingerprint());
}

TEST(Synth, LayersOverrideKeepsShapes) {
  SynthOptions o;
  o.layers = 3;
  const auto spec = test::small_spec("qwen3-8b");
  const std::string path = test::temp_dir() + "/l3.gguf";
  write_synth_model(spec, o, path);
  const auto m = Model::load(path);
  EXPECT_EQ(m->config().n_layers, 3);
  EXPECT_EQ(m->config().n_ff, spec.n_ff);
  EXPECT_EQ(m->gguf().get_int("qwen3.block_count"), 3);
}

TEST(Synth, WeightTypesAndF16Fallback) {
  auto spec = test::small_spec("tiny");
  spec.n_ff = 320;  // ffn_down rows of 320: not a multiple of 256 -> f16 under q4_K
  const auto m = Model::load(test::write_model(spec, "q4_K"));
  const gguf::GgufFile& f = m->gguf();
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, DType::Q4_K);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight")->type, DType::Q4_K);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, DType::F16);
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->type, DType::F32);
  EXPECT_EQ(f.find_tensor("output_norm.weight")->type, DType::F32);

  const auto mix = Model::load(test::write_model(test::small_spec("mistral-7b"), "q4_K_M"));
  EXPECT_EQ(mix->gguf().find_tensor("output.weight")->type, DType::Q6_K);
  // use_more_bits(layer, 2 layers): layer 1 (the last eighth) gets q6_K, layer 0 not.
  EXPECT_EQ(mix->gguf().find_tensor("blk.0.attn_v.weight")->type, DType::Q4_K);
  EXPECT_EQ(mix->gguf().find_tensor("blk.1.attn_v.weight")->type, DType::Q6_K);
  EXPECT_EQ(mix->gguf().find_tensor("blk.1.ffn_down.weight")->type, DType::Q6_K);
  EXPECT_EQ(mix->gguf().find_tensor("blk.1.attn_q.weight")->type, DType::Q4_K);

  SynthOptions bad;
  bad.type = "q9_9";
  EXPECT_THROW(write_synth_model(spec, bad, test::temp_dir() + "/x.gguf"), Error);
  EXPECT_THROW(synth_preset("gpt-5"), Error);
}

// The presets carry the published parameter counts of the real models (plus
// the 64 or 32 rope_freqs values llama.cpp's converter adds for Llama 3).
TEST(Synth, PresetsHaveRealShapes) {
  struct Expect {
    const char* name;
    uint64_t params;
  };
  for (const Expect e :
       {Expect{"llama-3.2-1b", 1235814400ull + 32}, Expect{"llama-3.1-8b", 8030261248ull + 64},
        Expect{"qwen2.5-7b", 7615616512ull}, Expect{"qwen3-8b", 8190735360ull},
        Expect{"mistral-7b", 7248023552ull}}) {
    gguf::GgufWriter w;  // metadata and tensor plan only; nothing is generated
    const auto r = build_synth_model(synth_preset(e.name), {}, w);
    EXPECT_EQ(r.n_params, e.params) << e.name;
  }
  const auto one_b = synth_preset("llama-3.2-1b");
  EXPECT_EQ(one_b.n_vocab, 128256);
  EXPECT_TRUE(one_b.tied_output);
  EXPECT_EQ(one_b.head_dim, 64);
  EXPECT_EQ(synth_preset("mistral-7b-v0.1").sliding_window, 4096);
  for (const auto& name : synth_preset_names()) EXPECT_EQ(synth_preset(name).preset, name);
}

// The shapes of every tensor of a file, by name.
std::map<std::string, std::vector<int64_t>> tensor_shapes(const gguf::GgufFile& f) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& t : f.tensors()) out[t.name] = t.shape;
  return out;
}

// A Gemma 3 file holds what llama.cpp's gemma3 loader reads: the window, its
// period and both rope bases, the global layers' linear rope scaling, and per
// layer the QK norms and the norms after the attention and after the FFN;
// the output is tied to the embedding.
TEST(Synth, Gemma3MetadataAndTensors) {
  const std::string path = test::temp_dir() + "/gemma3.gguf";
  SynthOptions o;
  const auto r = write_synth_model(synth_preset("tiny-gemma3"), o, path);
  const auto f = gguf::GgufFile::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.get_int("gemma3.block_count"), 6);
  EXPECT_EQ(f.get_int("gemma3.attention.sliding_window"), 16);
  EXPECT_EQ(f.get_int("gemma3.attention.sliding_window_pattern"), 6);
  EXPECT_EQ(f.get_float("gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(f.get_float("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_EQ(f.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(f.get_float("gemma3.rope.scaling.factor"), 8.0);
  EXPECT_EQ(f.get_int("gemma3.attention.key_length"), 64);
  EXPECT_EQ(f.get_int("gemma3.attention.value_length"), 64);
  EXPECT_EQ(f.get_int("gemma3.attention.head_count_kv"), 2);
  EXPECT_NEAR(*f.get_float("gemma3.attention.layer_norm_rms_epsilon"), 1e-6, 1e-12);
  EXPECT_EQ(f.find("gemma3.final_logit_softcapping"), nullptr);

  const auto shapes = tensor_shapes(f);
  using Shape = std::vector<int64_t>;
  std::map<std::string, Shape> want = {{"token_embd.weight", Shape{256, 512}},
                                       {"output_norm.weight", Shape{256}}};
  for (int l = 0; l < 6; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* norm : {"attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"})
      want[p + norm + ".weight"] = Shape{256};
    want[p + "attn_q.weight"] = Shape{256, 4 * 64};
    want[p + "attn_k.weight"] = Shape{256, 2 * 64};
    want[p + "attn_v.weight"] = Shape{256, 2 * 64};
    want[p + "attn_q_norm.weight"] = Shape{64};
    want[p + "attn_k_norm.weight"] = Shape{64};
    want[p + "attn_output.weight"] = Shape{4 * 64, 256};
    want[p + "ffn_gate.weight"] = Shape{256, 768};
    want[p + "ffn_up.weight"] = Shape{256, 768};
    want[p + "ffn_down.weight"] = Shape{768, 256};
  }
  EXPECT_EQ(shapes, want);
  EXPECT_EQ(r.n_tensors, want.size());
  // Norm weights are stored with Gemma's +1 already added, as the converter
  // writes them: around 1, not around 0.
  const float* norm =
      reinterpret_cast<const float*>(f.require_tensor("blk.0.post_ffw_norm.weight").data);
  EXPECT_NEAR(norm[0], 1.0f, 0.1001f);

  // The real models' shapes; a cut keeps them.
  SynthOptions cut;
  cut.layers = 4;
  gguf::GgufWriter w;
  const auto g12 = build_synth_model(synth_preset("gemma-3-12b"), cut, w);
  EXPECT_EQ(g12.spec.n_layers, 4);
  EXPECT_EQ(g12.spec.n_embd, 3840);
  EXPECT_EQ(g12.spec.n_vocab, 262208);
  const auto g27 = synth_preset("gemma-3-27b");
  EXPECT_EQ(g27.n_heads * g27.head_dim, 4096);
  EXPECT_EQ(g27.sliding_window, 1024);
}

// A Gemma 4 file: per-layer window flags, the window layers' smaller heads
// and more KV heads, the global layers' partial rope (rope_freqs) and V from
// K, experts beside the dense FFN, logit softcap.
TEST(Synth, Gemma4MetadataAndTensors) {
  const std::string path = test::temp_dir() + "/gemma4.gguf";
  write_synth_model(synth_preset("tiny-gemma4"), {}, path);
  const auto f = gguf::GgufFile::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma4");
  const gguf::Value* pattern = f.find("gemma4.attention.sliding_window_pattern");
  ASSERT_NE(pattern, nullptr);
  EXPECT_EQ(pattern->bools, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(f.get_ints("gemma4.attention.head_count_kv"), (std::vector<int64_t>{2, 2, 2, 2, 2, 1}));
  EXPECT_EQ(f.get_int("gemma4.attention.key_length"), 64);
  EXPECT_EQ(f.get_int("gemma4.attention.key_length_swa"), 32);
  EXPECT_EQ(f.get_int("gemma4.attention.value_length_swa"), 32);
  EXPECT_EQ(f.get_int("gemma4.rope.dimension_count_swa"), 32);
  EXPECT_EQ(f.get_int("gemma4.attention.shared_kv_layers"), 0);
  EXPECT_EQ(f.get_int("gemma4.embedding_length_per_layer_input"), 0);
  EXPECT_EQ(f.get_float("gemma4.final_logit_softcapping"), 30.0);
  EXPECT_EQ(f.get_float("gemma4.rope.freq_base_swa"), 10000.0);
  EXPECT_EQ(f.find("gemma4.rope.scaling.type"), nullptr);

  // A quarter of the global heads' 32 pairs rotate; the rest are held still.
  const auto& freqs = f.require_tensor("rope_freqs.weight");
  ASSERT_EQ(freqs.shape, std::vector<int64_t>{32});
  const float* fv = reinterpret_cast<const float*>(freqs.data);
  EXPECT_EQ(fv[7], 1.0f);
  EXPECT_EQ(fv[8], 1e30f);
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(f.require_tensor("blk.0.attn_q.weight").shape, (Shape{256, 4 * 32}));
  EXPECT_EQ(f.require_tensor("blk.0.attn_v.weight").shape, (Shape{256, 2 * 32}));
  EXPECT_EQ(f.require_tensor("blk.0.attn_k_norm.weight").shape, Shape{32});
  EXPECT_EQ(f.require_tensor("blk.5.attn_q.weight").shape, (Shape{256, 4 * 64}));
  EXPECT_EQ(f.require_tensor("blk.5.attn_k.weight").shape, (Shape{256, 64}));
  EXPECT_EQ(f.find_tensor("blk.5.attn_v.weight"), nullptr);  // V is K
  EXPECT_EQ(f.require_tensor("blk.5.attn_output.weight").shape, (Shape{4 * 64, 256}));
  EXPECT_EQ(f.require_tensor("blk.3.ffn_gate.weight").shape, (Shape{256, 512}));
  EXPECT_EQ(f.require_tensor("blk.3.ffn_gate_up_exps.weight").shape, (Shape{256, 512, 4}));
  EXPECT_EQ(f.require_tensor("blk.3.ffn_down_exps.weight").shape, (Shape{256, 256, 4}));
  EXPECT_EQ(f.require_tensor("blk.3.ffn_gate_inp.weight").shape, (Shape{256, 4}));
  for (const char* t : {"ffn_gate_inp.scale", "pre_ffw_norm_2.weight", "post_ffw_norm_1.weight",
                        "post_ffw_norm_2.weight", "post_ffw_norm.weight"})
    EXPECT_EQ(f.require_tensor(std::string("blk.3.") + t).shape, Shape{256}) << t;
  EXPECT_EQ(f.require_tensor("blk.3.ffn_down_exps.scale").shape, Shape{4});
  EXPECT_EQ(f.require_tensor("blk.3.layer_output_scale.weight").shape, Shape{1});
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("per_layer_token_embd.weight"), nullptr);

  // A window-layers-only cut has no global layer, so no rope_freqs.
  SynthOptions cut;
  cut.layers = 4;
  const std::string cut_path = test::temp_dir() + "/gemma4-cut.gguf";
  write_synth_model(synth_preset("tiny-gemma4"), cut, cut_path);
  EXPECT_EQ(gguf::GgufFile::open(cut_path).find_tensor("rope_freqs.weight"), nullptr);
}

// E4B's layout at test widths: per-layer embeddings, and KV-shared layers
// that a cut keeps in proportion, the others ending with a global layer.
TEST(Synth, Gemma4PerLayerEmbeddingsAndSharedKv) {
  SynthSpec s = synth_preset("gemma-4-e4b");
  EXPECT_EQ(s.n_kv_shared_layers, 18);
  s.n_embd = 256;
  s.n_ff = 512;
  s.head_dim = 64;
  s.head_dim_swa = 32;
  s.n_vocab = 512;
  s.n_embd_per_layer = 16;
  SynthOptions o;
  o.layers = 12;  // 12 * 24 / 42 = 6 layers with their own K/V, 6 shared
  const std::string path = test::temp_dir() + "/gemma4-e4b.gguf";
  const auto r = write_synth_model(s, o, path);
  EXPECT_EQ(r.spec.n_kv_shared_layers, 6);
  const auto f = gguf::GgufFile::open(path);
  EXPECT_EQ(f.get_int("gemma4.attention.shared_kv_layers"), 6);
  EXPECT_EQ(f.get_int("gemma4.embedding_length_per_layer_input"), 16);
  EXPECT_EQ(f.get_int("gemma4.attention.head_count_kv"), 2);  // the same on every layer
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(f.require_tensor("per_layer_token_embd.weight").shape, (Shape{16 * 12, 512}));
  EXPECT_EQ(f.require_tensor("per_layer_model_proj.weight").shape, (Shape{256, 16 * 12}));
  EXPECT_EQ(f.require_tensor("per_layer_proj_norm.weight").shape, Shape{16});
  EXPECT_EQ(f.require_tensor("blk.11.inp_gate.weight").shape, (Shape{256, 16}));
  EXPECT_EQ(f.require_tensor("blk.11.proj.weight").shape, (Shape{16, 256}));
  EXPECT_EQ(f.require_tensor("blk.11.post_norm.weight").shape, Shape{256});
  EXPECT_NE(f.find_tensor("blk.5.attn_v.weight"), nullptr);  // E4B's V is not K

  // Every Gemma preset at full size passes validation (metadata and plan
  // only; nothing is generated).
  for (const char* name : {"gemma-3-12b", "gemma-3-27b", "gemma-4-e2b", "gemma-4-e4b",
                           "gemma-4-31b", "gemma-4-26b-a4b"}) {
    gguf::GgufWriter w;
    EXPECT_NO_THROW(build_synth_model(synth_preset(name), {}, w)) << name;
  }

  o.layers = 4;  // fewer than a period: every layer has its own K/V
  EXPECT_EQ(write_synth_model(s, o, path).spec.n_kv_shared_layers, 0);
  s.n_kv_shared_layers = 11;  // 1 layer left with its own K/V
  s.n_layers = 12;
  EXPECT_THROW(write_synth_model(s, {}, path), Error);
}

}  // namespace
}  // namespace tkv::model
