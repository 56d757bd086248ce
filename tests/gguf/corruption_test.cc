// Corrupt input never crashes the reader: every truncation of a small valid
// file, every single-byte change of its header region and random multi-byte
// changes either parse into a consistent file or throw one tkv::Error line
// naming the file. Run under ASan+UBSan (TURBOKV_SANITIZE=ON) to make "never
// crashes" mean "no out-of-bounds read and no undefined behaviour" too.
// Every parse reads from a heap buffer of exactly the file's size, so that
// ASan sees any read past the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/inspect.h"
#include "raw_gguf.h"

namespace tkv::gguf {
namespace {

using test::RawGguf;

// Small but covers every section: strings, numbers, arrays of strings and
// arrays of arrays, three tensors of block types. The last tensor's size is a
// multiple of the alignment, so the file ends exactly where its data ends and
// every proper prefix is a truncated file.
std::vector<uint8_t> small_valid_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.f);
  w.set("flag", Value::make_bool(true));
  w.set("tokenizer.ggml.tokens", Value::make_strings({"<s>", "a", "\xe2\x96\x81"}));
  w.set("nested", Value::make_arrays({Value::make_i32s({1}), Value::make_strings({"x"})}));
  std::vector<uint8_t> data(256);
  for (size_t k = 0; k < data.size(); ++k) data[k] = uint8_t(k);
  w.add_tensor("a", DType::F32, {8, 2}, data.data(), 64);
  w.add_tensor("b", DType::Q8_0, {32, 1}, data.data(), 34);
  w.add_tensor("c", DType::F16, {16, 1}, data.data(), 32);
  return w.to_bytes();
}

enum class Outcome { kParsed, kError };

// Checks what a successful parse promises; exercises every accessor.
void check_consistent(const GgufFile& f, const uint8_t* buf, size_t size) {
  ASSERT_TRUE(f.version() == 2 || f.version() == 3);
  ASSERT_GT(f.alignment(), 0u);
  ASSERT_EQ(f.alignment() & (f.alignment() - 1), 0u);
  ASSERT_EQ(f.data_offset() % f.alignment(), 0u);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_LE(t.shape.size(), 4u);
    for (int64_t d : t.shape) ASSERT_GT(d, 0);
    ASSERT_EQ(t.offset % f.alignment(), 0u);
    ASSERT_GE(t.data, buf + f.data_offset());
    ASSERT_LE(t.data + t.n_bytes, buf + size);
    ASSERT_EQ(t.data, buf + f.data_offset() + t.offset);
    spans.emplace_back(t.offset, t.offset + t.n_bytes);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) ASSERT_LE(spans[k - 1].second, spans[k].first);
  for (const auto& [key, value] : f.metadata()) {
    (void)value.to_string();
    try {  // getters either answer or throw tkv::Error
      (void)f.get_int(key);
    } catch (const Error&) {
    }
  }
  (void)describe(f);
}

// Parses a copy of bytes[0, size) in an exactly-sized heap buffer.
Outcome parse_copy(const uint8_t* bytes, size_t size) {
  std::unique_ptr<uint8_t[]> buf(size ? new uint8_t[size] : nullptr);
  if (size) std::memcpy(buf.get(), bytes, size);
  try {
    const GgufFile f = GgufFile::parse(buf.get(), size, "corrupt.gguf");
    check_consistent(f, buf.get(), size);
    return Outcome::kParsed;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("corrupt.gguf: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return Outcome::kError;
  }
}

TEST(GgufCorruption, ValidFileParses) {
  const auto file = small_valid_file();
  ASSERT_EQ(parse_copy(file.data(), file.size()), Outcome::kParsed);
  const GgufFile f = GgufFile::parse(file.data(), file.size(), "ok");
  const TensorInfo& last = f.tensors().back();
  ASSERT_EQ(f.data_offset() + last.offset + last.n_bytes, file.size())
      << "the fixture must end exactly at its last tensor's data";
}

TEST(GgufCorruption, EveryTruncationIsAnError) {
  const auto file = small_valid_file();
  for (size_t n = 0; n < file.size(); ++n)
    ASSERT_EQ(parse_copy(file.data(), n), Outcome::kError) << "prefix of " << n << " bytes parsed";
}

// A file cut short (an interrupted download) says so, wherever the cut is:
// not "absurd metadata count" for a header whose counts are those of the
// whole file.
TEST(GgufCorruption, EveryTruncationSaysTruncated) {
  const auto file = small_valid_file();
  for (size_t n = 5; n < file.size(); ++n) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n]);
    std::memcpy(buf.get(), file.data(), n);
    try {
      GgufFile::parse(buf.get(), n, "cut.gguf");
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos)
          << "prefix of " << n << " bytes: " << e.what();
    }
  }
}

