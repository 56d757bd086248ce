# cmake -P script behind the api_install_and_embed test (see CMakeLists.txt).
# A missing stories260K.gguf skips (the "SKIP:" line, matched by the test's
# SKIP_REGULAR_EXPRESSION: cmake_language(EXIT) needs CMake 3.29, Debian 12
# has 3.25) unless TURBOKV_REQUIRE_FIXTURES=1 (tests/common/test_util.h's
# rule), where it fails.
set(models "$ENV{TURBOKV_MODELS}")
if(models STREQUAL "")
  set(models "${DEFAULT_MODELS_DIR}")
endif()
set(model "${models}/stories260K.gguf")
if(NOT EXISTS "${model}")
  if("$ENV{TURBOKV_REQUIRE_FIXTURES}" STREQUAL "1")
    message(FATAL_ERROR "fixture missing: ${model} (TURBOKV_REQUIRE_FIXTURES=1)")
  endif()
  message("SKIP: fixture missing: ${model}")
  return()
endif()

function(run_checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run_checked(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/turbokv/turbokv.h include/turbokv/turbokv.hpp lib/pkgconfig/turbokv.pc
          lib/cmake/turbokv/turbokvConfig.cmake lib/libturbokv.so lib/libtkv_runtime.a)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

set(prompt "Once upon a time")
set(n 24)
execute_process(COMMAND "${TURBOKV}" run -m "${model}" -p "${prompt}" -n ${n} --temp 0 -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE expected ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR expected STREQUAL "")
  message(FATAL_ERROR "turbokv run failed (${rc}): ${err}")
endif()

function(check_embed exe what)
  execute_process(COMMAND "${exe}" "${model}" "${prompt}" ${n}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: exit ${rc}: ${err}")
  endif()
  if(NOT out STREQUAL expected)
    message(FATAL_ERROR "${what} printed\n[${out}]\nturbokv run printed\n[${expected}]")
  endif()
  message("${what}: same text as turbokv run")
endfunction()

foreach(lang c cpp)
  set(build "${WORK_DIR}/build-${lang}")
  run_checked(${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/${lang}" -B "${build}"
              -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
              -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  run_checked(${CMAKE_COMMAND} --build "${build}")
  check_embed("${build}/embed" "examples/${lang} (find_package)")
endforeach()

# The same C program through pkg-config instead of CMake.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs turbokv RESULT_VARIABLE rc
                OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs turbokv failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
set(exe "${WORK_DIR}/embed-pkgconfig")
run_checked(${C_COMPILER} "${SOURCE_DIR}/examples/c/embed.c" -o "${exe}" ${flags}
            "-Wl,-rpath,${prefix}/lib")
check_embed("${exe}" "examples/c (pkg-config)")
