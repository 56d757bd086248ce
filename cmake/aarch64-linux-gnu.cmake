# Cross build for 64-bit ARM Linux with Debian's cross compiler and the
# arm64 multiarch dev packages (scripts/test-aarch64.sh installs both):
#   cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# Test binaries run under qemu-user: gtest_discover_tests and ctest go through
# CMAKE_CROSSCOMPILING_EMULATOR. QEMU_CPU picks the emulated CPU (default
# "max": SVE2, SVE, dotprod, ...; "cortex-a72": plain ARMv8.0 NEON).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries and CMake package files come from /usr/lib/aarch64-linux-gnu
# (multiarch); headers are the shared /usr/include. Programs (the compiler,
# pkg-config) are the host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config must read the arm64 .pc files, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")

# The test binaries run on the multiarch arm64 runtime (/lib/ld-linux-aarch64.so.1
# and /usr/lib/aarch64-linux-gnu from libc6:arm64, which the arm64 dev
# packages pull in), so qemu needs no -L. `-L /usr/aarch64-linux-gnu` would
# pair the cross toolchain's ld.so with the multiarch libc.so.6 (ld.so's cache
# lists it), two glibc builds that must not be mixed: Debian 12's
# 2.36-8cross1 loader with 2.36-9 libc hangs in the first pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
