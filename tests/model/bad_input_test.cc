// Bad models and bad requests give one clear tkv::Error naming the thing.
#include <gtest/gtest.h>

#include <functional>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/test_util.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "test_models.h"

namespace tkv::model {
namespace {

// Message of the tkv::Error `fn` throws, or "" when it does not throw.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override { good_ = test::write_model(test::small_spec("qwen2.5-7b"), "f16"); }

  // A broken copy of the good model; returns the load error.
  std::string load_error(
      const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&)>& meta,
      const std::function<bool(test::TensorCopy&)>& tensor) {
    const std::string bad = test::temp_dir() + "/bad.gguf";
    test::rewrite_gguf(good_, bad, meta, tensor);
    const std::string e = error_of([&] { Model::load(bad); });
    EXPECT_NE(e.find("bad.gguf"), std::string::npos) << "error should name the file: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
    return e;
  }
  std::string good_;
};

TEST_F(BadInput, GoodCopyLoads) {
  const std::string copy = test::temp_dir() + "/copy.gguf";
  test::rewrite_gguf(good_, copy, nullptr, nullptr);
  EXPECT_EQ(Model::load(copy)->fingerprint(), Model::load(good_)->fingerprint());
}

TEST_F(BadInput, UnknownArchitecture) {
  const auto e = load_error(
      [](auto& meta) {
        for (auto& [k, v] : meta) {
          if (k == "general.architecture") v = gguf::Value::make_string("mamba");
        }
      },
      nullptr);
  EXPECT_NE(e.find("unsupported architecture 'mamba'"), std::string::npos) << e;
}

TEST_F(BadInput, MissingTensor) {
  const auto e =
      load_error(nullptr, [](test::TensorCopy& t) { return t.name != "blk.1.ffn_up.weight"; });
  EXPECT_NE(e.find("missing tensor blk.1.ffn_up.weight"), std::string::npos) << e;
  const auto bias =
      load_error(nullptr, [](test::TensorCopy& t) { return t.name != "blk.0.attn_k.bias"; });
  EXPECT_NE(bias.find("blk.0.attn_k.bias"), std::string::npos) << bias;
}

TEST_F(BadInput, WrongShape) {
  const auto e = load_error(nullptr, [](test::TensorCopy& t) {
    if (t.name == "blk.0.attn_k.weight") t.shape = {t.shape[1], t.shape[0]};  // transposed
    return true;
  });
  EXPECT_NE(e.find("tensor blk.0.attn_k.weight has shape [128, 256], expected [256, 128]"),
            std::string::npos)
      << e;
  const auto norm = load_error(nullptr, [](test::TensorCopy& t) {
    if (t.name == "output_norm.weight") {
      t.shape = {128};
      t.bytes.resize(128 * 4);
    }
    return true;
  });
  EXPECT_NE(norm.find("output_norm.weight has shape [128], expected [256]"), std::string::npos)
      << norm;
}

