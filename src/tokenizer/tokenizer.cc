#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/heap_bytes.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/spm.h"
#include "tokenizer/token_map.h"
#include "tokenizer/utf8.h"

namespace tkv::tok {

namespace {

// Token attributes as llama.cpp derives them (llama_token_attr); a token can
// gain CONTROL on top of its GGUF type (EOG-looking texts) and LSTRIP/RSTRIP
// from per-model rules.
enum Attr : uint32_t {
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
};

uint32_t attr_of(TokenType t) {
  switch (t) {
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kByte:
      return kAttrByte;
    case TokenType::kUndefined:
      return 0;
  }
  return 0;
}

// Texts llama.cpp treats as end-of-generation (and therefore control)
// whatever their GGUF type. The order is our preference for tokenizer.eot
// when the file does not name one (llama.cpp's choice among several depends
// on hash-map iteration order).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};
constexpr std::string_view kEogOnlyTexts[] = {
    "<|eom_id|>", "<|return|>", "<|call|>",         "[EOS]",
    "<eos>",      "<turn|>",    "<|tool_response>",  // Gemma 4
};
// gpt-oss (o200k_harmony): message-structure tokens that llama.cpp always
// renders and cuts out of plain text, i.e. treats as user-defined.
constexpr std::string_view kHarmonyUserTexts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                  "<|constrain|>"};

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// Appends `text` with every ' ' written as U+2581 (llama_escape_whitespace).
void escape_spaces(std::string_view text, std::string& out) {
  out.reserve(out.size() + text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out += c;
    }
  }
}

std::string lowercase(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

}  // namespace

struct Tokenizer::State {
  Vocab vocab;
  std::vector<uint32_t> attrs;
  TokenMap token_to_id;
  std::vector<std::string> pieces;  // token_to_piece(render_special = true)
  std::vector<int32_t> eog;
  std::vector<bool> is_eog;
  // Special tokens cut out of the text, longest first: all of them when
  // parse_special, only the user-defined ones otherwise.
  std::vector<SpecialToken> specials_all;
  std::vector<SpecialToken> specials_plain;
  std::array<int32_t, 256> byte_tokens{};  // SPM: <0xNN>; BPE: byte-level character
  std::string pre_name;
  std::optional<PreTokenizer> pre;
  std::optional<BpeMerges> merges;
  bool ignore_merges = false;
  // SentencePiece conventions: spaces as U+2581, <0xNN> byte tokens. Always
  // for SPM; for BPE when the pre-tokenizer says so (Gemma 4).
  bool spm_spelling = false;
  bool spm_words_independent = false;

  explicit State(Vocab v);
  void derive_attributes();
  void apply_harmony_rules();
  void build_pieces();
  void build_specials();
  void encode_fragment(std::string_view text, bool space_prefix, std::vector<int32_t>& out,
                       BpeEncoder::Session* session) const;
};

Tokenizer::State::State(Vocab v) : vocab(std::move(v)) {
  vocab.validate();
  // Only SentencePiece adds a space prefix (llama.cpp's BPE ignores the key
  // when encoding); dropping it here keeps decode() symmetric with encode().
  if (vocab.type == VocabType::kBpe) vocab.add_space_prefix = false;
  const int32_t n = vocab.n_tokens();
  // An empty token text could never be looked up or split on; llama.cpp
  // renames it the same way.
  for (int32_t i = 0; i < n; ++i) {
    if (vocab.tokens[size_t(i)].empty()) vocab.tokens[size_t(i)] = str("[EMPTY_", i, "]");
  }
  token_to_id.reserve(size_t(n));
  attrs.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    token_to_id.insert(vocab.tokens[size_t(i)], i);
    attrs[size_t(i)] = attr_of(vocab.type_of(i));
  }
  derive_attributes();
  apply_harmony_rules();

  const PreTokenizerSpec* spec =
      vocab.type == VocabType::kBpe ? &pre_tokenizer_spec(vocab.pre) : nullptr;
  spm_spelling = !spec || spec->spm_style;
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) {
    if (vocab.type == VocabType::kSpm) {
      char hex[7];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      int32_t id = token_to_id.find(hex);
      // As llama.cpp: without <0xNN>, the byte may exist as a one-byte token.
      if (id == kNoToken) id = token_to_id.find(std::string(1, char(b)));
      byte_tokens[size_t(b)] = id;
    } else if (spm_spelling) {
      // As llama.cpp: only <0xNN> (a piece with neither becomes UNK here).
      char hex[7];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      byte_tokens[size_t(b)] = token_to_id.find(hex);
    } else {
      byte_tokens[size_t(b)] = token_to_id.find(alphabet.spelling(uint8_t(b)));
    }
  }

  if (vocab.type == VocabType::kSpm) {
    spm_words_independent = SpmEncoder::vocab_has_no_inner_space(vocab.tokens);
  }
  if (spec) {
    pre_name = spec->name;
    pre.emplace(spec->patterns);
    ignore_merges = spec->ignore_merges;
    merges.emplace(vocab.merges, token_to_id);
    // BpeMerges holds them from here on, as ids: the texts would be a second
    // copy (the largest table of a 128K-token vocabulary).
    std::vector<std::string>().swap(vocab.merges);
  }
  build_pieces();
  build_specials();
}

