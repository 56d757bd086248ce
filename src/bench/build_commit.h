// The commit this binary was built from, recorded by CMake at build time
// (cmake/BuildCommit.cmake): `git describe --always --dirty`, or "unknown"
// when the source tree was not a git checkout. A bench report carries it so
// that a figure can be traced to the code that produced it even when the
// report is written away from the source tree.
#pragma once

namespace tkv::bench {

const char* build_commit();

}  // namespace tkv::bench
