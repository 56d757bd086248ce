#include "cli/flags.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/error.h"

namespace tkv::cli {

namespace {

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool looks_like_flag(const std::string& arg) {
  // "-" alone is a conventional stand-in for stdin; "-5" may be a negative
  // number given as a positional argument.
  if (arg.size() < 2 || arg[0] != '-') return false;
  const char c = arg[1];
  return !(c >= '0' && c <= '9') && c != '.';
}

// Flags of llama.cpp's tools that turbokv does not have, so that a command
// line copied from llama.cpp gets a straight answer instead of a suggestion.
struct UnsupportedFlag {
  const char* name;
  const char* why;  // "" or a hint
};
constexpr UnsupportedFlag kLlamaCppFlags[] = {
    {"-b", "; -ub sets the prefill chunk size"},
    {"--batch-size", "; -ub sets the prefill chunk size"},
    {"-ngl", "; it runs on the CPU"},
    {"--gpu-layers", "; it runs on the CPU"},
    {"--n-gpu-layers", "; it runs on the CPU"},
    {"-mg", "; it runs on the CPU"},
    {"--main-gpu", "; it runs on the CPU"},
    {"-ts", "; it runs on the CPU"},
    {"--tensor-split", "; it runs on the CPU"},
    {"-sm", "; it runs on the CPU"},
    {"--split-mode", "; it runs on the CPU"},
    {"-nkvo", "; the KV cache is always in memory"},
    {"--no-kv-offload", "; the KV cache is always in memory"},
    {"-e", "; text is taken as given, without escape processing"},
    {"--escape", "; text is taken as given, without escape processing"},
    {"--no-escape", "; text is taken as given, without escape processing"},
    {"--mlock", ""},
    {"--numa", ""},
    {"-fa", ""},
    {"--flash-attn", ""},
    {"-np", ""},
    {"--parallel", ""},
    {"-cb", ""},
    {"--cont-batching", ""},
    {"-i", "; use turbokv chat"},
    {"--interactive", "; use turbokv chat"},
    {"-cnv", "; use turbokv chat"},
    {"--conversation", "; use turbokv chat"},
    {"-if", "; use turbokv chat"},
    {"--interactive-first", "; use turbokv chat"},
    {"--color", ""},
    {"--keep", ""},
    {"--in-prefix", ""},
    {"--in-suffix", ""},
    {"--grammar", ""},
    {"--grammar-file", ""},
    {"-j", ""},
    {"--json-schema", ""},
    {"--lora", ""},
    {"--mmproj", ""},
    {"--rope-freq-base", "; the model's own RoPE settings are used"},
    {"--rope-freq-scale", "; the model's own RoPE settings are used"},
    {"--rope-scaling", "; the model's own RoPE settings are used"},
    {"--ctx-shift", "; --kv-window N keeps the newest tokens"},
    {"-tb", "; -t sets the threads of every phase"},
    {"--threads-batch", "; -t sets the threads of every phase"},
};

}  // namespace

int64_t parse_int(const std::string& what, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;  // from_chars rejects a leading '+'
  const auto r = std::from_chars(b, e, v);
  if (text.empty() || r.ec == std::errc::invalid_argument || r.ptr != e)
    fail(what, ": '", text, "' is not an integer");
  if (r.ec == std::errc::result_out_of_range || v < min || v > max) {
    if (max == std::numeric_limits<int64_t>::max() || max == std::numeric_limits<int>::max())
      fail(what, ": ", text, " is out of range (must be >= ", min, ")");
    fail(what, ": ", text, " is out of range (must be in [", min, ", ", max, "])");
  }
  return v;
}

uint64_t parse_uint64(const std::string& what, const std::string& text) {
  uint64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  // "0x74626b76": defaults such as --kv-seed's are shown in hex.
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (hex) b += 2;
  const auto r = std::from_chars(b, e, v, hex ? 16 : 10);
  if (text.empty() || r.ec == std::errc::invalid_argument || r.ptr != e)
    fail(what, ": '", text, "' is not a non-negative integer");
  if (r.ec == std::errc::result_out_of_range) fail(what, ": ", text, " does not fit in 64 bits");
  return v;
}

double parse_double(const std::string& what, const std::string& text, double min, double max) {
  errno = 0;
  char* end = nullptr;
  const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(uint8_t(text[0])))
    fail(what, ": '", text, "' is not a number");
  if (!std::isfinite(v) || errno == ERANGE) fail(what, ": ", text, " is not a finite number");
  if (v < min || v > max) {
    if (max == std::numeric_limits<double>::max())
      fail(what, ": ", text, " is out of range (must be >= ", min, ")");
    fail(what, ": ", text, " is out of range (must be in [", min, ", ", max, "])");
  }
  return v;
}

