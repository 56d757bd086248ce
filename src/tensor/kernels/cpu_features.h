// CPU features the kernels use beyond what Highway 1.0.3's targets imply (it
// has no AVX-VNNI, AVX512-VNNI-without-VBMI, AVX512-BF16 or NEON dotprod
// targets): detected once with cpuid / getauxval, and a switch that lets
// tests run the integer kernels' fallback paths on CPUs that have VNNI.
#pragma once

namespace tkv::kernels {

// vpdpbusd / vpdpwssd: AVX-VNNI (VEX, Alder Lake, Sapphire Rapids, Zen 5)
// and AVX512-VNNI (EVEX, Cascade Lake, Ice Lake, Zen 4). False off x86.
bool cpu_has_avx_vnni();
bool cpu_has_avx512_vnni();
// vdpbf16ps (AVX512-BF16: Cooper Lake, Sapphire Rapids, Zen 4), which the
// BF16 weights' GEMM of gemm_bf16.h uses. False off x86.
bool cpu_has_avx512_bf16();
// Whether that GEMM should replace the f32 FMA GEMM for BF16 prefill where
// the CPU has AVX512-BF16. By default only on AMD: Intel's cores issue
// vdpbf16ps at half the f32 FMA's multiply-add rate (on this project's
// Sapphire Rapids VM: one per 2 cycles against two FMAs per cycle, so the
// bf16 GEMM ran at ~0.7x), Zen 4 and Zen 5 at twice it (AMD's figures, not
// measured here). TURBOKV_BF16_DOT=1 or 0 overrides the default for the
// process; set_bf16_dot_preferred (tests, benchmarks) after that.
bool bf16_dot_preferred();
void set_bf16_dot_preferred(bool preferred);
// AMX-TILE + AMX-BF16 (tdpbf16ps: Sapphire Rapids and later Xeons) with
// AVX512-BF16, and the OS's permission to use the tile state, which the
// first call requests (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+) for the
// whole process. The F16 and BF16 weights' prefill GEMM of gemm_amx.h uses
// it. False off x86-64 Linux.
bool cpu_has_amx_bf16();
// Whether that GEMM replaces the f32 FMA GEMM for F16 and BF16 prefill where
// cpu_has_amx_bf16() (default true). TURBOKV_AMX=0 (or 1) sets the default
// for the process; set_amx_preferred (tests, benchmarks) after that.
bool amx_preferred();
void set_amx_preferred(bool preferred);
// Whether a model copied into memory holds its F16 matrices as row blocks
// (tensor/matmul.h: row_blocks_pay_off). By default on AMD CPUs, where both
// one sequence's decode step and a batch's are faster (Zen 5: ~20% and
// ~50%), not elsewhere: on Emerald Rapids eight sequences' step measured
// ~15% faster but one sequence's ~18% slower (docs/WEIGHTS.md).
// TURBOKV_ROW_BLOCKS=1 or 0 sets the default for the process;
// set_row_blocks_preferred (tests) after that. Only matrices loaded later
// follow a change.
bool row_blocks_preferred();
void set_row_blocks_preferred(bool preferred);
// Row blocks for a process that decodes batches (serve with --parallel > 1),
// unless TURBOKV_ROW_BLOCKS says otherwise.
void prefer_row_blocks_for_batches();
// sdot (ARMv8.2 dotprod, HWCAP_ASIMDDP). False off aarch64.
bool cpu_has_arm_dotprod();

// Whether the integer kernels may use the dot-product instructions above
// (default true). Off, they run the vpmaddubsw/vpmaddwd (x86) or plain
// NEON sequences, which give the same int32 sums: tests compare the two.
void set_int_dot_instructions_allowed(bool allowed);
bool int_dot_instructions_allowed();

}  // namespace tkv::kernels
