// Writer -> reader round trips of every metadata value type and several
// tensor types, plus the getters' type rules and the writer's own checks.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "common/error.h"
#include "common/test_util.h"
#include "gguf/gguf.h"

namespace tkv::gguf {
namespace {

using VT = ValueType;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// Every scalar type at its extremes, every array element type, strings with
// NUL and invalid UTF-8, empty arrays, arrays of arrays.
std::vector<std::pair<std::string, Value>> every_value_type() {
  std::vector<std::pair<std::string, Value>> kv;
  kv.emplace_back("u8", Value::make_uint(VT::UINT8, 255));
  kv.emplace_back("i8", Value::make_int(VT::INT8, -128));
  kv.emplace_back("u16", Value::make_uint(VT::UINT16, 65535));
  kv.emplace_back("i16", Value::make_int(VT::INT16, -32768));
  kv.emplace_back("u32", Value::make_u32(4000000000u));
  kv.emplace_back("i32", Value::make_i32(std::numeric_limits<int32_t>::min()));
  kv.emplace_back("u64", Value::make_u64(std::numeric_limits<uint64_t>::max()));
  kv.emplace_back("i64", Value::make_int(VT::INT64, std::numeric_limits<int64_t>::min()));
  kv.emplace_back("f32", Value::make_f32(3.14159f));
  kv.emplace_back("f64", Value::make_float(VT::FLOAT64, 2.718281828459045));
  kv.emplace_back("bool.true", Value::make_bool(true));
  kv.emplace_back("bool.false", Value::make_bool(false));
  kv.emplace_back("str", Value::make_string("hello"));
  kv.emplace_back("str.empty", Value::make_string(""));
  kv.emplace_back("str.binary", Value::make_string(std::string("a\0b\xff\xc3(", 6)));
  kv.emplace_back("arr.u8", Value::make_uints(VT::UINT8, {0, 1, 255}));
  kv.emplace_back("arr.i8", Value::make_ints(VT::INT8, {-128, 0, 127}));
  kv.emplace_back("arr.u16", Value::make_uints(VT::UINT16, {65535, 7}));
  kv.emplace_back("arr.i16", Value::make_ints(VT::INT16, {-32768, 32767}));
  kv.emplace_back("arr.u32", Value::make_uints(VT::UINT32, {4294967295u, 0}));
  kv.emplace_back("arr.i32", Value::make_i32s({-5, 6, -7}));
  kv.emplace_back("arr.u64", Value::make_uints(VT::UINT64, {~0ull, 1}));
  kv.emplace_back("arr.i64", Value::make_ints(VT::INT64, {std::numeric_limits<int64_t>::min()}));
  kv.emplace_back("arr.f32", Value::make_f32s({1.5f, -0.25f, 1e-30f}));
  kv.emplace_back("arr.f64", Value::make_floats(VT::FLOAT64, {1e300, -1e-300}));
  kv.emplace_back("arr.bool", Value::make_bools({true, false, true}));
  kv.emplace_back("arr.str", Value::make_strings({"a", "", std::string("\0\x80", 2), "long"}));
  kv.emplace_back("arr.empty", Value::make_strings({}));
  kv.emplace_back("arr.empty.u8", Value::make_uints(VT::UINT8, {}));
  kv.emplace_back(
      "arr.arr", Value::make_arrays({Value::make_i32s({1, 2}), Value::make_strings({"x", "y", "z"}),
                                     Value::make_arrays({Value::make_f32s({9.f})})}));
  return kv;
}

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<int64_t> shape;
};

const std::vector<TensorSpec> kTensors = {
    {"f32.matrix", DType::F32, {8, 3}},     {"f16.vector", DType::F16, {16}},
    {"q8_0.matrix", DType::Q8_0, {64, 2}},  {"q4_K.row", DType::Q4_K, {256, 1}},
    {"bf16.4d", DType::BF16, {4, 4, 2, 1}}, {"q4_0.odd", DType::Q4_0, {32, 3}},
};

GgufWriter make_writer(uint64_t alignment) {
  GgufWriter w(alignment);
  for (auto& [k, v] : every_value_type()) w.set(k, v);
  uint32_t seed = 1;
  for (const TensorSpec& t : kTensors) {
    const size_t n = row_bytes(t.type, t.shape[0]) * size_t(TensorInfo{"", t.shape}.rows());
    const auto bytes = random_bytes(n, seed++);
    w.add_tensor(t.name, t.type, t.shape, bytes.data(), bytes.size());
  }
  return w;
}

void expect_round_trip(const GgufFile& f, uint64_t alignment) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);

  const auto expected = every_value_type();
  // The writer adds general.alignment first when it is not the default.
  const size_t skip = alignment == 32 ? 0 : 1;
  ASSERT_EQ(f.metadata().size(), expected.size() + skip);
  if (skip) {
    EXPECT_EQ(f.metadata()[0].first, "general.alignment");
    EXPECT_EQ(f.metadata()[0].second, Value::make_u32(uint32_t(alignment)));
  }
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(f.metadata()[k + skip].first, expected[k].first);
    EXPECT_EQ(f.metadata()[k + skip].second, expected[k].second)
        << expected[k].first << ": " << f.metadata()[k + skip].second.to_string() << " vs "
        << expected[k].second.to_string();
  }

  ASSERT_EQ(f.tensors().size(), kTensors.size());
  uint32_t seed = 1;
  for (size_t k = 0; k < kTensors.size(); ++k) {
    const TensorInfo& t = f.tensors()[k];
    EXPECT_EQ(t.name, kTensors[k].name);
    EXPECT_EQ(t.type, kTensors[k].type);
    EXPECT_EQ(t.shape, kTensors[k].shape);
    EXPECT_EQ(t.offset % alignment, 0u);
    const auto bytes = random_bytes(t.n_bytes, seed++);
    EXPECT_EQ(t.n_bytes, row_bytes(t.type, t.cols()) * size_t(t.rows()));
    ASSERT_NE(t.data, nullptr);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), bytes) << t.name;
    EXPECT_EQ(f.find_tensor(t.name), &t);
  }
}