void Tokenizer::State::derive_attributes() {
  Vocab& v = vocab;
  // EOT: from the file, else the first EOT-looking text present.
  if (v.eot == kNoToken) {
    for (std::string_view t : kEotTexts) {
      if (const int32_t id = token_to_id.find(t); id != kNoToken) {
        v.eot = id;
        break;
      }
    }
  }
  if (v.eom == kNoToken) v.eom = token_to_id.find("<|eom_id|>");

  std::vector<int32_t> eog_candidates = {v.eos, v.eot, v.eom};
  for (std::string_view t : kEotTexts) eog_candidates.push_back(token_to_id.find(t));
  for (std::string_view t : kEogOnlyTexts) eog_candidates.push_back(token_to_id.find(t));
  is_eog.assign(v.tokens.size(), false);
  for (int32_t id : eog_candidates) {
    if (id == kNoToken || is_eog[size_t(id)]) continue;
    is_eog[size_t(id)] = true;
    eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  // llama.cpp makes every EOG-looking token a control token, whatever its
  // GGUF type, so that plain text never produces it and it renders only on
  // request.
  for (std::string_view t : kEotTexts) {
    if (const int32_t id = token_to_id.find(t); id != kNoToken) attrs[size_t(id)] |= kAttrControl;
  }
  for (std::string_view t : kEogOnlyTexts) {
    if (const int32_t id = token_to_id.find(t); id != kNoToken) attrs[size_t(id)] |= kAttrControl;
  }

  // Phi-3 (llama.cpp keys this on general.name): its special tokens eat the
  // whitespace that follows them, except <unk>, <s>, <|endoftext|>; </s>
  // does too.
  const std::string name = lowercase(v.model_name);
  if (contains(name, "phi-3") || contains(name, "phi3")) {
    const uint32_t special = kAttrControl | kAttrUserDefined | kAttrUnknown;
    for (size_t i = 0; i < attrs.size(); ++i)
      if (attrs[i] & special) attrs[i] |= kAttrRstrip;
    if (const int32_t id = token_to_id.find("</s>"); id != kNoToken)
      attrs[size_t(id)] |= kAttrRstrip;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (const int32_t id = token_to_id.find(t); id != kNoToken) attrs[size_t(id)] &= ~kAttrRstrip;
    }
  }
}

// gpt-oss: with <|return|> and <|call|> ending the generation, <|end|> only
// ends a message, so llama.cpp takes it off the end-of-generation list and
// makes it user-defined (eot() still names it, as in llama.cpp). The
// message-structure tokens become user-defined too.
void Tokenizer::State::apply_harmony_rules() {
  for (std::string_view t : kHarmonyUserTexts) {
    if (const int32_t id = token_to_id.find(t); id != kNoToken)
      attrs[size_t(id)] = kAttrUserDefined;
  }
  const int32_t end = token_to_id.find("<|end|>");
  const int32_t ret = token_to_id.find("<|return|>");
  const int32_t call = token_to_id.find("<|call|>");
  if (end == kNoToken || ret == kNoToken || call == kNoToken) return;
  is_eog[size_t(end)] = false;
  eog.erase(std::remove(eog.begin(), eog.end(), end), eog.end());
  attrs[size_t(end)] = kAttrUserDefined;
}

void Tokenizer::State::build_pieces() {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  pieces.resize(vocab.tokens.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string& text = vocab.tokens[i];
    const uint32_t a = attrs[i];
    std::string& piece = pieces[i];
    if (a & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      piece = text;  // special tokens render as their text
    } else if (a & kAttrNormal) {
      if (spm_spelling) {
        // U+2581 back to spaces.
        for (size_t p = 0; p < text.size();) {
          if (text.compare(p, 3, "\xE2\x96\x81") == 0) {
            piece += ' ';
            p += 3;
          } else {
            piece += text[p++];
          }
        }
      } else {
        // Byte alphabet back to bytes. A character outside the alphabet
        // (not produced by GPT-2-style converters) passes through as is.
        for (size_t p = 0; p < text.size();) {
          uint32_t cp = 0;
          const size_t len = utf8_decode(text, p, &cp);
          const int byte = len ? alphabet.byte_of(cp) : -1;
          if (byte >= 0) {
            piece += char(byte);
            p += len;
          } else {
            const size_t take = len ? len : 1;
            piece.append(text, p, take);
            p += take;
          }
        }
      }
    } else if ((a & kAttrByte) && spm_spelling) {
      // validate() guarantees the <0xNN> spelling.
      piece = char(std::stoi(text.substr(3, 2), nullptr, 16));
    }
    // Unused and undefined tokens render as nothing (as in llama.cpp).
  }
}

