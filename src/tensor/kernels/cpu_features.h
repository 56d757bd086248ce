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
// vdpbf16ps / vcvtne2ps2bf16 (AVX512-BF16: Cooper Lake, Sapphire Rapids,
// Zen 4), which the BF16 weights' GEMM uses (gemm_bf16.h). False off x86.
bool cpu_has_avx512_bf16();
// sdot (ARMv8.2 dotprod, HWCAP_ASIMDDP). False off aarch64.
bool cpu_has_arm_dotprod();

// Whether the integer kernels may use the dot-product instructions above
// (default true). Off, they run the vpmaddubsw/vpmaddwd (x86) or plain
// NEON sequences, which give the same int32 sums: tests compare the two.
void set_int_dot_instructions_allowed(bool allowed);
bool int_dot_instructions_allowed();

}  // namespace tkv::kernels