std::vector<std::string> split_list(std::string_view list, std::string_view flag) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string_view item =
        list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
    if (item.empty()) fail(flag, ": empty item in '", list, "'");
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

FlagParser::FlagParser(std::string command, std::string usage, std::string description)
    : command_(std::move(command)),
      usage_(std::move(usage)),
      description_(std::move(description)) {}

void FlagParser::section(std::string title) {
  help_order_.push_back({true, std::move(title)});
}

void FlagParser::add(Names names, std::string metavar, std::string help,
                     std::function<void(const std::string&, const std::string&)> apply) {
  Flag f;
  for (const char* n : names) {
    TKV_CHECK(n && n[0] == '-');
    TKV_CHECK(find(n) == nullptr);  // a name is declared once
    f.names.emplace_back(n);
  }
  TKV_CHECK(!f.names.empty());
  f.metavar = std::move(metavar);
  f.help = std::move(help);
  f.apply = std::move(apply);
  flags_.push_back(std::move(f));
  help_order_.push_back({false, {}, flags_.size() - 1});
}

void FlagParser::add_bool(Names names, std::string help, bool* out) {
  add(names, {}, std::move(help), [out](const std::string&, const std::string&) { *out = true; });
}

void FlagParser::add_string(Names names, std::string metavar, std::string help, std::string* out) {
  add(names, std::move(metavar), std::move(help),
      [out](const std::string&, const std::string& v) { *out = v; });
}

void FlagParser::add_strings(Names names, std::string metavar, std::string help,
                             std::vector<std::string>* out) {
  add(names, std::move(metavar), std::move(help),
      [out](const std::string&, const std::string& v) { out->push_back(v); });
}

void FlagParser::add_int(Names names, std::string metavar, std::string help, int* out, int min,
                         int max) {
  add(names, std::move(metavar), std::move(help),
      [out, min, max](const std::string& flag, const std::string& v) {
        *out = static_cast<int>(parse_int(flag, v, min, max));
      });
}

void FlagParser::add_uint64(Names names, std::string metavar, std::string help, uint64_t* out) {
  add(names, std::move(metavar), std::move(help),
      [out](const std::string& flag, const std::string& v) { *out = parse_uint64(flag, v); });
}

void FlagParser::add_float(Names names, std::string metavar, std::string help, float* out,
                           double min, double max) {
  add(names, std::move(metavar), std::move(help),
      [out, min, max](const std::string& flag, const std::string& v) {
        *out = static_cast<float>(parse_double(flag, v, min, max));
      });
}

void FlagParser::add_custom(Names names, std::string metavar, std::string help,
                            std::function<void(const std::string&, const std::string&)> apply) {
  add(names, std::move(metavar), std::move(help), std::move(apply));
}

void FlagParser::set_help(const std::string& name, std::string help) {
  Flag* f = find(name);
  TKV_CHECK(f != nullptr);
  f->help = std::move(help);
}

void FlagParser::add_positional(std::string metavar, std::string help, std::string* out,
                                bool required) {
  positionals_.push_back({std::move(metavar), std::move(help), out, required});
}

FlagParser::Flag* FlagParser::find(const std::string& name) {
  for (auto& f : flags_)
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
  return nullptr;
}

const FlagParser::Flag* FlagParser::find(const std::string& name) const {
  return const_cast<FlagParser*>(this)->find(name);
}