TEST(GgufCorruption, EverySingleByteChangeOfTheHeaderRegion) {
  const auto file = small_valid_file();
  const uint64_t header_end = GgufFile::parse(file.data(), file.size(), "ok").data_offset();
  size_t errors = 0, parsed = 0;
  for (size_t pos = 0; pos < header_end; ++pos) {
    for (int change : {0x01, 0x80, 0xff, -1, -2}) {
      auto copy = file;
      // -1 / -2: set to 0x00 / 0x7f; otherwise XOR.
      copy[pos] = change == -1 ? 0x00 : change == -2 ? 0x7f : uint8_t(copy[pos] ^ change);
      if (copy[pos] == file[pos]) continue;
      (parse_copy(copy.data(), copy.size()) == Outcome::kError ? errors : parsed)++;
    }
  }
  // Both outcomes occur: flips in string bytes are harmless, flips in counts are not.
  EXPECT_GT(errors, header_end);
  EXPECT_GT(parsed, 0u);
}

TEST(GgufCorruption, RandomMultiByteChanges) {
  const auto file = small_valid_file();
  const uint64_t header_end = GgufFile::parse(file.data(), file.size(), "ok").data_offset();
  std::mt19937_64 rng(20240601);
  size_t errors = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    auto copy = file;
    const int n_changes = 1 + int(rng() % 8);
    for (int c = 0; c < n_changes; ++c) {
      // Mostly the header region, where a change can matter.
      const size_t limit = (rng() % 4 == 0) ? copy.size() : size_t(header_end);
      copy[rng() % limit] = uint8_t(rng());
    }
    if (rng() % 8 == 0) copy.resize(rng() % (copy.size() + 1));  // and sometimes truncate
    errors += parse_copy(copy.data(), copy.size()) == Outcome::kError;
  }
  EXPECT_GT(errors, 0u);
}

std::string parse_error(const RawGguf& raw) {
  const auto& d = raw.data();
  std::unique_ptr<uint8_t[]> buf(new uint8_t[d.size() + 1]);
  if (!d.empty()) std::memcpy(buf.get(), d.data(), d.size());
  try {
    GgufFile::parse(buf.get(), d.size(), "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

constexpr uint32_t kF32 = 0, kQ8_0 = 8;
constexpr uint32_t kTypeString = 8, kTypeArray = 9, kTypeU64 = 10;

TEST(GgufCorruption, HugeCountsFailFast) {
  // A 24-byte file claiming 2^60 tensors.
  EXPECT_EQ(parse_error(RawGguf().header(1ull << 60, 0)),
            "bad.gguf: absurd tensor count 1152921504606846976 (only 0 bytes follow the header)");
  EXPECT_EQ(parse_error(RawGguf().header(0, 1ull << 62).zeros(100)),
            "bad.gguf: absurd metadata count 4611686018427387904 (only 100 bytes follow the "
            "header)");
  EXPECT_EQ(parse_error(RawGguf().header(0, ~0ull)),
            "bad.gguf: absurd metadata count 18446744073709551615 (only 0 bytes follow the "
            "header)");
  // A 20-byte file: the count itself is cut off.
  EXPECT_EQ(parse_error(RawGguf().bytes("GGUF").u32(3).u64(1ull << 60).u32(0)),
            "bad.gguf: truncated header (needs 8 bytes at offset 16, file has 20)");
  // Key length 2^63.
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).u64(1ull << 63).zeros(8)),
            "bad.gguf: truncated metadata entry #0 (needs 9223372036854775808 bytes at offset "
            "32, file has 40)");
  // Array counts beyond the remaining bytes, for several element types.
  EXPECT_EQ(
      parse_error(RawGguf().header(0, 1).str("k").u32(kTypeArray).u32(kTypeU64).u64(1ull << 61)),
      "bad.gguf: metadata key 'k': array of 2305843009213693952 uint64 elements cannot fit "
      "in the 0 bytes left in the file");
  EXPECT_EQ(parse_error(
                RawGguf().header(0, 1).str("k").u32(kTypeArray).u32(kTypeString).u64(3).zeros(16)),
            "bad.gguf: truncated: metadata key 'k': array of 3 string elements cannot fit in the "
            "16 bytes "
            "left in the file");
  EXPECT_EQ(parse_error(
                RawGguf().header(0, 1).str("k").u32(kTypeArray).u32(kTypeString).u64(1).u64(~0ull)),
            "bad.gguf: truncated metadata key 'k' (needs 18446744073709551615 bytes at offset 57, "
            "file has 57)");
  // String value length 2^62.
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).str("k").u32(kTypeString).u64(1ull << 62)),
            "bad.gguf: truncated metadata key 'k' (needs 4611686018427387904 bytes at offset 45, "
            "file has 45)");
}