TEST_F(BadInput, UnsupportedWeightType) {
  // Q8_1 is a real ggml type (the reader knows its size) without kernels.
  ASSERT_FALSE(traits(DType::Q8_1).supported);
  const auto e = load_error(nullptr, [](test::TensorCopy& t) {
    if (t.name == "blk.1.attn_output.weight") {
      t.type = DType::Q8_1;
      t.bytes.assign(size_t(t.shape[1]) * row_bytes(DType::Q8_1, t.shape[0]), 0);
    }
    return true;
  });
  EXPECT_NE(e.find("blk.1.attn_output.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("q8_1"), std::string::npos) << e;
}

TEST_F(BadInput, VocabularyMismatch) {
  const auto e = load_error(
      [](auto& meta) {
        for (auto& [k, v] : meta) {
          if (k == "tokenizer.ggml.tokens") v.strings.resize(400);
        }
      },
      nullptr);
  EXPECT_NE(e.find("token_embd.weight has shape [256, 512], expected [256, 400]"),
            std::string::npos)
      << e;
}

TEST_F(BadInput, NotAGgufFile) {
  const std::string path = test::temp_dir() + "/junk.gguf";
  write_file_atomic(path, "this is not a model");
  const auto e = error_of([&] { Model::load(path); });
  EXPECT_NE(e.find("junk.gguf"), std::string::npos) << e;
  const auto missing = error_of([&] { Model::load(test::temp_dir() + "/absent.gguf"); });
  EXPECT_NE(missing.find("absent.gguf"), std::string::npos) << missing;
}

TEST_F(BadInput, BadRequests) {
  const auto m = Model::load(good_);
  ThreadPool pool(1);
  kv::KvCache cache(m->kv_shape(8), kv::KvConfig{});
  const std::vector<int32_t> nine(9, 5), five(5, 5);

  auto e = error_of([&] { m->eval_last(cache, nine, pool); });
  EXPECT_NE(e.find("context too long: 9 tokens at position 0"), std::string::npos) << e;
  EXPECT_EQ(cache.n_tokens(), 0);  // nothing was written
  m->eval_last(cache, five, pool);
  e = error_of([&] { m->eval_last(cache, five, pool); });
  EXPECT_NE(e.find("5 tokens at position 5"), std::string::npos) << e;
  EXPECT_EQ(cache.n_tokens(), 5);

  const std::vector<int32_t> bad_ids = {1, 2, 512};
  e = error_of([&] { m->eval_last(cache, bad_ids, pool); });
  EXPECT_NE(e.find("token id 512 at index 2"), std::string::npos) << e;
  const std::vector<int32_t> negative = {-1};
  EXPECT_NE(error_of([&] { m->eval_last(cache, negative, pool); }).find("token id -1"),
            std::string::npos);

  e = error_of([&] { m->eval_last(cache, std::vector<int32_t>{1}, pool, 0); });
  EXPECT_NE(e.find("ubatch"), std::string::npos) << e;

  kv::KvShape other = m->kv_shape(8);
  other.n_kv_heads = 4;
  other.n_heads = 8;
  kv::KvCache wrong(other, kv::KvConfig{});
  e = error_of([&] { m->eval_last(wrong, five, pool); });
  EXPECT_NE(e.find("does not match the model"), std::string::npos) << e;
}

}  // namespace
// A mixture-of-experts file with an expert tensor missing, of the wrong
// shape, or routing more experts than it has: one line naming what.
TEST(BadMoeInput, ExpertTensorsAndCountsAreChecked) {
  const std::string good = test::write_model(test::small_spec("qwen3-30b-a3b"), "f16");
  const std::string bad = test::temp_dir() + "/bad-moe.gguf";
  const auto error_after = [&](const auto& meta, const auto& tensor) {
    test::rewrite_gguf(good, bad, meta, tensor);
    return error_of([&] { Model::load(bad); });
  };
  std::string e = error_after(
      nullptr, [](test::TensorCopy& t) { return t.name != "blk.1.ffn_up_exps.weight"; });
  EXPECT_NE(e.find("missing tensor blk.1.ffn_up_exps.weight"), std::string::npos) << e;
  e = error_after(nullptr, [](test::TensorCopy& t) {
    if (t.name == "blk.0.ffn_down_exps.weight") std::swap(t.shape[1], t.shape[2]);
    return true;
  });
  EXPECT_NE(e.find("tensor blk.0.ffn_down_exps.weight has shape [256, 16, 256], expected [256, "
                   "256, 16]"),
            std::string::npos)
      << e;
  e = error_after(
      [](auto& meta) {
        for (auto& [k, v] : meta)
          if (k == "qwen3moe.expert_used_count") v = gguf::Value::make_u32(17);
      },
      nullptr);
  EXPECT_NE(e.find("expert_used_count = 17 is out of range [1, 16]"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace tkv::model
