// The switches of the weight kernels and of the weights' memory layout, in
// one place: read once from the environment (the TURBOKV_* variables below;
// docs/ENVIRONMENT.md lists them with the scripts' variables), each with one
// default, decided here. The kernels read kernel_config(); tests and
// benchmarks replace it with set_kernel_config.
//
// Every switch changes speed only, never what the program computes beyond
// the rounding of the kernel chosen: the defaults are the fastest choice on
// the CPUs where the kernels were measured (docs/WEIGHTS.md), the switches
// let one machine run (and compare) the other kernels.
#pragma once

#include <cstdint>
#include <string>

namespace tkv {

// A switch whose default depends on the CPU (kAuto) unless it is set.
enum class KernelChoice : uint8_t { kAuto, kOff, kOn };

struct KernelConfig {
  // TURBOKV_SIMD=<target>: restricts the kernels' run-time dispatch to one
  // Highway target (case-insensitive: avx3_dl, avx3, avx2, sse4, emu128, ...),
  // applied once before the first product; a target that is not compiled in
  // or not supported by the CPU is an error naming the ones that are.
  // Default "" (every target): the dispatch picks the best one the CPU has.
  std::string simd;
  // TURBOKV_VNNI=0|1: whether the integer kernels may use the dot-product
  // instructions (AVX-VNNI, AVX512-VNNI, Arm dotprod). Default 1: the same
  // int32 sums in fewer instructions. 0 runs the vpmaddubsw/vpmaddwd (x86)
  // or plain NEON sequences, so that with TURBOKV_SIMD=avx2 this runs what
  // an AVX2 CPU without AVX-VNNI runs.
  bool int_dot = true;
  // TURBOKV_AMX=0|1: whether F16 and BF16 prefill takes the AMX tile GEMM
  // (gemm_amx.h) where the CPU and OS allow AMX-BF16. Default 1: it is the
  // fastest prefill of those weights there (docs/MODEL.md); 0 keeps the f32
  // FMA GEMM.
  bool amx = true;
  // TURBOKV_BF16_DOT=0|1: whether BF16 prefill takes the vdpbf16ps GEMM
  // (gemm_bf16.h) instead of the f32 FMA GEMM where the CPU has AVX512-BF16
  // (AMX, where active, takes precedence). Default (kAuto): on AMD CPUs only.
  // Intel's cores issue vdpbf16ps at half the f32 FMA's multiply-add rate,
  // so the f32 GEMM is faster there; AMD's cores with AVX512-BF16 issue it
  // at twice that rate (AMD's documentation).
  KernelChoice bf16_dot = KernelChoice::kAuto;
  // TURBOKV_ROW_BLOCKS=0|1: whether a model copied into memory holds its F16
  // matrices as row blocks (tensor/matmul.h: row_blocks_pay_off). Default
  // (kAuto): on AMD CPUs, where one sequence's decode step and a batch's are
  // both faster, and in a process that decodes batches (decodes_batches),
  // where eight sequences' step is faster on every CPU measured; rows
  // elsewhere, where one sequence's step is slower with blocks
  // (docs/WEIGHTS.md). Only matrices loaded after a change follow it.
  KernelChoice row_blocks = KernelChoice::kAuto;
  // Not an environment variable: the program says it decodes several
  // sequences per step (serve with --parallel > 1) with
  // set_kernel_decodes_batches, before it loads the model.
  bool decodes_batches = false;

  // The switches resolved: kAuto decided as documented above.
  bool use_bf16_dot() const;
  bool use_row_blocks() const;

  // The defaults above with the environment's TURBOKV_* values over them.
  // tkv::Error "TURBOKV_X=v: expected 0 or 1" for a switch set to anything
  // else (an empty value counts as unset).
  static KernelConfig from_environment();
};

// The process's configuration: KernelConfig::from_environment() at the
// first call (which throws, and the next call retries, for a bad value).
const KernelConfig& kernel_config();
// Replaces it (tests and benchmarks), while no product runs; `simd` has no
// effect after the first product (tests force a target with
// hwy::SetSupportedTargetsForTest).
void set_kernel_config(const KernelConfig& config);
// The program decodes batches (see decodes_batches).
void set_kernel_decodes_batches(bool batches);

// The TURBOKV_* kernel variables set in the environment, as "NAME=value"
// separated by spaces ("" when none is): for reports, which say which
// kernels their figures are of.
std::string kernel_env_overrides();

}  // namespace tkv
