# -DTURBOKV_FUZZ=ON (scripts/fuzz.sh): every turbokv library is instrumented
# for libFuzzer's coverage feedback plus ASan/UBSan; the fuzz targets in
# tests/fuzz link -fsanitize=fuzzer. Needs clang (Debian's clang and
# libclang-rt-14-dev). Only the baseline Highway target is compiled: the
# fuzzers test parsers, and one target builds in a fraction of the time.
# Line tables are all a crash's stack trace needs (full -g costs ~15% more
# compile time on the kernel files).
option(TURBOKV_FUZZ "Build the libFuzzer targets (clang)" OFF)
if(TURBOKV_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TURBOKV_FUZZ needs clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
  endif()
  target_compile_options(tkv_build_flags INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer -gline-tables-only -O1)
  target_link_options(tkv_build_flags INTERFACE -fsanitize=address,undefined)
  target_compile_definitions(tkv_build_flags INTERFACE HWY_COMPILE_ONLY_STATIC=1 TURBOKV_FUZZING=1)
endif()