TEST(GgufRoundTrip, EveryValueTypeAndTensorTypeInMemory) {
  for (uint64_t alignment : {32u, 64u, 1u, 256u}) {
    SCOPED_TRACE(alignment);
    const auto bytes = make_writer(alignment).to_bytes();
    expect_round_trip(GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf"), alignment);
  }
}

TEST(GgufRoundTrip, ThroughAFileAtomically) {
  const std::string dir = tkv::test::temp_dir();
  const std::string path = dir + "/rt.gguf";
  size_t progress_calls = 0, last_done = 0;
  make_writer(64).write(path, [&](size_t done, size_t total) {
    ++progress_calls;
    EXPECT_EQ(total, kTensors.size());
    EXPECT_EQ(done, last_done + 1);
    last_done = done;
  });
  EXPECT_EQ(progress_calls, kTensors.size());
  // Only the file itself: the temporary was renamed into place.
  size_t n_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++n_files;
    EXPECT_EQ(e.path().filename(), "rt.gguf");
  }
  EXPECT_EQ(n_files, 1u);

  const GgufFile f = GgufFile::open(path);
  ASSERT_NE(f.mapping(), nullptr);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
  expect_round_trip(f, 64);
  // The bytes in the file equal the in-memory serialization.
  const auto mem = make_writer(64).to_bytes();
  ASSERT_EQ(mem.size(), f.file_size());
  EXPECT_EQ(0, std::memcmp(mem.data(), f.mapping()->data(), mem.size()));
}

TEST(GgufRoundTrip, VersionTwoParsesVersionOneIsRejected) {
  auto bytes = make_writer(32).to_bytes();
  bytes[4] = 2;
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "v2.gguf");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.tensors().size(), kTensors.size());
  bytes[4] = 1;
  try {
    GgufFile::parse(bytes.data(), bytes.size(), "v1.gguf");
    FAIL() << "v1 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "v1.gguf: GGUF version 1 is not supported (only versions 2 and 3)");
  }
}

