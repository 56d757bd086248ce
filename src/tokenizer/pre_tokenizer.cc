#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace tkv::tok {

namespace {

// ---------------------------------------------------------------------------
// The regex sets, as llama.cpp's llm_tokenizer_bpe writes them (which in turn
// come from each model's tokenizer.json). The GPT-2 pattern carries a final
// `|\s+`: llama.cpp matches that pattern with a hand-written matcher that
// behaves as if the alternative were there (a lone space before a non-space
// becomes its own word).

const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Llama 3: case-insensitive contractions written out as classes (PCRE2's
// caseless mode would also let "'ſ" match "'s"), digits in groups of three.
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen2: as Llama 3 but every digit is a word.
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen3.5: as Qwen2, but combining marks (\p{M}) belong to letter runs and
// never start a punctuation run.
const char* const kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?"
    "[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-4o / o200k (gpt-oss, Llama 4): an optional non-letter, then capitals
// followed by lower-case letters (or capitals alone), then an optional
// contraction; digits in groups of up to three; punctuation runs keep
// trailing newlines and slashes. The case classes are llama.cpp's rewrite
// of tokenizer.json's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
// [\p{Ll}\p{Lm}\p{Lo}\p{M}]: "a letter other than a-z" and "a letter other
// than A-Z". So only ASCII letters have a case, and combining marks are not
// part of words (they fall to the punctuation alternative).
const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// DeepSeek LLM: cased letters, ASCII/full-width punctuation, CJK and digits,
// each split separately. The letter class is the set of cased letters
// (Lu, Ll, Lt); the six code points written as \x{..} are ones that Unicode
// normalization (NFC) would rewrite to other letters, so an editor or tool
// that normalizes this file cannot silently change them.
// clang-format off
const char* const kDeepseekLetters =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵ"
    "Ϸ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗ"
    "ὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}"
    "ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉ"
    "ⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓"
    "𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";
const char* const kDeepseekPunct = "\\s?[!-/:-~！-／：-～‘-‟　-。]+";
const char* const kCjk = "[一-龥ࠀ-一가-퟿]+";
// clang-format on

struct SpecEntry {
  std::vector<std::string> names;  // first is canonical
  PreTokenizerSpec spec;
};

std::vector<SpecEntry> build_specs() {
  auto spec = [](std::string name, std::vector<std::string> patterns, bool ignore_merges,
                 bool add_bos) {
    return PreTokenizerSpec{std::move(name), std::move(patterns), ignore_merges, add_bos};
  };
  std::vector<SpecEntry> s;
  // llama.cpp's fallback set for "default" and for a missing key.
  s.push_back({{"default", ""},
               spec("default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"},
                    false, false)});
  s.push_back({{"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                "jina-v2-code", "roberta-bpe", "gigachat", "mpt", "olmo", "jais", "trillion",
                "granite-docling", "exaone4", "a.x-4.0", "mellum", "modern-bert"},
               spec("gpt-2", {kGpt2}, false, false)});
  s.push_back(
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       spec("llama3", {kLlama3}, /*ignore_merges=*/true, /*add_bos=*/true)});
  s.push_back({{"dbrx", "smaug-bpe"}, spec("dbrx", {kLlama3}, false, false)});
  s.push_back({{"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2"},
               spec("qwen2", {kQwen2}, false, false)});
  s.push_back({{"qwen35"}, spec("qwen35", {kQwen35}, false, false)});
  s.push_back({{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
               spec("gpt-4o", {kGpt4o}, false, false)});
  // Gemma 4 cuts the text only into runs of newlines and runs of anything
  // else; the merges then run over each whole line.
  PreTokenizerSpec gemma4 = spec("gemma4", {"[^\\n]+|[\\n]+"}, false, /*add_bos=*/true);
  gemma4.spm_style = true;
  s.push_back({{"gemma4", "granite-embed-multi-311m"}, std::move(gemma4)});
  s.push_back(
      {{"deepseek-llm"},
       spec("deepseek-llm", {"[\r\n]", kDeepseekLetters, kDeepseekPunct, "\\s+$", kCjk, "\\p{N}+"},
            false, false)});
  s.push_back({{"deepseek-coder"},
               spec("deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"},
                    false, false)});
  s.push_back({{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
               spec("starcoder", {"\\p{N}", kGpt2}, false, false)});
  s.push_back(
      {{"falcon"},
       spec("falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}, false, false)});
  return s;
}

const std::vector<SpecEntry>& specs() {
  static const std::vector<SpecEntry> s = build_specs();
  return s;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return str("PCRE2 error ", code);
  return reinterpret_cast<const char*>(buf);
}

pcre2_code* compile_or_fail(const std::string& pattern, uint32_t options) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_offset, nullptr);
  if (!code) {
    fail("pre-tokenizer: regex '", pattern, "' does not compile at offset ", err_offset, ": ",
         pcre2_message(err));
  }
  // JIT is an optimization only: when it is unavailable, or refuses the
  // pattern, pcre2_match falls back to the interpreter.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return code;
}

// UTF mode (patterns and subjects are UTF-8), no PCRE2_UCP (see the header:
// `\s` must stay ASCII because non-ASCII spaces are substituted), DOLLAR_ENDONLY
// so `$` means the end of the piece as in std::regex, NO_AUTO_CAPTURE because
// only the whole match is used.
constexpr uint32_t kCompileOptions = PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_AUTO_CAPTURE;

// Finds non-ASCII White_Space code points (U+0085, U+00A0, U+3000, ...).
const pcre2_code* non_ascii_space_regex() {
  static pcre2_code* const code = compile_or_fail("[^\\x00-\\x7F\\P{White_Space}]", PCRE2_UTF);
  return code;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

// The text the regexes see: the input with invalid bytes as U+FFFD and
// non-ASCII spaces as U+000B, one code point for one code point, so piece
// boundaries can be mapped back to the original bytes.
class MatchText {
 public:
  explicit MatchText(std::string_view text) : original_(text) {
    bool ascii = true;
    for (char c : text) ascii &= static_cast<uint8_t>(c) < 0x80;
    subject_ = text;
    if (ascii) return;
    std::string repaired;
    const bool valid = utf8_is_valid(text);
    if (!valid) {
      repaired.reserve(text.size() + 16);
      for (size_t pos = 0; pos < text.size();) {
        uint32_t cp = 0;
        const size_t len = utf8_decode(text, pos, &cp);
        if (len == 0) {
          repaired += "\xEF\xBF\xBD";
          ++pos;
        } else {
          repaired.append(text, pos, len);
          pos += len;
        }
      }
    }
    std::string spaced;
    if (substitute_spaces(valid ? text : std::string_view(repaired), spaced)) {
      owned_ = std::move(spaced);
    } else if (!valid) {
      owned_ = std::move(repaired);
    } else {
      return;
    }
    changed_ = true;
    subject_ = owned_;
  }

  // subject_ may point into owned_: not copyable.
  MatchText(const MatchText&) = delete;
  MatchText& operator=(const MatchText&) = delete;

  std::string_view subject() const { return subject_; }

  // Converts ascending piece ends from subject offsets to original offsets.
  void map_to_original(std::vector<size_t>& ends) const {
    if (!changed_) return;
    size_t subj = 0, orig = 0;
    for (size_t& end : ends) {
      while (subj < end) {
        subj += utf8_len_from_lead(static_cast<uint8_t>(subject_[subj]));
        uint32_t cp = 0;
        const size_t len = utf8_decode(original_, orig, &cp);
        orig += len == 0 ? 1 : len;
      }
      end = orig;
    }
  }

 private:
  // Writes `valid` with its non-ASCII White_Space code points replaced by
  // U+000B to `out`; returns false (and leaves `out` alone) when there are none.
  static bool substitute_spaces(std::string_view valid, std::string& out) {
    const pcre2_code* re = non_ascii_space_regex();
    MatchData md(pcre2_match_data_create(1, nullptr));
    if (!md) fail("pre-tokenizer: out of memory");
    auto subj = reinterpret_cast<PCRE2_SPTR>(valid.data());
    size_t copied = 0;
    bool any = false;
    while (copied < valid.size()) {
      const int rc =
          pcre2_match(re, subj, valid.size(), copied, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) fail("pre-tokenizer: PCRE2 match failed: ", pcre2_message(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      if (!any) out.reserve(valid.size());
      any = true;
      out.append(valid, copied, ov[0] - copied);
      out += '\x0B';
      copied = ov[1];
    }
    if (!any) return false;
    out.append(valid, copied);
    return true;
  }

  std::string_view original_;
  std::string_view subject_;
  std::string owned_;
  bool changed_ = false;
};

}  // namespace

const PreTokenizerSpec& pre_tokenizer_spec(std::string_view pre) {
  for (const SpecEntry& e : specs()) {
    if (std::find(e.names.begin(), e.names.end(), pre) != e.names.end()) return e.spec;
  }
  std::string names;
  for (const std::string& n : supported_pre_tokenizers()) {
    if (!names.empty()) names += ", ";
    names += n;
  }
  fail("tokenizer.ggml.pre '", pre, "' is not a supported BPE pre-tokenizer (supported: ", names,
       ")");
}

std::vector<std::string> supported_pre_tokenizers() {
  std::vector<std::string> names;
  for (const SpecEntry& e : specs()) {
    for (const std::string& n : e.names)
      if (!n.empty()) names.push_back(n);
  }
  return names;
}

struct PreTokenizer::Compiled {
  std::vector<pcre2_code*> codes;
  ~Compiled() {
    for (pcre2_code* c : codes) pcre2_code_free(c);
  }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns)
    : impl_(std::make_unique<Compiled>()) {
  for (const std::string& p : patterns) impl_->codes.push_back(compile_or_fail(p, kCompileOptions));
}

size_t PreTokenizer::bytes() const {
  size_t n = 0;
  for (pcre2_code* c : impl_->codes) {
    size_t size = 0, jit = 0;
    if (pcre2_pattern_info(c, PCRE2_INFO_SIZE, &size) == 0) n += size;
    if (pcre2_pattern_info(c, PCRE2_INFO_JITSIZE, &jit) == 0) n += jit;
  }
  return n;
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

namespace {

struct JitStackDeleter {
  void operator()(pcre2_jit_stack* s) const { pcre2_jit_stack_free(s); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
};

// Runs one regex over one piece [begin, end) of the subject and appends the
// resulting piece ends (matches and the gaps between them) to `out`.
class PieceMatcher {
 public:
  PieceMatcher() : md_(pcre2_match_data_create(1, nullptr)) {
    if (!md_) fail("pre-tokenizer: out of memory");
  }

  void split_piece(const pcre2_code* re, std::string_view subject, size_t begin, size_t end,
                   std::vector<size_t>& out) {
    auto piece = reinterpret_cast<PCRE2_SPTR>(subject.data() + begin);
    const size_t len = end - begin;
    size_t emitted = 0;  // piece-relative end of what has been emitted
    size_t search = 0;
    while (search < len) {
      const int rc = match(re, piece, len, search);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) fail("pre-tokenizer: PCRE2 match failed: ", pcre2_message(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_.get());
      if (ov[1] == ov[0]) {
        // None of our patterns can match empty; should one, step over a
        // code point rather than emit an empty word.
        if (ov[0] >= len) break;
        search = ov[0] + utf8_len_from_lead(static_cast<uint8_t>(subject[begin + ov[0]]));
        continue;
      }
      if (ov[0] > emitted) out.push_back(begin + ov[0]);
      out.push_back(begin + ov[1]);
      emitted = search = ov[1];
    }
    if (emitted < len) out.push_back(end);
  }

 private:
  int match(const pcre2_code* re, PCRE2_SPTR piece, size_t len, size_t start) {
    int rc = pcre2_match(re, piece, len, start, PCRE2_NO_UTF_CHECK, md_.get(), context_.get());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !jit_stack_) {
      // The default 32 KiB JIT stack can run out on very long runs; retry
      // this call (and the rest of this split) with a larger one.
      jit_stack_.reset(pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr));
      context_.reset(pcre2_match_context_create(nullptr));
      if (!jit_stack_ || !context_) fail("pre-tokenizer: out of memory for the regex stack");
      pcre2_jit_stack_assign(context_.get(), nullptr, jit_stack_.get());
      rc = pcre2_match(re, piece, len, start, PCRE2_NO_UTF_CHECK, md_.get(), context_.get());
    }
    return rc;
  }

  MatchData md_;
  std::unique_ptr<pcre2_jit_stack, JitStackDeleter> jit_stack_;
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> context_;
};

}  // namespace

std::vector<size_t> PreTokenizer::split(std::string_view text) const {
  if (text.empty()) return {};
  const MatchText mt(text);
  const std::string_view subject = mt.subject();
  std::vector<size_t> ends{subject.size()};
  std::vector<size_t> next;
  PieceMatcher matcher;
  for (const pcre2_code* re : impl_->codes) {
    next.clear();
    next.reserve(ends.size() * 2);
    size_t begin = 0;
    for (size_t end : ends) {
      matcher.split_piece(re, subject, begin, end, next);
      begin = end;
    }
    ends.swap(next);
  }
  mt.map_to_original(ends);
  return ends;
}

}  // namespace tkv::tok
