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
target_compile_definitions(tkv_build_flags INTERFACE
  HWY_WANT_AVX3_DL=1 "HWY_DISABLED_TARGETS=HWY_SSSE3")

if(TURBOKV_SANITIZE)
  target_compile_options(tkv_build_flags INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(tkv_build_flags INTERFACE -fsanitize=address,undefined)
  target_compile_definitions(tkv_build_flags INTERFACE TURBOKV_SANITIZED=1)
endif()

# Shared fixtures (../shared/models), found through TURBOKV_MODELS at run time;
# this is only the default when the variable is unset.
get_filename_component(TURBOKV_DEFAULT_MODELS_DIR
  ${PROJECT_SOURCE_DIR}/../shared/models ABSOLUTE)
