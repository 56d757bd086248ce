#include "common/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_util.h"

namespace tkv {
namespace {

using test::resident_bytes_of;

TEST(MappedFileTest, FaultInMapsTheRangeItIsGiven) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const std::string path = test::temp_dir() + "/weights.bin";
  {
    std::vector<char> bytes(page * 256, 'w');
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  }
  const MappedFile file(path);
  ASSERT_EQ(file.size(), page * 256);
  const long long before = resident_bytes_of(file.data());
  if (before < 0) GTEST_SKIP() << "/proc/self/smaps is not readable here";
  EXPECT_EQ(before, 0) << "nothing of a fresh mapping is read yet";
  fault_in(file.data(), 0);
  EXPECT_EQ(resident_bytes_of(file.data()), 0);
  // A range that starts and ends mid-page: every page it touches is mapped.
  fault_in(file.data() + page * 64 + 100, page * 128);
  EXPECT_GE(resident_bytes_of(file.data()), (long long)(page * 129));
  EXPECT_EQ(file.data()[page * 100], 'w');
}

TEST(MappedFileTest, MissingFileIsAnErrorNamingIt) {
  try {
    MappedFile file(test::temp_dir() + "/absent.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.gguf: cannot open"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tkv
