// Parses the real shared fixtures and checks facts known about them
// (see the models README).
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "common/test_util.h"
#include "gguf/gguf.h"

namespace tkv::gguf {
namespace {

TEST(GgufFixtures, Stories260K) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.require_string("general.architecture"), "llama");
  EXPECT_EQ(f.require_int("llama.block_count"), 5);
  EXPECT_EQ(f.require_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.require_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.require_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.require_int("llama.feed_forward_length"), 172);
  EXPECT_NEAR(f.require_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(f.require_string("tokenizer.ggml.model"), "llama");

  const auto* tokens = f.get_strings("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ(f.get_floats("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f.get_ints("tokenizer.ggml.token_type")->size(), 512u);
  EXPECT_EQ(f.require_int("tokenizer.ggml.bos_token_id"), 1);

  // token_embd, output_norm, output, and 9 per block.
  EXPECT_EQ(f.tensors().size(), 2u + 1u + 5u * 9u);
  const TensorInfo& emb = f.require_tensor("token_embd.weight");
  EXPECT_EQ(emb.type, DType::F32);
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb.n_bytes, 64u * 512u * 4u);
  EXPECT_EQ(f.require_tensor("blk.4.attn_k.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(f.require_tensor("blk.0.ffn_down.weight").shape, (std::vector<int64_t>{172, 64}));

  // Data pointers lie in the mapping; weights are finite and not all zero.
  const uint8_t* base = f.mapping()->data();
  double sum_abs = 0;
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_GE(t.data, base + f.data_offset());
    EXPECT_LE(t.data + t.n_bytes, base + f.file_size());
    EXPECT_EQ(t.type, DType::F32) << t.name;
  }
  const float* w = reinterpret_cast<const float*>(emb.data);
  for (int64_t k = 0; k < emb.n_elements(); ++k) {
    ASSERT_TRUE(std::isfinite(w[k]));
    sum_abs += std::fabs(w[k]);
  }
  EXPECT_GT(sum_abs, 1.0);
}

struct VocabFact {
  const char* file;
  const char* model;
  size_t n_tokens;
};

TEST(GgufFixtures, VocabFiles) {
  const VocabFact facts[] = {
      {"vocab/ggml-vocab-llama-spm.gguf", "llama", 32000},
      {"vocab/ggml-vocab-phi-3.gguf", "llama", 32064},
      {"vocab/ggml-vocab-llama-bpe.gguf", "gpt2", 128256},
      {"vocab/ggml-vocab-qwen2.gguf", "gpt2", 151936},
      {"vocab/ggml-vocab-gpt-2.gguf", "gpt2", 50257},
      {"vocab/ggml-vocab-deepseek-llm.gguf", "gpt2", 102400},
  };
  size_t found = 0;
  for (const VocabFact& v : facts) {
    SCOPED_TRACE(v.file);
    const std::string path = tkv::test::model_path(v.file);
    if (path.empty()) {
      if (tkv::test::fixtures_required()) ADD_FAILURE() << "required fixture missing: " << v.file;
      continue;
    }
    ++found;
    const GgufFile f = GgufFile::open(path);
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.require_string("tokenizer.ggml.model"), v.model);
    const auto* tokens = f.get_strings("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->size(), v.n_tokens);
    EXPECT_EQ(f.get_ints("tokenizer.ggml.token_type")->size(), v.n_tokens);
    if (std::string(v.model) == "gpt2") {
      const auto* merges = f.get_strings("tokenizer.ggml.merges");
      ASSERT_NE(merges, nullptr);
      EXPECT_GT(merges->size(), 10000u);
      // A merge is two tokens separated by one space.
      EXPECT_NE((*merges)[0].find(' '), std::string::npos);
    } else {
      EXPECT_EQ(f.get_floats("tokenizer.ggml.scores")->size(), v.n_tokens);
    }
  }
  if (found == 0) TKV_MISSING_FIXTURE << "no vocab fixtures under " << tkv::test::models_dir();
  const std::string bpe = tkv::test::model_path("vocab/ggml-vocab-llama-bpe.gguf");
  if (!bpe.empty()) {
    const GgufFile f = GgufFile::open(bpe);
    EXPECT_EQ(f.require_int("tokenizer.ggml.bos_token_id"), 128000);
    EXPECT_EQ(f.require_string("tokenizer.ggml.pre"), "llama-bpe");
    EXPECT_EQ(f.get_strings("tokenizer.ggml.merges")->size(), 280147u);
  }
}

TEST(GgufFixtures, TkvTestModel) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.require_int("llama.embedding_length"), 512);
  EXPECT_EQ(f.require_int("llama.block_count"), 6);
  EXPECT_EQ(f.require_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
  const TensorInfo& emb = f.require_tensor("token_embd.weight");
  EXPECT_EQ(emb.type, DType::F16);
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{512, 4096}));
  EXPECT_NE(f.find_tensor("output.weight"), nullptr);  // separate output matrix
}

TEST(GgufFixtures, MissingFileIsAClearError) {
  try {
    GgufFile::open("/nonexistent/dir/model.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/nonexistent/dir/model.gguf: cannot open", 0), 0u)
        << e.what();
  }
  const std::string dir = tkv::test::temp_dir();
  EXPECT_THROW(GgufFile::open(dir), Error);  // a directory
}

}  // namespace
}  // namespace tkv::gguf
