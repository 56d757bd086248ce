# cmake -DSOURCE_DIR=... -P docs_are_references.cmake
#
# The docs are references and the comments say why: neither tells which
# benchmark sitting on which CPU measured what. Fails, naming file and line,
# when README.md, docs/ (but docs/results/, where measurements live with
# their provenance) or src/ contain what
#   grep -riE "sitting|tried on|emerald|zen [0-9]" src docs README.md
# finds.
set(pattern "sitting|tried on|emerald|zen [0-9]")
file(GLOB_RECURSE files LIST_DIRECTORIES false
  ${SOURCE_DIR}/src/* ${SOURCE_DIR}/docs/*)
list(APPEND files ${SOURCE_DIR}/README.md)
set(found 0)
foreach(f IN LISTS files)
  file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
  if(rel MATCHES "^docs/results/")
    continue()
  endif()
  file(READ ${f} text)
  string(TOLOWER "${text}" lower)
  if(NOT lower MATCHES "${pattern}")
    continue()
  endif()
  # Only files with a hit are split into lines, for the line numbers: ';'
  # and brackets (which a CMake list would take for its own) masked first.
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<lbracket>" text "${text}")
  string(REPLACE "]" "<rbracket>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    string(TOLOWER "${line}" l)
    if(l MATCHES "${pattern}")
      string(REPLACE "<semicolon>" ";" line "${line}")
      string(REPLACE "<lbracket>" "[" line "${line}")
      string(REPLACE "<rbracket>" "]" line "${line}")
      message("${rel}:${n}: ${line}")
      math(EXPR found "${found} + 1")
    endif()
  endforeach()
endforeach()
if(found GREATER 0)
  message(FATAL_ERROR "${found} line(s) above tell how a figure was measured or what was tried "
    "on which CPU: say why the code or design is so, and move measurements to docs/results/")
endif()
message("docs and comments are references: no sittings, no CPU stories")
