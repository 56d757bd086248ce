// The kernels' switches (kernel_config.h): the one place that reads them
// from the environment.
#include "tensor/kernel_config.h"

#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "tensor/kernels/cpu_features.h"

namespace tkv {

namespace {

// The environment variables, each read by from_environment below.
constexpr const char* kSimdVar = "TURBOKV_SIMD";
constexpr const char* kVnniVar = "TURBOKV_VNNI";
constexpr const char* kAmxVar = "TURBOKV_AMX";
constexpr const char* kBf16DotVar = "TURBOKV_BF16_DOT";
constexpr const char* kRowBlocksVar = "TURBOKV_ROW_BLOCKS";
constexpr const char* kVars[] = {kSimdVar, kVnniVar, kAmxVar, kBf16DotVar, kRowBlocksVar};

// The value of `name` when set and not empty, else nullptr.
const char* env_value(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// A 0|1 switch: `fallback` when unset, tkv::Error for anything else.
bool env_bool(const char* name, bool fallback) {
  const char* value = env_value(name);
  if (value == nullptr) return fallback;
  const std::string_view v(value);
  if (v != "0" && v != "1") fail(name, "=", value, ": expected 0 or 1");
  return v == "1";
}

KernelChoice env_choice(const char* name) {
  if (env_value(name) == nullptr) return KernelChoice::kAuto;
  return env_bool(name, false) ? KernelChoice::kOn : KernelChoice::kOff;
}

KernelConfig& config_storage() {
  static KernelConfig config = KernelConfig::from_environment();
  return config;
}

}  // namespace

bool KernelConfig::use_bf16_dot() const {
  if (bf16_dot != KernelChoice::kAuto) return bf16_dot == KernelChoice::kOn;
  return kernels::cpu_is_amd();
}

bool KernelConfig::use_row_blocks() const {
  if (row_blocks != KernelChoice::kAuto) return row_blocks == KernelChoice::kOn;
  return kernels::cpu_is_amd() || decodes_batches;
}

KernelConfig KernelConfig::from_environment() {
  KernelConfig c;
  if (const char* simd = env_value(kSimdVar)) c.simd = simd;
  c.int_dot = env_bool(kVnniVar, c.int_dot);
  c.amx = env_bool(kAmxVar, c.amx);
  c.bf16_dot = env_choice(kBf16DotVar);
  c.row_blocks = env_choice(kRowBlocksVar);
  return c;
}

std::string kernel_env_overrides() {
  std::string env;
  for (const char* name : kVars)
    if (const char* v = env_value(name)) {
      if (!env.empty()) env += ' ';
      env.append(name).append("=").append(v);
    }
  return env;
}

const KernelConfig& kernel_config() {
  return config_storage();
}

void set_kernel_config(const KernelConfig& config) {
  config_storage() = config;
}

void set_kernel_decodes_batches(bool batches) {
  config_storage().decodes_batches = batches;
}

}  // namespace tkv