bool FlagParser::was_set(const std::string& name) const {
  const Flag* f = find(name);
  return f && f->seen;
}

void FlagParser::unknown_flag(const std::string& arg) const {
  for (const auto& u : kLlamaCppFlags)
    if (arg == u.name)
      fail(command_, ": ", arg, " is not supported by turbokv", u.why, " (see turbokv ", command_,
           " --help)");
  std::vector<std::string> names;
  for (const auto& f : flags_) names.insert(names.end(), f.names.begin(), f.names.end());
  const std::string best = closest_name(arg, names);
  if (!best.empty())
    fail(command_, ": unknown flag '", arg, "' (did you mean ", best, "? see turbokv ", command_,
         " --help)");
  fail(command_, ": unknown flag '", arg, "' (see turbokv ", command_, " --help)");
}

std::string closest_name(const std::string& given, std::span<const std::string> names) {
  std::string best;
  size_t best_d = 3;  // suggest only close matches
  for (const std::string& n : names) {
    const size_t d = edit_distance(given, n);
    if (d < best_d) best_d = d, best = n;
  }
  return best;
}

bool FlagParser::parse(std::span<const std::string> args) {
  std::vector<std::string> positional;
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positional || !looks_like_flag(arg)) {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      if (const size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    }
    Flag* f = find(name);
    if (!f) unknown_flag(name);
    f->seen = true;
    if (f->metavar.empty()) {
      if (inline_value) fail(command_, ": flag ", name, " takes no value");
      f->apply(name, {});
      continue;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else {
      // "-m -n 5": the value is missing; taking "-n" as the model path would
      // only give a confusing error later.
      if (i + 1 >= args.size() || (looks_like_flag(args[i + 1]) && find(args[i + 1])))
        fail(command_, ": flag ", name, " needs a value (", f->metavar, ")");
      value = args[++i];
    }
    f->apply(name, value);
  }
  size_t p = 0;
  for (; p < positional.size(); ++p) {
    if (p >= positionals_.size()) {
      if (looks_like_flag(positional[p]))
        fail(command_, ": unexpected argument '", positional[p], "'");
      fail(command_, ": unexpected argument '", positional[p], "' (see turbokv ", command_,
           " --help)");
    }
    *positionals_[p].out = positional[p];
  }
  for (; p < positionals_.size(); ++p)
    if (positionals_[p].required)
      fail(command_, ": missing ", positionals_[p].metavar, " (see turbokv ", command_, " --help)");
  return true;
}

std::string FlagParser::help() const {
  std::string out = "usage: " + usage_ + "\n";
  if (!description_.empty()) out += "\n" + description_ + "\n";
  auto wrap_line = [&](const std::string& left, const std::string& text) {
    constexpr size_t kColumn = 30;
    std::string line = "  " + left;
    if (line.size() + 2 > kColumn) {
      out += line + "\n";
      line.clear();
    }
    line.resize(kColumn, ' ');
    // Help text may contain explicit newlines; indent continuation lines.
    size_t start = 0;
    while (true) {
      const size_t nl = text.find('\n', start);
      out += line + text.substr(start, nl == std::string::npos ? nl : nl - start) + "\n";
      if (nl == std::string::npos) break;
      start = nl + 1;
      line.assign(kColumn, ' ');
    }
  };
  if (!positionals_.empty()) {
    out += "\narguments:\n";
    for (const auto& p : positionals_) wrap_line(p.metavar, p.help);
  }
  bool in_section = false;
  for (const auto& e : help_order_) {
    if (e.is_section) {
      out += "\n" + e.title + ":\n";
      in_section = true;
      continue;
    }
    if (!in_section) {
      out += "\nflags:\n";
      in_section = true;
    }
    const Flag& f = flags_[e.flag];
    std::string left;
    for (size_t i = 0; i < f.names.size(); ++i) {
      if (i) left += ", ";
      left += f.names[i];
    }
    if (!f.metavar.empty()) left += " " + f.metavar;
    wrap_line(left, f.help);
  }
  out += "\n";
  wrap_line("-h, --help", "show this help");
  return out;
}

}  // namespace tkv::cli