void Tokenizer::State::build_specials() {
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const uint32_t a = attrs[size_t(id)];
    if (!(a & (kAttrControl | kAttrUserDefined | kAttrUnknown))) continue;
    SpecialToken sp{vocab.tokens[size_t(id)], id, bool(a & kAttrLstrip), bool(a & kAttrRstrip)};
    if (!(a & (kAttrControl | kAttrUnknown))) specials_plain.push_back(sp);
    specials_all.push_back(std::move(sp));
  }
  auto longest_first = [](const SpecialToken& a, const SpecialToken& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  };
  std::sort(specials_all.begin(), specials_all.end(), longest_first);
  std::sort(specials_plain.begin(), specials_plain.end(), longest_first);
}

void Tokenizer::State::encode_fragment(std::string_view text, bool space_prefix,
                                       std::vector<int32_t>& out,
                                       BpeEncoder::Session* session) const {
  if (vocab.type == VocabType::kSpm) {
    std::string escaped;
    if (space_prefix) escaped = kSpace;
    escape_spaces(text, escaped);
    SpmEncoder(token_to_id, vocab.scores, byte_tokens, vocab.unk, spm_words_independent)
        .encode(escaped, out);
    return;
  }
  if (spm_spelling) {
    // Gemma 4: spaces become U+2581 before the split (llama.cpp's
    // escape_whitespaces). The session keeps the escaped text, which its
    // word cache points into.
    std::string& escaped = session->texts.emplace_back();
    escape_spaces(text, escaped);
    text = escaped;
  }
  const BpeEncoder encoder(token_to_id, *merges, byte_tokens, ignore_merges, spm_spelling,
                           vocab.unk);
  size_t begin = 0;
  for (size_t end : pre->split(text)) {
    encoder.encode_word(text.substr(begin, end - begin), *session, out);
    begin = end;
  }
}

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
  Vocab vocab = Vocab::from_gguf(file);
  try {
    return Tokenizer(std::move(vocab));
  } catch (const Error& e) {
    fail(file.path(), ": ", e.what());
  }
}

Tokenizer::Tokenizer(Vocab vocab) : state_(std::make_shared<const State>(std::move(vocab))) {}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const State& s = *state_;
  const Vocab& v = s.vocab;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && v.add_bos) out.push_back(v.bos);

  const std::vector<Fragment> frags =
      split_on_special_tokens(text, parse_special ? s.specials_all : s.specials_plain);
  BpeEncoder::Session session;
  // SPM: a text fragment at the start or right after a special token gets the
  // space prefix (llama.cpp's is_prev_special rule).
  bool after_special = true;
  for (const Fragment& f : frags) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    s.encode_fragment(text.substr(f.begin, f.end - f.begin), v.add_space_prefix && after_special,
                      out, &session);
    after_special = false;
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

namespace {

// The end of the run of ids from `at` whose pieces (render_special) spell
// exactly `text` (after one space where `space`), when the id there is
// `next`; else 0.
size_t spelled_until(std::span<const int32_t> ids, size_t at,
                     const std::vector<std::string>& pieces, std::string_view text, bool space,
                     int32_t next) {
  std::string_view rest = text;
  bool space_left = space;
  for (; at < ids.size() && (space_left || !rest.empty()); ++at) {
    if (ids[at] < 0 || size_t(ids[at]) >= pieces.size()) return 0;
    std::string_view piece = pieces[size_t(ids[at])];
    if (space_left) {
      if (piece.empty() || piece[0] != ' ') return 0;
      piece.remove_prefix(1);
      space_left = false;
    }
    if (piece.size() > rest.size() || rest.substr(0, piece.size()) != piece) return 0;
    rest.remove_prefix(piece.size());
  }
  return !space_left && rest.empty() && at < ids.size() && ids[at] == next ? at : 0;
}

}  // namespace

