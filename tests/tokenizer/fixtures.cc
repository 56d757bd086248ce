#include "fixtures.h"

#include <algorithm>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "common/atomic_file.h"
#include "gguf/gguf.h"

namespace tkv::tok::test {

const Tokenizer* load_fixture_tokenizer(const std::string& relative) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(relative); it != cache.end()) return it->second.get();
  const std::string path = ::tkv::test::model_path(relative);
  if (path.empty()) return nullptr;
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  auto tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  return cache.emplace(relative, std::move(tok)).first->second.get();
}

std::vector<VectorCase> read_vectors(const std::string& inp_path, const std::string& out_path) {
  const std::string inp = read_file(inp_path);
  const std::string out = read_file(out_path);
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    // As llama.cpp's test-tokenizer-0: the last text may lack its separator.
    const size_t sep = std::min(inp.find(kSep, pos), inp.size());
    cases.push_back({inp.substr(pos, sep - pos), {}});
    pos = sep + kSep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= cases.size()) throw std::runtime_error(out_path + ": more lines than texts");
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) cases[i].ids.push_back(id);
    ++i;
  }
  if (i != cases.size()) throw std::runtime_error(out_path + ": fewer lines than texts");
  return cases;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace tkv::tok::test
