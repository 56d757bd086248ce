// Run-time CPU feature detection of the kernels (cpu_features.h).
#include "tensor/kernels/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace tkv::kernels {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// Leaf 7 sub-leaf `sub` register values (0 where the leaf does not exist).
struct Leaf7 {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};
Leaf7 cpuid_leaf7(unsigned sub) {
  Leaf7 r;
  if (__get_cpuid_max(0, nullptr) < 7) return r;
  __cpuid_count(7, sub, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}
#endif

}  // namespace

bool cpu_is_amd() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool amd = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
    return ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  }();
  return amd;
#else
  return false;
#endif
}

bool cpu_has_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = (cpuid_leaf7(1).eax >> 4) & 1;  // CPUID.(7,1):EAX[4]
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = (cpuid_leaf7(0).ecx >> 11) & 1;  // CPUID.(7,0):ECX[11]
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = (cpuid_leaf7(1).eax >> 5) & 1;  // CPUID.(7,1):EAX[5]
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool has = [] {
    const Leaf7 l = cpuid_leaf7(0);
    const bool tile = (l.edx >> 24) & 1, bf16 = (l.edx >> 22) & 1;  // CPUID.(7,0):EDX[24], [22]
    if (!tile || !bf16 || !cpu_has_avx512_bf16()) return false;
    // The kernel allocates the tiles' 8 KiB of XSAVE state for the process
    // only on request (XFEATURE_XTILEDATA = 18); a tile instruction without
    // it faults.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_arm_dotprod() {
#if defined(__aarch64__) && defined(__linux__) && defined(HWCAP_ASIMDDP)
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return has;
#elif defined(__aarch64__) && defined(__APPLE__)
  return true;  // every Apple Silicon core has dotprod
#else
  return false;
#endif
}

}  // namespace tkv::kernels
