# cmake -DPYTHON=python3 -DSCRIPT=scripts/gguf-set.py -DTURBOKV=turbokv -DDIR=DIR
#       -P gguf_set_test.cmake: a synthesized model copied with a key set,
# one replaced and one removed loads with them (turbokv inspect) and runs;
# removing a key the file lacks, or a bad TYPE:VALUE, is a one-line error
# and no file.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc ${rc} PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()
run(synth ${TURBOKV} synth --like tiny --out ${DIR}/in.gguf)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "synth failed: ${err}")
endif()
run(set ${PYTHON} ${SCRIPT} ${DIR}/in.gguf ${DIR}/out.gguf llama.attention.sliding_window=int:128
    general.name=str:edited -general.architecture_missing_ok)
if(rc EQUAL 0 OR NOT err MATCHES "has no key general.architecture_missing_ok")
  message(FATAL_ERROR "removing a missing key: exit ${rc}, '${err}'")
endif()
run(set ${PYTHON} ${SCRIPT} ${DIR}/in.gguf ${DIR}/out.gguf llama.attention.sliding_window=int:128
    general.name=str:edited -turbokv.synth.seed)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gguf-set failed: ${err}")
endif()
run(inspect ${TURBOKV} inspect ${DIR}/out.gguf)
if(NOT rc EQUAL 0 OR NOT out MATCHES "llama.attention.sliding_window +int32 +128"
   OR NOT out MATCHES "general.name +string +\"edited\"" OR NOT out MATCHES "swa 128"
   OR out MATCHES "turbokv.synth.seed")
  message(FATAL_ERROR "inspect of the copy: exit ${rc}, '${out}' '${err}'")
endif()
run(generate ${TURBOKV} run -m ${DIR}/out.gguf -p "Once" -n 4 --temp 0)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the copy does not run: ${err}")
endif()
run(bad ${PYTHON} ${SCRIPT} ${DIR}/in.gguf ${DIR}/bad.gguf llama.attention.sliding_window=int:eight)
if(rc EQUAL 0 OR NOT err MATCHES "bad int value" OR EXISTS ${DIR}/bad.gguf)
  message(FATAL_ERROR "a bad value: exit ${rc}, '${err}'")
endif()
file(REMOVE_RECURSE ${DIR})
