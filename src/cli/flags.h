// A small command-line flag parser for the turbokv subcommands and the bench
// protocols (one parser: the shared flag groups in cli/common_flags.h declare
// their flags on it).
//
// Each subcommand declares its flags against variables it owns, then parses:
//
//   FlagParser flags("run", "turbokv run -m MODEL (-p PROMPT | -f FILE) [flags]");
//   flags.add_int({"-n", "--n-predict"}, "N", "tokens to generate", &n_predict, -1);
//   if (!flags.parse(args)) return 0;  // --help was printed
//
// Rules (llama.cpp-compatible where it has a convention):
//   - a flag has one or more names ("-t", "--threads"); single-dash names may
//     be longer than one letter ("-ctk"), and are matched whole (no bundling);
//   - a value follows as the next argument, or after '=' for "--name=value";
//   - numbers are parsed strictly (the whole text, in range) and a bad one is
//     an error naming the flag;
//   - "--" ends the flags; everything after it is positional;
//   - any problem throws tkv::Error with one line that names the flag, which
//     the binary prints and turns into exit code 2.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::cli {

// Strict number parsing (the whole text; error names `what`, e.g. "--threads").
int64_t parse_int(const std::string& what, const std::string& text, int64_t min, int64_t max);
uint64_t parse_uint64(const std::string& what, const std::string& text);
double parse_double(const std::string& what, const std::string& text, double min, double max);

// Splits a comma list ("f16,k4v2"); an empty item is an error naming `flag`.
std::vector<std::string> split_list(std::string_view list, std::string_view flag);

// The name in `names` closest to `given` (at most two edits away), for a
// "did you mean"; empty when none is that close.
std::string closest_name(const std::string& given, std::span<const std::string> names);

class FlagParser {
 public:
  // `command`: the subcommand name used in messages ("run"); `usage`: the
  // synopsis line shown first by --help; `description`: a paragraph under it.
  FlagParser(std::string command, std::string usage, std::string description = {});

  using Names = std::initializer_list<const char*>;

  // Starts a titled group of flags in the help text ("Model", "KV cache").
  void section(std::string title);

  // A switch without a value.
  void add_bool(Names names, std::string help, bool* out);
  void add_string(Names names, std::string metavar, std::string help, std::string* out);
  // Repeatable: each occurrence appends its value.
  void add_strings(Names names, std::string metavar, std::string help,
                   std::vector<std::string>* out);
  void add_int(Names names, std::string metavar, std::string help, int* out,
               int min = std::numeric_limits<int>::min(),
               int max = std::numeric_limits<int>::max());
  void add_uint64(Names names, std::string metavar, std::string help, uint64_t* out);
  void add_float(Names names, std::string metavar, std::string help, float* out,
                 double min = -std::numeric_limits<double>::max(),
                 double max = std::numeric_limits<double>::max());
  // A flag whose value is handled by `apply(flag_name_as_typed, value)`;
  // apply throws tkv::Error for a bad value.
  void add_custom(Names names, std::string metavar, std::string help,
                  std::function<void(const std::string&, const std::string&)> apply);

  // Replaces a declared flag's help text: a command that gives a shared flag
  // a meaning of its own says so (bench batch's --kv-budget).
  void set_help(const std::string& name, std::string help);

  // Positional arguments, in order. Required ones missing are an error;
  // surplus positional arguments are an error.
  void add_positional(std::string metavar, std::string help, std::string* out,
                      bool required = true);

  // Parses `args` (the arguments after the subcommand name). Returns false
  // when --help / -h was given: the help text has been printed to stdout and
  // the caller should exit 0. Throws tkv::Error for any bad argument.
  bool parse(std::span<const std::string> args);

  // True when the flag (any of its names) appeared on the command line.
  bool was_set(const std::string& name) const;

  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Flag {
    std::vector<std::string> names;
    std::string metavar;  // empty: a switch
    std::string help;
    std::function<void(const std::string&, const std::string&)> apply;
    bool seen = false;
  };
  struct Positional {
    std::string metavar, help;
    std::string* out;
    bool required;
  };
  struct HelpEntry {
    bool is_section;
    std::string title;  // sections
    size_t flag = 0;    // flags: index into flags_
  };

  void add(Names names, std::string metavar, std::string help,
           std::function<void(const std::string&, const std::string&)> apply);
  Flag* find(const std::string& name);
  const Flag* find(const std::string& name) const;
  [[noreturn]] void unknown_flag(const std::string& arg) const;

  std::string command_, usage_, description_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
  std::vector<HelpEntry> help_order_;
};

}  // namespace tkv::cli