TEST(GgufCorruption, DeeplyNestedArraysAreRejectedWithoutRecursingFurther) {
  RawGguf raw;
  raw.header(0, 1).str("deep").u32(kTypeArray);
  for (int k = 0; k < 10000; ++k) raw.u32(kTypeArray).u64(1);
  raw.u32(4).u64(0);
  EXPECT_EQ(parse_error(raw),
            "bad.gguf: metadata key 'deep': arrays nested more than 8 levels deep");
}

TEST(GgufCorruption, HeaderProblems) {
  EXPECT_EQ(parse_error(RawGguf()), "bad.gguf: not a GGUF file (0 bytes)");
  EXPECT_EQ(parse_error(RawGguf().bytes("GG")),
            "bad.gguf: truncated header (needs 4 bytes at offset 0, file has 2)");
  EXPECT_EQ(parse_error(RawGguf().bytes("GGML").u32(3).u64(0).u64(0)),
            "bad.gguf: not a GGUF file (magic is 'GGML', expected 'GGUF')");
  EXPECT_EQ(parse_error(RawGguf()
                            .bytes("\x7f"
                                   "ELF")
                            .zeros(40)),
            "bad.gguf: not a GGUF file (magic is '\\x7fELF', expected 'GGUF')");
  EXPECT_EQ(parse_error(RawGguf().header(0, 0, 1)),
            "bad.gguf: GGUF version 1 is not supported (only versions 2 and 3)");
  EXPECT_EQ(parse_error(RawGguf().header(0, 0, 4)),
            "bad.gguf: unsupported GGUF version 4 (only versions 2 and 3)");
  EXPECT_EQ(parse_error(RawGguf().header(0, 0, 0x03000000)),
            "bad.gguf: big-endian GGUF files are not supported");
  EXPECT_EQ(parse_error(RawGguf().header(0, 0)), "(parsed)");  // empty but valid
}

TEST(GgufCorruption, MetadataProblems) {
  EXPECT_EQ(parse_error(RawGguf().header(0, 2).kv_u32("a", 1).kv_u32("a", 2)),
            "bad.gguf: duplicate metadata key 'a'");
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).str("k").u32(13).u32(0)),
            "bad.gguf: metadata key 'k': unknown value type 13");
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).str("k").u32(kTypeArray).u32(99).u64(0)),
            "bad.gguf: metadata key 'k': unknown array element type 99");
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).kv_u32("general.alignment", 0)),
            "bad.gguf: general.alignment 0 is not a nonzero power of two");
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).kv_u32("general.alignment", 48)),
            "bad.gguf: general.alignment 48 is not a nonzero power of two");
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).str("general.alignment").u32(kTypeString).str("32")),
            "bad.gguf: general.alignment has type string, expected an integer");
  // Invalid UTF-8 in keys and values is just bytes.
  EXPECT_EQ(parse_error(RawGguf().header(0, 1).str("\xff\xfe").u32(kTypeString).str("\xc3(")),
            "(parsed)");
}

