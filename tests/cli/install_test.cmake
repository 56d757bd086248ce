# cmake -DBUILD=DIR -DPREFIX=DIR -P install_test.cmake: installs the build
# into a fresh PREFIX and runs PREFIX/bin/turbokv --version.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
endif()
if(NOT EXISTS ${PREFIX}/bin/turbokv)
  message(FATAL_ERROR "cmake --install put no turbokv in ${PREFIX}/bin")
endif()
execute_process(COMMAND ${PREFIX}/bin/turbokv --version RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "turbokv")
  message(FATAL_ERROR "${PREFIX}/bin/turbokv --version: exit ${rc}, '${out}'")
endif()
file(REMOVE_RECURSE ${PREFIX})