TEST(GgufRoundTrip, SetReplacesInPlaceAndKeepsOrder) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_f32("c", 0.5f);
  w.set_u32("a", 7);
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "m");
  ASSERT_EQ(f.metadata().size(), 3u);
  EXPECT_EQ(f.metadata()[0].first, "a");
  EXPECT_EQ(f.get_int("a"), 7);
  EXPECT_EQ(f.get_string("b"), "x");
  EXPECT_EQ(f.get_float("c"), 0.5);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufRoundTrip, LargeTensorFromCallbackIsNotCopied) {
  // The callback is invoked at write time with exactly the tensor's bytes.
  GgufWriter w;
  size_t calls = 0;
  w.add_tensor("big", DType::F16, {4096, 64}, [&](uint8_t* dst, size_t n) {
    ++calls;
    EXPECT_EQ(n, 4096u * 64 * 2);
    for (size_t k = 0; k < n; ++k) dst[k] = uint8_t(k * 7);
  });
  EXPECT_EQ(calls, 0u);
  const auto bytes = w.to_bytes();
  EXPECT_EQ(calls, 1u);
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "m");
  const TensorInfo& t = f.require_tensor("big");
  for (size_t k = 0; k < t.n_bytes; k += 4099) ASSERT_EQ(t.data[k], uint8_t(k * 7));
}

