#include "bench/args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/error.h"

namespace tkv::bench {

Args::Args(std::string command, std::vector<Flag> flags)
    : command_(std::move(command)), flags_(std::move(flags)) {}

const Args::Flag* Args::find(const std::string& name) const {
  for (const auto& f : flags_)
    for (const auto& n : f.names)
      if (n == name) return &f;
  return nullptr;
}

bool Args::parse(const std::vector<std::string>& args) {
  const std::string see = " (see turbokv " + command_ + " --help)";
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    if (name == "-h" || name == "--help") return false;
    bool inline_value = false;
    if (name.rfind("--", 0) == 0 && name.find('=') != std::string::npos) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
      inline_value = true;
    }
    const Flag* f = find(name);
    if (!f) {
      if (name.empty() || name[0] != '-') fail(command_, ": unexpected argument '", name, "'", see);
      fail(command_, ": unknown flag '", name, "'", see);
    }
    if (!f->metavar.empty()) {
      if (!inline_value) {
        // "-m -q": the value is missing; taking "-q" as the model path would
        // only give a confusing error later.
        if (i + 1 >= args.size() || find(args[i + 1]))
          fail(command_, ": flag ", name, " needs a value (", f->metavar, ")");
        value = args[++i];
      }
    } else if (inline_value) {
      fail(command_, ": flag ", name, " takes no value");
    }
    values_[f->names[0]] = value;
  }
  return true;
}

bool Args::has(const std::string& canonical) const {
  return values_.count(canonical) > 0;
}

std::optional<std::string> Args::get(const std::string& canonical) const {
  const auto it = values_.find(canonical);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& canonical, const std::string& fallback) const {
  return get(canonical).value_or(fallback);
}

int Args::get_int(const std::string& canonical, int fallback, int lo, int hi) const {
  const auto v = get(canonical);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
    fail(command_, ": ", canonical, " ", *v, ": expected an integer in [", lo, ", ", hi, "]");
  return int(n);
}

double Args::get_double(const std::string& canonical, double fallback, double lo, double hi) const {
  const auto v = get(canonical);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno != 0 || !std::isfinite(d) || d < lo || d > hi)
    fail(command_, ": ", canonical, " ", *v, ": expected a number in [", lo, ", ", hi, "]");
  return d;
}

std::string Args::help(const std::string& synopsis, const std::string& description) const {
  std::string out = "usage: " + synopsis + "\n";
  if (!description.empty()) out += "\n" + description + "\n";
  // Names at column 2, help at column 30; a long name gets a line of its own.
  auto line = [&](const std::string& left, const std::string& text) {
    constexpr size_t kColumn = 30;
    std::string l = "  " + left;
    if (l.size() + 2 > kColumn) {
      out += l + "\n";
      l.clear();
    }
    l.resize(kColumn, ' ');
    // Continuation lines of a multi-line help text line up under the first.
    size_t start = 0;
    while (true) {
      const size_t nl = text.find('\n', start);
      out += l + text.substr(start, nl == std::string::npos ? nl : nl - start) + "\n";
      if (nl == std::string::npos) break;
      start = nl + 1;
      l.assign(kColumn, ' ');
    }
  };
  std::string section;
  for (const auto& f : flags_) {
    const std::string title = f.section.empty() ? "flags" : f.section;
    if (title != section) {
      section = title;
      out += "\n" + section + ":\n";
    }
    // Short aliases first, as the other commands list them: "-m, --model PATH".
    std::vector<std::string> names = f.names;
    std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return (a.rfind("--", 0) != 0) > (b.rfind("--", 0) != 0);
    });
    std::string left;
    for (const auto& n : names) left += (left.empty() ? "" : ", ") + n;
    if (!f.metavar.empty()) left += " " + f.metavar;
    line(left, f.help);
  }
  out += "\n";
  line("-h, --help", "show this help");
  return out;
}

}  // namespace tkv::bench
