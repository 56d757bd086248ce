// Every (template, case) pair of the Hugging Face fixtures
// ($TURBOKV_SHARED/templates, README.md there): the rendering must equal
// expected/<template>/<case>.txt byte for byte, and where the template
// raises, rendering must fail (with raise_exception's exact message).
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/test_util.h"
#include "template/template.h"

namespace tkv::tmpl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

fs::path fixtures_dir() {
  return fs::path(test::shared_dir()) / "templates";
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fixed date the fixtures were made with: 2026-07-26 00:00:00.
RenderOptions fixture_options() {
  RenderOptions o;
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_wday = 0;  // a Sunday
  tm.tm_yday = 206;
  o.now = tm;
  return o;
}

// The render variables as the reference renderer passes them.
json variables(const json& c, const json& tokens) {
  json v = json::object();
  v["messages"] = c["messages"];
  v["add_generation_prompt"] = c["add_generation_prompt"];
  v["bos_token"] = tokens["bos_token"];
  v["eos_token"] = tokens["eos_token"];
  if (c.contains("tools")) v["tools"] = c["tools"];
  if (c.contains("kwargs"))
    for (const auto& [k, x] : c["kwargs"].items()) v[k] = x;
  return v;
}

TEST(TemplateFixtures, EveryPairMatchesHuggingFace) {
  const fs::path dir = fixtures_dir();
  if (!fs::exists(dir / "expected" / "manifest.json"))
    TKV_MISSING_FIXTURE << "chat-template fixtures not found in " << dir << " (set TURBOKV_SHARED)";
  const json manifest = json::parse(read(dir / "expected" / "manifest.json"));
  const json cases = json::parse(read(dir / "cases" / "conversations.json"))["cases"];
  const json tokens = json::parse(read(dir / "tokens.json"))["templates"];
  int pairs = 0, matched = 0;
  for (const auto& [stem, outcomes] : manifest.items()) {
    SCOPED_TRACE(stem);
    const Template t = Template::parse(read(dir / "templates" / (stem + ".jinja")), stem);
    for (const json& c : cases) {
      const std::string id = c["id"];
      SCOPED_TRACE(id);
      const std::string outcome = outcomes.at(id);
      ++pairs;
      const fs::path base = dir / "expected" / stem / id;
      try {
        const std::string got = t.render(variables(c, tokens.at(stem)), fixture_options());
        ASSERT_EQ(outcome.rfind("ok", 0), 0u) << "rendered, but the reference raises: " << outcome;
        const std::string want = read(base.string() + ".txt");
        size_t at = 0;
        while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
        EXPECT_EQ(got.size(), want.size());
        EXPECT_EQ(at, want.size()) << "first difference at byte " << at
                                   << ":\n got: " << got.substr(at > 40 ? at - 40 : 0, 120)
                                   << "\nwant: " << want.substr(at > 40 ? at - 40 : 0, 120);
        matched += got == want;
      } catch (const TemplateError& e) {
        ASSERT_EQ(outcome.rfind("error:", 0), 0u)
            << "failed, but the reference renders: " << e.what();
        if (outcome == "error:raise_exception") {
          EXPECT_TRUE(e.raised()) << e.what();
          EXPECT_EQ(e.reason(), read(base.string() + ".error.txt"));
          matched += e.reason() == read(base.string() + ".error.txt");
        } else {
          EXPECT_FALSE(e.raised()) << e.what();
          ++matched;
        }
      }
    }
  }
  EXPECT_EQ(pairs, 15 * 14);
  EXPECT_EQ(matched, pairs);
  std::printf("%d of %d (template, case) pairs match\n", matched, pairs);
}

}  // namespace
}  // namespace tkv::tmpl
