// A small command-line parser for the bench subcommands: flags are declared
// with their aliases, a metavar when they take a value, and the help section
// they are listed under; unknown flags, missing values and stray arguments
// are tkv::Error (the caller prints it and exits 2). The help text has the
// layout of the other turbokv commands (apps/turbokv/flags.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tkv::bench {

class Args {
 public:
  struct Flag {
    std::vector<std::string> names;  // first is canonical: {"--model", "-m"}
    std::string metavar;             // "MODEL"; empty = the flag takes no value
    std::string help;
    std::string section;  // help heading ("model", "KV cache", ...)
  };

  // `command` is how errors and help name it: "bench memory".
  Args(std::string command, std::vector<Flag> flags);
  // Throws tkv::Error naming the command and the problem. Returns false when
  // -h/--help was given (the caller prints help()).
  bool parse(const std::vector<std::string>& args);

  bool has(const std::string& canonical) const;
  std::optional<std::string> get(const std::string& canonical) const;
  std::string get_or(const std::string& canonical, const std::string& fallback) const;
  int get_int(const std::string& canonical, int fallback, int lo, int hi) const;
  double get_double(const std::string& canonical, double fallback, double lo, double hi) const;

  // "usage: SYNOPSIS", the description, then the flags by section.
  std::string help(const std::string& synopsis, const std::string& description) const;

 private:
  const Flag* find(const std::string& name) const;
  std::string command_;
  std::vector<Flag> flags_;
  std::map<std::string, std::string> values_;
};

}  // namespace tkv::bench
