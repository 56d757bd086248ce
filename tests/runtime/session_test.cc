// Session files (runtime/session_state.h) and the chat conversation saved in
// them, on the real stories260K model: a round trip continues exactly as the
// original would have, and every refused load leaves the session as it was.
#include "runtime/session_state.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "runtime/chat_session.h"
#include "runtime/generation.h"
#include "runtime_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {
namespace {

using Fixture = ModelFixture;

Fixture load(const std::string& path) {
  return load_model_fixture(path, 0, "Once upon a time there was a");
}

kv::KvConfig k4v2() {
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  return c;
}

std::unique_ptr<Sequence> new_session(const Fixture& f, const kv::KvConfig& kv) {
  return std::make_unique<Sequence>(*f.model, *f.tokenizer, 256, kv, 1, 64);
}

// The next `n` greedy tokens after feeding `next`.
std::vector<int32_t> continuation(Sequence& s, int32_t next, int n) {
  const int32_t one[1] = {next};
  s.feed(one);
  sample::SamplerConfig greedy;
  greedy.temperature = 0;
  s.set_sampler(greedy);
  GenerateOptions options;
  options.max_tokens = n;
  options.stop_at_eog = false;
  std::vector<int32_t> out;
  generate(s, options, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  return out;
}

std::string temp_file(const std::string& name) {
  return test::temp_dir() + "/" + name;
}

TEST(Session, RoundTripContinuesExactlyAndKeepsAnyBytes) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const Fixture f = load(path);
  const std::string file = temp_file("round_trip.session");
  auto original = new_session(f, k4v2());
  const std::span<const int32_t> all(f.prompt);
  original->feed(all.first(all.size() - 1));
  const std::map<std::string, std::string> strings = {{"bytes", std::string("\xff\x00\x80z", 4)},
                                                      {"empty", ""}};
  original->save(file, strings);
  EXPECT_FALSE(std::filesystem::exists(file + ".json")) << "one file, no sidecar";
  auto restored = new_session(f, k4v2());
  EXPECT_EQ(restored->load(file), strings);
  EXPECT_EQ(restored->tokens(), original->tokens());
  EXPECT_EQ(peek_session(file).tokens, original->tokens());
  EXPECT_EQ(continuation(*restored, f.prompt.back(), 12),
            continuation(*original, f.prompt.back(), 12));
}

// Every refusal leaves the session holding what it held.
void expect_refused_unchanged(Sequence& s, const std::string& file, const std::string& why) {
  const std::vector<int32_t> before = s.tokens();
  const int64_t cached = s.cache().n_tokens();
  try {
    s.load(file);
    ADD_FAILURE() << "loaded " << file;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
  EXPECT_EQ(s.tokens(), before);
  EXPECT_EQ(s.cache().n_tokens(), cached);
}

TEST(Session, RefusedLoadsLeaveTheSessionAsItWas) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const Fixture f = load(path);
  const std::string file = temp_file("refused.session");
  auto saved = new_session(f, k4v2());
  saved->feed(f.prompt);
  saved->save(file);

  // The session under test holds a different conversation of its own.
  auto s = new_session(f, k4v2());
  const std::span<const int32_t> all(f.prompt);
  s->feed(all.first(3));
  const std::vector<int32_t> expected = [&] {
    auto twin = new_session(f, k4v2());
    twin->feed(all.first(3));
    return continuation(*twin, f.prompt[3], 8);
  }();

  expect_refused_unchanged(*s, temp_file("missing.session"), "does not exist");
  // Other KV settings.
  auto f16 = new_session(f, kv::KvConfig{});
  f16->feed(f.prompt);
  const std::string other = temp_file("other_kv.session");
  f16->save(other);
  expect_refused_unchanged(*s, other, "KV settings");
  // A flipped byte anywhere in the pages.
  const std::string corrupt = temp_file("corrupt.session");
  std::filesystem::copy_file(file, corrupt, std::filesystem::copy_options::overwrite_existing);
  {
    std::fstream io(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(-100, std::ios::end);
    char c = 0;
    io.read(&c, 1);
    io.seekp(-100, std::ios::end);
    c = char(c ^ 0x10);
    io.write(&c, 1);
  }
  expect_refused_unchanged(*s, corrupt, "checksum");
  // A KV file without token ids (what an older turbokv wrote next to a sidecar).
  const std::string no_ids = temp_file("no_ids.session");
  saved->cache().save(no_ids, f.model->fingerprint());
  expect_refused_unchanged(*s, no_ids, "version 2 without token ids");
  // Not a session file at all.
  const std::string junk = temp_file("junk.session");
  std::ofstream(junk) << "not a session";
  expect_refused_unchanged(*s, junk, junk);

  EXPECT_EQ(continuation(*s, f.prompt[3], 8), expected);
}

TEST(Session, ChatConversationRoundTripsInTheOneFile) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const Fixture f = load(path);
  const std::string file = temp_file("chat.session");
  sample::SamplerConfig greedy;
  greedy.temperature = 0;
  auto a = new_session(f, kv::KvConfig{});
  ChatSession chat(*a, tok::ChatTemplate::by_name("chatml"), greedy, "Be \xc3\xa9 kind.", {});
  chat.respond("Hi", 6, nullptr, [](const std::string&) {});
  chat.save(file);

  auto b = new_session(f, kv::KvConfig{});
  ChatSession other(*b, tok::ChatTemplate::by_name("llama3"), greedy, "", {});
  const std::string warning = other.load(file);
  EXPECT_NE(warning.find("chat template chatml"), std::string::npos) << warning;
  EXPECT_EQ(other.messages().size(), chat.messages().size());
  for (size_t i = 0; i < chat.messages().size(); ++i) {
    EXPECT_EQ(other.messages()[i].role, chat.messages()[i].role);
    EXPECT_EQ(other.messages()[i].content, chat.messages()[i].content);
  }
  EXPECT_EQ(b->tokens(), a->tokens());

  // A session without a conversation: refused, the chat unchanged.
  auto plain = new_session(f, kv::KvConfig{});
  plain->feed(f.prompt);
  const std::string no_chat = temp_file("no_chat.session");
  plain->save(no_chat);
  EXPECT_THROW(other.load(no_chat), Error);
  EXPECT_EQ(other.messages().size(), chat.messages().size());
  EXPECT_EQ(b->tokens(), a->tokens());
}

}  // namespace
}  // namespace tkv::runtime
