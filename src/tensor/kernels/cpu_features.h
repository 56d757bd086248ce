// CPU features the kernels use beyond what Highway 1.0.3's targets imply (it
// has no AVX-VNNI, AVX512-VNNI-without-VBMI, AVX512-BF16 or NEON dotprod
// targets), detected once with cpuid / getauxval. Whether the kernels use
// them is tensor/kernel_config.h's.
#pragma once

namespace tkv::kernels {

// vpdpbusd / vpdpwssd: AVX-VNNI (the VEX encoding) and AVX512-VNNI (EVEX),
// from cpuid. False off x86.
bool cpu_has_avx_vnni();
bool cpu_has_avx512_vnni();
// vdpbf16ps (AVX512-BF16, from cpuid), which the
// BF16 weights' GEMM of gemm_bf16.h uses. False off x86.
bool cpu_has_avx512_bf16();
// An AMD CPU (cpuid vendor "AuthenticAMD"): the kernel switches' defaults
// differ there (kernel_config.h). False off x86.
bool cpu_is_amd();
// AMX-TILE + AMX-BF16 (tdpbf16ps: Sapphire Rapids and later Xeons) with
// AVX512-BF16, and the OS's permission to use the tile state, which the
// first call requests (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+) for the
// whole process. The F16 and BF16 weights' prefill GEMM of gemm_amx.h uses
// it. False off x86-64 Linux.
bool cpu_has_amx_bf16();
// sdot (ARMv8.2 dotprod, HWCAP_ASIMDDP). False off aarch64.
bool cpu_has_arm_dotprod();

}  // namespace tkv::kernels
