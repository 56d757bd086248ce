// The libFuzzer entry point every fuzz target in this folder defines. Built
// two ways (tests/fuzz/CMakeLists.txt): with clang's -fsanitize=fuzzer for
// scripts/fuzz.sh, and with replay_main.cc as a plain program that ctest
// runs over the kept corpus, so every input that once crashed stays fixed.
//
// A target feeds the bytes to one parser and must return normally for any
// input: tkv::Error (the project's "bad input" exception) is the expected
// outcome of garbage and is caught; anything else (a crash, a sanitizer
// report, another exception, a hang) is a bug.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
