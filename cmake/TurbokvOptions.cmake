# Compiler flags shared by every turbokv target, carried by the INTERFACE
# library tkv_build_flags (link it, never set global flags).
add_library(tkv_build_flags INTERFACE)
target_include_directories(tkv_build_flags INTERFACE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_options(tkv_build_flags INTERFACE -Wall -Wextra)
if(TURBOKV_WERROR)
  target_compile_options(tkv_build_flags INTERFACE -Werror)
endif()

# Highway: runtime dispatch over SSE4 / AVX2 / AVX-512 / AVX-512 (VBMI, VNNI)
# on x86 and NEON on ARM, all from one source. SSSE3 adds compile time and
# nothing we use.
# SVE: the tensor kernels keep arrays of vectors and assume at most 16 f32
# lanes, neither of which SVE's sizeless vectors (up to 2048 bits) allow, so
# ARM builds compile NEON (and EMU128) only unless TURBOKV_ARM_SVE is ON.
option(TURBOKV_ARM_SVE "Also compile Highway's SVE/SVE2 targets on 64-bit ARM Linux" OFF)
set(TURBOKV_ARM OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(TURBOKV_ARM ON)
endif()
target_compile_definitions(tkv_build_flags INTERFACE HWY_WANT_AVX3_DL=1)
if(TURBOKV_ARM AND NOT TURBOKV_ARM_SVE)
  target_compile_definitions(tkv_build_flags INTERFACE
    "HWY_DISABLED_TARGETS=(HWY_SVE|HWY_SVE2|HWY_SVE_256|HWY_SVE2_128)")
elseif(NOT TURBOKV_SANITIZE)
  target_compile_definitions(tkv_build_flags INTERFACE "HWY_DISABLED_TARGETS=HWY_SSSE3")
endif()

# LLVM's lld where it is installed (scripts/setup.sh installs it): it links
# in half the time of GNU ld, and a test build links ~60 executables.
option(TURBOKV_LLD "Link with lld when the compiler can use it" ON)
if(TURBOKV_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" TURBOKV_HAVE_LLD)
  if(TURBOKV_HAVE_LLD)
    target_link_options(tkv_build_flags INTERFACE -fuse-ld=lld)
  endif()
endif()

# Test code (targets with the property TKV_TEST_CODE, which
# tests/CMakeLists.txt sets on every target it defines) is compiled at -O1 in
# optimized builds: it is assertions, fixtures and scalar references, and the
# engine it calls (the libraries) keeps the build type's level, so the
# kernels and the forward pass are tested as users run them. -O1 compiles
# test files a third faster than -O3, and CI builds the suite three times.
set(_tkv_test_code "$<BOOL:$<TARGET_PROPERTY:TKV_TEST_CODE>>")
if(NOT TURBOKV_SANITIZE)
  target_compile_options(tkv_build_flags INTERFACE
    $<$<AND:${_tkv_test_code},$<NOT:$<CONFIG:Debug>>>:-O1>)
endif()

if(TURBOKV_SANITIZE)
  target_compile_options(tkv_build_flags INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(tkv_build_flags INTERFACE -fsanitize=address,undefined)
  target_compile_definitions(tkv_build_flags INTERFACE TURBOKV_SANITIZED=1)
  # The sanitized build is for finding memory and UB errors, not for speed,
  # and compiling every Highway target of the kernels under ASan at -O2 costs
  # more CI time than the rest of the project together: -O1 with line tables,
  # and the targets EMU128 (portable), AVX2 and AVX-512. The Release build
  # compiles all of them and its test run forces each in turn.
  # Test code (TKV_TEST_CODE, above) drops to -O0 here: it is assertions and
  # references around the engine's calls, and -O0 halves its sanitized
  # compile time.
  target_compile_options(tkv_build_flags INTERFACE $<IF:${_tkv_test_code},-O0,-O1> -g1)
  # GCC 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::regex,
  # std::function) once ASan instruments it; the Release build keeps it.
  target_compile_options(tkv_build_flags INTERFACE -Wno-maybe-uninitialized)
  # GCC's register allocator over its default regions spends over half the
  # sanitized compile of the largest kernel files (the instrumented,
  # force-inlined Highway bodies): one region for the whole function makes
  # tq_kernels.cc compile in 83 s instead of 179 s, matvec_float_batch.cc
  # in 16 s instead of 48 s, at the cost of some spills this build does
  # not care about.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(tkv_build_flags INTERFACE -fira-region=one)
  endif()
  if(NOT TURBOKV_ARM)
    target_compile_definitions(tkv_build_flags INTERFACE
      "HWY_DISABLED_TARGETS=(HWY_SSSE3|HWY_SSE4|HWY_AVX3_DL)")
  endif()
endif()

# Shared fixtures (../shared/models, ../shared/templates), found through
# TURBOKV_MODELS and TURBOKV_SHARED at run time; these are only the defaults
# when the variables are unset.
get_filename_component(TURBOKV_DEFAULT_MODELS_DIR
  ${PROJECT_SOURCE_DIR}/../shared/models ABSOLUTE)
get_filename_component(TURBOKV_DEFAULT_SHARED_DIR
  ${PROJECT_SOURCE_DIR}/../shared ABSOLUTE)
