// A small command-line parser for the bench and perplexity subcommands:
// flags are declared with their aliases and whether they take a value;
// unknown flags, missing values and stray arguments are tkv::Error (the
// caller prints it and exits 2).
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
    bool takes_value = true;
    std::string help;  // "MODEL  the GGUF file"
  };

  Args(std::string command, std::vector<Flag> flags);
  // Throws tkv::Error naming the command and the problem.
  void parse(const std::vector<std::string>& args);

  bool has(const std::string& canonical) const;
  std::optional<std::string> get(const std::string& canonical) const;
  std::string get_or(const std::string& canonical, const std::string& fallback) const;
  int get_int(const std::string& canonical, int fallback, int lo, int hi) const;
  double get_double(const std::string& canonical, double fallback, double lo, double hi) const;

  // "Usage: ..." and one line per flag.
  std::string help(const std::string& synopsis) const;

 private:
  const Flag* find(const std::string& name) const;
  std::string command_;
  std::vector<Flag> flags_;
  std::map<std::string, std::string> values_;
};

}  // namespace tkv::bench