GgufFile getters_file(std::vector<uint8_t>& storage) {
  GgufWriter w;
  w.set_u32("n", 42);
  w.set("neg", Value::make_int(VT::INT16, -3));
  w.set("huge", Value::make_u64(~0ull));
  w.set_f32("x", 0.25f);
  w.set("flag", Value::make_bool(true));
  w.set_string("s", "text");
  w.set("toks", Value::make_strings({"a", "b"}));
  w.set("scores", Value::make_f32s({0.5f, -1.f}));
  w.set("ids", Value::make_i32s({3, -4}));
  w.set("uids", Value::make_uints(VT::UINT32, {5, 6}));
  w.set("bigids", Value::make_uints(VT::UINT64, {~0ull}));
  storage = w.to_bytes();
  return GgufFile::parse(storage.data(), storage.size(), "g.gguf");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufGetters, TypedAccessAndErrors) {
  std::vector<uint8_t> storage;
  const GgufFile f = getters_file(storage);
  EXPECT_EQ(f.get_int("n"), 42);
  EXPECT_EQ(f.get_int("neg"), -3);
  EXPECT_EQ(f.get_float("n"), 42.0);  // integers are numbers too
  EXPECT_EQ(f.get_float("x"), 0.25);
  EXPECT_EQ(f.get_bool("flag"), true);
  EXPECT_EQ(f.get_string("s"), "text");
  ASSERT_NE(f.get_strings("toks"), nullptr);
  EXPECT_EQ(*f.get_strings("toks"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*f.get_floats("scores"), (std::vector<float>{0.5f, -1.f}));
  EXPECT_EQ(*f.get_floats("ids"), (std::vector<float>{3.f, -4.f}));
  EXPECT_EQ(*f.get_ints("ids"), (std::vector<int64_t>{3, -4}));
  EXPECT_EQ(*f.get_ints("uids"), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(f.require_int("n"), 42);
  EXPECT_EQ(f.require_float("x"), 0.25);
  EXPECT_EQ(f.require_string("s"), "text");

  // Absent keys.
  EXPECT_EQ(f.get_int("nope"), std::nullopt);
  EXPECT_EQ(f.get_strings("nope"), nullptr);
  EXPECT_EQ(f.get_floats("nope"), std::nullopt);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);

  // Wrong types and ranges: one line naming file, key and both types.
  EXPECT_EQ(error_of([&] { f.get_int("s"); }),
            "g.gguf: metadata key 's' has type string, expected an integer");
  EXPECT_EQ(error_of([&] { f.get_int("x"); }),
            "g.gguf: metadata key 'x' has type float32, expected an integer");
  EXPECT_EQ(error_of([&] { f.get_string("n"); }),
            "g.gguf: metadata key 'n' has type uint32, expected string");
  EXPECT_EQ(error_of([&] { f.get_bool("n"); }),
            "g.gguf: metadata key 'n' has type uint32, expected bool");
  EXPECT_EQ(error_of([&] { f.get_float("s"); }),
            "g.gguf: metadata key 's' has type string, expected a number");
  EXPECT_EQ(error_of([&] { f.get_strings("ids"); }),
            "g.gguf: metadata key 'ids' has type array[int32], expected array[string]");
  EXPECT_EQ(error_of([&] { f.get_ints("toks"); }),
            "g.gguf: metadata key 'toks' has type array[string], expected an integer array");
  EXPECT_EQ(error_of([&] { f.get_floats("s"); }),
            "g.gguf: metadata key 's' has type string, expected a numeric array");
  EXPECT_EQ(error_of([&] { f.get_int("huge"); }),
            "g.gguf: metadata key 'huge' value 18446744073709551615 is out of range");
  EXPECT_EQ(error_of([&] { f.get_ints("bigids"); }),
            "g.gguf: metadata key 'bigids' element 18446744073709551615 is out of range");
  EXPECT_EQ(error_of([&] { f.require_int("missing.key"); }),
            "g.gguf: missing metadata key 'missing.key'");
  EXPECT_EQ(error_of([&] { f.require_string("missing.key"); }),
            "g.gguf: missing metadata key 'missing.key'");
  EXPECT_EQ(error_of([&] { f.require_tensor("w"); }), "g.gguf: missing tensor 'w'");
}

TEST(GgufValue, ToStringAbbreviatesAndEscapes) {
  std::vector<int32_t> many(100);
  for (int k = 0; k < 100; ++k) many[k] = k;
  EXPECT_EQ(Value::make_i32s(many).to_string(3), "[0, 1, 2, ... (100 total)]");
  EXPECT_EQ(Value::make_i32s({1, 2}).to_string(3), "[1, 2]");
  EXPECT_EQ(Value::make_i32s(many).to_string(0), "[... (100 total)]");
  EXPECT_EQ(Value::make_string("a\"b\n\xff").to_string(), "\"a\\\"b\\n\\xff\"");
  EXPECT_EQ(Value::make_f32(1e-5f).to_string(), "1e-05");
  EXPECT_EQ(Value::make_f32(0.1f).to_string(), "0.1");  // shortest float32 text
  EXPECT_EQ(Value::make_bool(false).to_string(), "false");
  EXPECT_EQ(Value::make_int(VT::INT8, -7).to_string(), "-7");
  EXPECT_EQ(Value::make_arrays({Value::make_strings({"x"})}).to_string(), "[[\"x\"]]");
  EXPECT_EQ(value_type_string(Value::make_arrays({Value::make_f32s({})})), "array[array[float32]]");
  EXPECT_EQ(Value::make_u32(5).as_int(), 5);
  EXPECT_EQ(Value::make_u64(~0ull).as_int(), std::nullopt);
  EXPECT_EQ(Value::make_string("5").as_int(), std::nullopt);
  EXPECT_EQ(Value::make_int(VT::INT64, -9).as_float(), -9.0);
  EXPECT_EQ(Value::make_strings({"a", "b"}).array_size(), 2u);
}

TEST(GgufValue, EscapeKeepsValidUtf8AndEscapesTheRest) {
  EXPECT_EQ(escape("plain"), "plain");
  EXPECT_EQ(escape("\xe2\x96\x81hi \xf0\x9f\x98\x80"), "\xe2\x96\x81hi \xf0\x9f\x98\x80");
  EXPECT_EQ(escape("a\nb\tc\\\""), "a\\nb\\tc\\\\\\\"");
  EXPECT_EQ(escape(std::string("\0\x7f", 2)), "\\x00\\x7f");
  EXPECT_EQ(escape("\xc2\x85"), "\\xc2\\x85");                    // C1 control (NEL)
  EXPECT_EQ(escape("\xc2\xa0"), "\xc2\xa0");                      // U+00A0 is printable
  EXPECT_EQ(escape("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(escape("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // surrogate
  EXPECT_EQ(escape("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(escape("x\xe2\x96"), "x\\xe2\\x96");                  // cut short
  EXPECT_EQ(escape("\xff\xe2\x96\x81"), "\\xff\xe2\x96\x81");
}

TEST(GgufValue, ConstructorsCheckRanges) {
  EXPECT_THROW(Value::make_uint(VT::UINT8, 256), Error);
  EXPECT_THROW(Value::make_int(VT::INT16, 40000), Error);
  EXPECT_THROW(Value::make_uint(VT::INT32, 1), Error);
  EXPECT_THROW(Value::make_float(VT::UINT32, 1), Error);
  EXPECT_THROW(Value::make_ints(VT::INT8, {1, 200}), Error);
  EXPECT_THROW(Value::make_arrays({Value::make_u32(1)}), Error);
}

TEST(GgufWriter, RejectsBadInput) {
  EXPECT_EQ(error_of([] { GgufWriter w(0); }),
            "GgufWriter: alignment 0 is not a nonzero 32-bit power of two");
  EXPECT_THROW(GgufWriter w(48), Error);

  GgufWriter w;
  const std::vector<uint8_t> data(34 * 2);
  w.add_tensor("t", DType::Q8_0, {32, 2}, data.data(), data.size());
  EXPECT_EQ(error_of([&] {
              w.add_tensor("t", DType::Q8_0, {32, 2}, data.data(), data.size());
            }),
            "GgufWriter: tensor 't': added twice");
  EXPECT_EQ(error_of([&] {
              w.add_tensor("u", DType::Q8_0, {33, 2}, data.data(), data.size());
            }),
            "GgufWriter: tensor 'u': row of 33 elements is not a multiple of q8_0's block size 32");
  EXPECT_EQ(error_of([&] {
              w.add_tensor("v", DType::Q8_0, {32, 1}, data.data(), data.size());
            }),
            "GgufWriter: tensor 'v': 68 bytes given, its shape and type need 34");
  EXPECT_EQ(error_of([&] {
              w.add_tensor("w", DType::F32, {2, 0}, data.data(), 0);
            }),
            "GgufWriter: tensor 'w': dimension 0 is not positive");
  EXPECT_EQ(error_of([&] {
              w.add_tensor("x", DType::F32, {1, 1, 1, 1, 1}, data.data(), 4);
            }),
            "GgufWriter: tensor 'x': 5 dimensions (must be 1 to 4)");
  EXPECT_EQ(error_of([&] { w.add_tensor("y", DType(77), {4}, data.data(), 4); }),
            "GgufWriter: tensor 'y': unknown type 77");
  EXPECT_EQ(error_of([&] { w.add_tensor(std::string(64, 'n'), DType::F32, {1}, data.data(), 4); }),
            "GgufWriter: tensor '" + std::string(64, 'n') + "': name longer than 63 bytes");
  EXPECT_EQ(error_of([&] { w.set_u32("general.alignment", 64); }),
            "GgufWriter: general.alignment must be the uint32 32 given to the constructor, got "
            "uint32 64");
  // A hand-assembled Value whose elements sit in the wrong member.
  Value bad;
  bad.type = VT::ARRAY;
  bad.elem_type = VT::UINT8;
  bad.ints = {1};
  EXPECT_EQ(error_of([&] { w.set("k", bad); }),
            "GgufWriter: metadata key 'k': array of uint8 holds its elements in the wrong member");
  Value narrow;
  narrow.type = VT::UINT8;
  narrow.u = 300;
  EXPECT_EQ(error_of([&] { w.set("k2", narrow); }),
            "GgufWriter: metadata key 'k2': gguf value: 300 does not fit in uint8");
  // The failed calls left the writer as it was: one tensor, no metadata.
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "w");
  EXPECT_EQ(f.tensors().size(), 1u);
  EXPECT_TRUE(f.metadata().empty());
}

}  // namespace
}  // namespace tkv::gguf
