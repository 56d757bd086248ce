// The flag parser of the turbokv binary, in process.
#include "cli/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace tkv::cli {
namespace {

struct Parsed {
  std::string model, positional;
  int n = -1;
  float temp = 0.8f;
  uint64_t seed = 0;
  bool flag = false;
  std::vector<std::string> stops;
};

FlagParser make_parser(Parsed& p) {
  FlagParser f("demo", "turbokv demo [flags] FILE");
  f.add_string({"-m", "--model"}, "PATH", "model", &p.model);
  f.add_int({"-n", "--n-predict"}, "N", "count", &p.n, -1, 100);
  f.add_float({"--temp"}, "T", "temperature", &p.temp, 0.0, 10.0);
  f.add_uint64({"--seed"}, "N", "seed", &p.seed);
  f.add_bool({"--flag"}, "a switch", &p.flag);
  f.add_strings({"--stop"}, "STR", "repeatable", &p.stops);
  f.add_positional("FILE", "input", &p.positional, /*required=*/false);
  return f;
}

std::string parse_error(const std::vector<std::string>& args) {
  Parsed p;
  FlagParser f = make_parser(p);
  try {
    f.parse(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FlagParser, ParsesEveryKindOfFlag) {
  Parsed p;
  FlagParser f = make_parser(p);
  ASSERT_TRUE(f.parse(std::vector<std::string>{"-m", "a.gguf", "--n-predict=7", "--temp", "0.25",
                                               "--seed", "18446744073709551615", "--flag", "--stop",
                                               "x", "--stop=y", "in.txt"}));
  EXPECT_EQ(p.model, "a.gguf");
  EXPECT_EQ(p.n, 7);
  EXPECT_FLOAT_EQ(p.temp, 0.25f);
  EXPECT_EQ(p.seed, 18446744073709551615ull);
  EXPECT_TRUE(p.flag);
  EXPECT_EQ(p.stops, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(p.positional, "in.txt");
  EXPECT_TRUE(f.was_set("--model"));
  EXPECT_TRUE(f.was_set("-m"));
  EXPECT_FALSE(f.was_set("--nothing"));
}

TEST(FlagParser, ValuesMayLookLikeNegativeNumbersOrDashes) {
  Parsed p;
  FlagParser f = make_parser(p);
  ASSERT_TRUE(f.parse(std::vector<std::string>{"-n", "-1", "-m", "-weird-name", "--", "--flag"}));
  EXPECT_EQ(p.n, -1);
  EXPECT_EQ(p.model, "-weird-name");  // not a known flag: taken as the value
  EXPECT_EQ(p.positional, "--flag");  // after "--" everything is positional
  EXPECT_FALSE(p.flag);
}

TEST(FlagParser, HelpReturnsFalseAndListsFlags) {
  Parsed p;
  FlagParser f = make_parser(p);
  testing::internal::CaptureStdout();
  EXPECT_FALSE(f.parse(std::vector<std::string>{"--help"}));
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.rfind("usage: turbokv demo [flags] FILE\n", 0), 0u);
  EXPECT_NE(out.find("-n, --n-predict N"), std::string::npos) << out;
  EXPECT_NE(out.find("--stop STR"), std::string::npos);
  EXPECT_EQ(out, f.help());
}

// The layout every command's help shares (run, chat, bench ...): "usage:",
// lower-case section headings, the names as declared (short first), the
// metavar after them, help at column 30, continuation lines indented, a long
// name on a line of its own, -h/--help last.
TEST(FlagParser, HelpLayout) {
  std::string model, list, override_spec;
  bool quiet = false;
  FlagParser f("bench memory", "turbokv bench memory -m MODEL", "Measures memory.");
  f.section("model");
  f.add_string({"-m", "--model"}, "PATH", "GGUF model file", &model);
  f.section("KV cache");
  f.add_string({"--kv"}, "LIST", "first line\nsecond line", &list);
  f.add_string({"--kv-layer-override-spec"}, "SPEC", "per layer", &override_spec);
  f.section("run");
  f.add_bool({"-q", "--quiet"}, "no progress bar", &quiet);
  f.set_help("-m", "GGUF model file (required)");  // a command's own wording
  EXPECT_EQ(f.help(),
            "usage: turbokv bench memory -m MODEL\n"
            "\n"
            "Measures memory.\n"
            "\n"
            "model:\n"
            "  -m, --model PATH            GGUF model file (required)\n"
            "\n"
            "KV cache:\n"
            "  --kv LIST                   first line\n"
            "                              second line\n"
            "  --kv-layer-override-spec SPEC\n"
            "                              per layer\n"
            "\n"
            "run:\n"
            "  -q, --quiet                 no progress bar\n"
            "\n"
            "  -h, --help                  show this help\n");
}

TEST(FlagParser, ErrorsNameTheFlagAndTheProblem) {
  EXPECT_EQ(parse_error({"--bogus"}), "demo: unknown flag '--bogus' (see turbokv demo --help)");
  EXPECT_EQ(parse_error({"--tmep", "1"}),
            "demo: unknown flag '--tmep' (did you mean --temp? see turbokv demo --help)");
  EXPECT_EQ(parse_error({"-m"}), "demo: flag -m needs a value (PATH)");
  EXPECT_EQ(parse_error({"-m", "--flag"}), "demo: flag -m needs a value (PATH)");
  EXPECT_EQ(parse_error({"-n", "5x"}), "-n: '5x' is not an integer");
  EXPECT_EQ(parse_error({"-n", ""}), "-n: '' is not an integer");
  EXPECT_EQ(parse_error({"-n", "101"}), "-n: 101 is out of range (must be in [-1, 100])");
  EXPECT_EQ(parse_error({"-n", "99999999999999999999"}),
            "-n: 99999999999999999999 is out of range (must be in [-1, 100])");
  EXPECT_EQ(parse_error({"--temp", "warm"}), "--temp: 'warm' is not a number");
  EXPECT_EQ(parse_error({"--temp", "inf"}), "--temp: inf is not a finite number");
  EXPECT_EQ(parse_error({"--temp", " 1"}), "--temp: ' 1' is not a number");
  EXPECT_EQ(parse_error({"--temp", "11"}), "--temp: 11 is out of range (must be in [0, 10])");
  EXPECT_EQ(parse_error({"--seed", "-3"}), "--seed: '-3' is not a non-negative integer");
  EXPECT_EQ(parse_error({"--flag=1"}), "demo: flag --flag takes no value");
  EXPECT_EQ(parse_error({"a", "b"}), "demo: unexpected argument 'b' (see turbokv demo --help)");
}

TEST(FlagParser, LlamaCppFlagsAreNamedUnsupported) {
  EXPECT_EQ(parse_error({"-ngl", "99"}),
            "demo: -ngl is not supported by turbokv; it runs on the CPU (see turbokv demo --help)");
  EXPECT_EQ(parse_error({"-nkvo"}),
            "demo: -nkvo is not supported by turbokv; the KV cache is always in memory (see "
            "turbokv demo --help)");
  // Other unknown flags still get a suggestion.
  EXPECT_NE(parse_error({"--flg"}).find("did you mean --flag?"), std::string::npos);
}

TEST(FlagParser, RequiredPositional) {
  std::string file;
  FlagParser f("inspect", "turbokv inspect FILE");
  f.add_positional("FILE", "input", &file);
  try {
    f.parse(std::vector<std::string>{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "inspect: missing FILE (see turbokv inspect --help)");
  }
}

TEST(ParseNumbers, Strict) {
  EXPECT_EQ(parse_int("x", "+42", 0, 100), 42);
  EXPECT_EQ(parse_int("x", "-7", -10, 10), -7);
  EXPECT_THROW(parse_int("x", "4 2", 0, 100), Error);
  EXPECT_THROW(parse_int("x", "0x10", 0, 100), Error);
  EXPECT_DOUBLE_EQ(parse_double("x", "1e-3", 0, 1), 1e-3);
  EXPECT_THROW(parse_double("x", "1e999", 0, 1e300), Error);
  EXPECT_THROW(parse_double("x", "nan", 0, 1), Error);
  EXPECT_EQ(parse_uint64("x", "0"), 0u);
  // Hex, the form --kv-seed's default is shown in.
  EXPECT_EQ(parse_uint64("x", "0x74626b76"), 0x74626b76u);
  EXPECT_EQ(parse_uint64("x", "0XFF"), 255u);
  EXPECT_THROW(parse_uint64("x", "0x"), Error);
  EXPECT_THROW(parse_uint64("x", "0xzz"), Error);
  EXPECT_THROW(parse_uint64("x", "0x1ffffffffffffffff"), Error);
  EXPECT_THROW(parse_uint64("x", "18446744073709551616"), Error);
}

}  // namespace
}  // namespace tkv::cli