Tokenizer::EncodingMatch Tokenizer::match_encoding(std::span<const int32_t> ids,
                                                   std::string_view text,
                                                   bool parse_special) const {
  const State& s = *state_;
  const std::vector<Fragment> frags =
      split_on_special_tokens(text, parse_special ? s.specials_all : s.specials_plain);
  BpeEncoder::Session session;
  std::vector<int32_t> tokens;
  size_t at = 0;
  bool after_special = true;  // as encode()
  for (size_t i = 0; i < frags.size(); ++i) {
    const Fragment& f = frags[i];
    if (f.token != kNoToken) {
      if (at == ids.size() || ids[at] != f.token) return {at, false};
      ++at, after_special = true;
      continue;
    }
    const std::string_view bytes = text.substr(f.begin, f.end - f.begin);
    const bool space = s.vocab.add_space_prefix && after_special;
    after_special = false;
    // Text fragments lie between special tokens (or the ends), never side
    // by side: the next fragment, if any, is one.
    if (i + 1 < frags.size())
      if (const size_t end = spelled_until(ids, at, s.pieces, bytes, space, frags[i + 1].token)) {
        at = end;
        continue;
      }
    tokens.clear();
    s.encode_fragment(bytes, space, tokens, &session);
    size_t j = 0;
    while (j < tokens.size() && at + j < ids.size() && ids[at + j] == tokens[j]) ++j;
    if (j < tokens.size()) return {at + j, false};
    at += j;
  }
  return {at, true};
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const State& s = *state_;
  std::string out;
  bool strip_space = s.vocab.add_space_prefix;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& piece = token_to_piece(ids[i], render_special);
    if (i == 0 && ids[0] == s.vocab.bos) {
      out += piece;  // the text proper starts after a leading BOS
      continue;
    }
    // Only the first text token loses its prefix space (SentencePiece's and
    // llama2.c's rule; llama.cpp keeps it when a BOS was removed).
    const size_t skip = strip_space && !piece.empty() && piece[0] == ' ' ? 1 : 0;
    strip_space = false;
    out.append(piece, skip);
  }
  return out;
}

const std::string& Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  static const std::string kEmpty;
  const State& s = *state_;
  if (id < 0 || id >= s.vocab.n_tokens()) {
    fail("tokenizer: token id ", id, " is out of range (vocabulary has ", s.vocab.n_tokens(),
         " tokens)");
  }
  if (!render_special && (s.attrs[size_t(id)] & (kAttrControl | kAttrUnknown))) return kEmpty;
  return s.pieces[size_t(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  const State& s = *state_;
  if (id < 0 || id >= s.vocab.n_tokens()) {
    fail("tokenizer: token id ", id, " is out of range (vocabulary has ", s.vocab.n_tokens(),
         " tokens)");
  }
  return s.vocab.tokens[size_t(id)];
}

int32_t Tokenizer::find_token(std::string_view text) const {
  return state_->token_to_id.find(text);
}
int32_t Tokenizer::n_vocab() const {
  return state_->vocab.n_tokens();
}
VocabType Tokenizer::type() const {
  return state_->vocab.type;
}
const std::string& Tokenizer::pre_tokenizer() const {
  return state_->pre_name;
}
int32_t Tokenizer::bos() const {
  return state_->vocab.bos;
}
int32_t Tokenizer::eos() const {
  return state_->vocab.eos;
}
int32_t Tokenizer::eot() const {
  return state_->vocab.eot;
}
int32_t Tokenizer::eom() const {
  return state_->vocab.eom;
}
int32_t Tokenizer::unk() const {
  return state_->vocab.unk;
}
int32_t Tokenizer::pad() const {
  return state_->vocab.pad;
}
bool Tokenizer::add_bos() const {
  return state_->vocab.add_bos;
}
bool Tokenizer::add_eos() const {
  return state_->vocab.add_eos;
}
bool Tokenizer::add_space_prefix() const {
  return state_->vocab.add_space_prefix;
}
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && state_->is_eog[size_t(id)];
}
const std::vector<int32_t>& Tokenizer::eog_ids() const {
  return state_->eog;
}
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && (state_->attrs[size_t(id)] & (kAttrControl | kAttrUnknown));
}
uint64_t Tokenizer::memory_bytes() const {
  const State& s = *state_;
  size_t n = sizeof(State) + heap_bytes(s.vocab.tokens) + heap_bytes(s.vocab.scores) +
             heap_bytes(s.vocab.types) + heap_bytes(s.vocab.merges) + heap_bytes(s.vocab.pre) +
             heap_bytes(s.vocab.model_name) + heap_bytes(s.vocab.chat_template) +
             heap_bytes(s.attrs) + s.token_to_id.heap_bytes() + heap_bytes(s.pieces) +
             heap_bytes(s.eog) + heap_bytes(s.is_eog) + heap_bytes(s.pre_name);
  for (const auto* specials : {&s.specials_all, &s.specials_plain}) {
    n += heap_bytes(*specials);
    for (const SpecialToken& t : *specials) n += heap_bytes(t.text);
  }
  if (s.pre) n += s.pre->bytes();
  if (s.merges) n += s.merges->heap_bytes();
  return n;
}

const std::string& Tokenizer::chat_template() const {
  return state_->vocab.chat_template;
}

}  // namespace tkv::tok
