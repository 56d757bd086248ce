# scripts/moe-layer-llama.py refuses what it cannot run, in one line and a
# non-zero exit, before it compiles or times anything (its measurements need
# a llama.cpp build, which tests do not have).
#   cmake -DPYTHON=python3 -DSCRIPT=.../moe-layer-llama.py -DBENCH=<an executable>
#         -DDIR=<scratch dir> -P moe_layer_script_test.cmake

function(expect_refusal what pattern)
  execute_process(COMMAND ${PYTHON} ${SCRIPT} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what}: exit 0, expected a refusal")
  endif()
  string(STRIP "${err}" err)
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: stderr '${err}' does not match '${pattern}'")
  endif()
  string(FIND "${err}" "\n" newline)
  if(NOT newline EQUAL -1)
    message(FATAL_ERROR "${what}: more than one line: '${err}'")
  endif()
endfunction()

file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR}/src ${DIR}/bin)

expect_refusal("a case without rows" "a case is SHAPE/TYPE/ROWS"
  --llama-src ${DIR}/src --llama-bin ${DIR}/bin --bench ${BENCH} --cases qwen3-30b-a3b/q4_K)
expect_refusal("no pairs" "must be positive"
  --llama-src ${DIR}/src --llama-bin ${DIR}/bin --bench ${BENCH} --pairs 0)
expect_refusal("an unbuilt bench" "is not built"
  --llama-src ${DIR}/src --llama-bin ${DIR}/bin --bench ${DIR}/no-such-bench)
expect_refusal("a folder that is not llama.cpp's source" "has no ggml/include/ggml.h"
  --llama-src ${DIR}/src --llama-bin ${DIR}/bin --bench ${BENCH})

file(MAKE_DIRECTORY ${DIR}/src/ggml/include)
file(WRITE ${DIR}/src/ggml/include/ggml.h "")
expect_refusal("a build folder without llama.cpp's libraries" "has no libggml-cpu"
  --llama-src ${DIR}/src --llama-bin ${DIR}/bin --bench ${BENCH})
