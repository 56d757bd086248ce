// GGUF reader: arbitrary bytes parsed as a file, then everything a model
// load and `turbokv inspect` read from it: metadata getters, the tensor
// table, the model hyper-parameters and the weight binding.
#include <string>

#include "common/error.h"
#include "fuzz_target.h"
#include "gguf/gguf.h"
#include "gguf/inspect.h"
#include "model/config.h"
#include "model/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tkv::gguf::GgufFile f = tkv::gguf::GgufFile::parse(data, size, "fuzz.gguf");
    (void)tkv::gguf::describe(f);
    for (const auto& [key, value] : f.metadata()) {
      try {
        (void)f.get_string(key);
      } catch (const tkv::Error&) {
      }
      try {
        (void)f.get_ints(key);
      } catch (const tkv::Error&) {
      }
    }
    const auto config = tkv::model::ModelConfig::from_gguf(f);
    (void)tkv::model::ModelWeights::bind(f, config);
  } catch (const tkv::Error&) {
  }
  return 0;
}