// One tensor info after a minimal header; data of `data_bytes` zeros.
RawGguf one_tensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data_bytes,
                   std::string_view name = "w") {
  RawGguf raw;
  raw.header(1, 0).tensor(name, std::move(dims), type, offset).pad_to(32).zeros(data_bytes);
  return raw;
}

TEST(GgufCorruption, TensorInfoProblems) {
  EXPECT_EQ(parse_error(one_tensor({4, 4}, kF32, 0, 64)), "(parsed)");
  EXPECT_EQ(parse_error(one_tensor({1, 1, 1, 1, 1}, kF32, 0, 64)),
            "bad.gguf: tensor 'w' has 5 dimensions (at most 4)");
  EXPECT_EQ(parse_error(one_tensor({4, 0}, kF32, 0, 64)),
            "bad.gguf: tensor 'w' has invalid dimension 1 = 0");
  EXPECT_EQ(parse_error(one_tensor({4, ~0ull}, kF32, 0, 64)),
            "bad.gguf: tensor 'w' has invalid dimension 1 = -1");
  EXPECT_EQ(parse_error(one_tensor({1ull << 40, 1ull << 40}, kF32, 0, 64)),
            "bad.gguf: tensor 'w' has too many elements (the shape's product overflows)");
  EXPECT_EQ(parse_error(one_tensor({1ull << 62}, kF32, 0, 64)),
            "bad.gguf: tensor 'w' is too large (byte size overflows)");
  EXPECT_EQ(parse_error(one_tensor({4}, 99, 0, 64)), "bad.gguf: tensor 'w' has unknown type 99");
  EXPECT_EQ(parse_error(one_tensor({33, 2}, kQ8_0, 0, 128)),
            "bad.gguf: tensor 'w' of type q8_0 has rows of 33 elements, not a multiple of the "
            "block size 32");
  EXPECT_EQ(parse_error(one_tensor({4}, kF32, 16, 64)),
            "bad.gguf: tensor 'w' has offset 16, not a multiple of the alignment 32");
  EXPECT_EQ(
      parse_error(one_tensor({4, 4}, kF32, 32, 64)),
      "bad.gguf: truncated: tensor 'w' (offset 32, 64 bytes) extends past the end of the file "
      "(data section has 64 bytes)");
  EXPECT_EQ(parse_error(one_tensor({4}, kF32, 1ull << 63, 64)),
            "bad.gguf: tensor 'w' (offset 9223372036854775808, 16 bytes) extends past the end of "
            "the file (data section has 64 bytes)");
  // Tensor infos end but the data section is missing.
  EXPECT_EQ(parse_error(RawGguf().header(1, 0).tensor("w", {4}, kF32, 0)),
            "bad.gguf: truncated before the tensor data (data section starts at 64, file has 57 "
            "bytes)");

  RawGguf overlap;
  overlap.header(2, 0).tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32).pad_to(32).zeros(128);
  EXPECT_EQ(parse_error(overlap),
            "bad.gguf: tensors 'a' and 'b' overlap (offsets 0 + 64 bytes and 32)");
  RawGguf dup;
  dup.header(2, 0).tensor("a", {8}, kF32, 0).tensor("a", {8}, kF32, 32).pad_to(32).zeros(64);
  EXPECT_EQ(parse_error(dup), "bad.gguf: duplicate tensor name 'a'");
  // Tensors sharing an offset overlap too; gaps between tensors are fine.
  RawGguf same;
  same.header(2, 0).tensor("a", {8}, kF32, 64).tensor("b", {8}, kF32, 64).pad_to(32).zeros(128);
  EXPECT_EQ(parse_error(same),
            "bad.gguf: tensors 'a' and 'b' overlap (offsets 64 + 32 bytes and 64)");
  RawGguf gap;
  gap.header(2, 0).tensor("a", {8}, kF32, 96).tensor("b", {8}, kF32, 0).pad_to(32).zeros(128);
  EXPECT_EQ(parse_error(gap), "(parsed)");
}

}  // namespace
}  // namespace tkv::gguf
