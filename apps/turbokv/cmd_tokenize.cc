// `turbokv tokenize`: text -> token ids with the model's own tokenizer.
#include <cstdio>
#include <span>
#include <string>

#include "cli/flags.h"
#include "command_registry.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/escape.h"
#include "gguf/gguf.h"
#include "output.h"
#include "tokenizer/tokenizer.h"

namespace tkv::cli {
namespace {

int tokenize_main(std::span<const std::string> args) {
  std::string model_path, text, file;
  bool ids_only = false, add_bos = false, parse_special = false;
  FlagParser flags("tokenize", "turbokv tokenize -m MODEL (-p TEXT | -f FILE) [flags]",
                   "Prints the token ids of a text: one `id -> 'piece'` per line, or with\n"
                   "--ids the ids alone, space separated. No BOS unless --add-bos.");
  flags.add_string({"-m", "--model"}, "PATH", "GGUF file with a tokenizer (a model or a vocab)",
                   &model_path);
  flags.add_string({"-p", "--prompt"}, "TEXT", "the text to tokenize", &text);
  flags.add_string({"-f", "--file"}, "FILE", "read the text from FILE (- = standard input)", &file);
  flags.add_bool({"--ids"}, "print only the ids, space separated, on one line", &ids_only);
  flags.add_bool({"--add-bos"}, "prepend the vocabulary's BOS token", &add_bos);
  flags.add_bool({"--parse-special"}, "turn special-token text such as <|eot_id|> into its token",
                 &parse_special);
  if (!flags.parse(args)) return 0;

  if (model_path.empty()) fail("tokenize: no model given (use -m MODEL.gguf)");
  const bool have_text = flags.was_set("-p");
  if (have_text == !file.empty()) fail("tokenize: give exactly one of -p TEXT or -f FILE");
  if (!file.empty()) text = read_input_file(file);

  // Only the tokenizer metadata is needed: no weights are bound, so this works
  // on vocabulary-only GGUF files too.
  const gguf::GgufFile gguf = gguf::GgufFile::open(model_path);
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(gguf);
  std::vector<int32_t> ids;
  if (add_bos) {
    if (tokenizer.bos() == tok::kNoToken)
      fail("tokenize: --add-bos: the vocabulary of ", model_path, " has no BOS token");
    ids.push_back(tokenizer.bos());
  }
  for (int32_t id : tokenizer.encode(text, /*add_special=*/false, parse_special)) ids.push_back(id);

  std::string out;
  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += "\n";
  } else {
    for (int32_t id : ids) {
      char num[24];
      std::snprintf(num, sizeof num, "%6d", id);
      out += str(num, " -> '", escape_bytes(tokenizer.token_to_piece(id, /*render_special=*/true)),
                 "'\n");
    }
  }
  write_stdout(out);
  return 0;
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(tokenize, "print the token ids of a text", tkv::cli::tokenize_main);
