#include "common/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/fd_io.h"
#include "common/sys_info.h"
#include "test_util.h"

namespace tkv {
namespace {

TEST(MappedFileTest, FaultInMapsTheRangeItIsGiven) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const std::string path = test::temp_dir() + "/weights.bin";
  {
    std::vector<char> bytes(page * 256, 'w');
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  }
  const MappedFile file(path);
  ASSERT_EQ(file.size(), page * 256);
  const long long before = resident_bytes_of_mapping(file.data());
  if (before < 0) GTEST_SKIP() << "/proc/self/smaps is not readable here";
  EXPECT_EQ(before, 0) << "nothing of a fresh mapping is read yet";
  fault_in(file.data(), 0);
  EXPECT_EQ(resident_bytes_of_mapping(file.data()), 0);
  // A range that starts and ends mid-page: every page it touches is mapped.
  fault_in(file.data() + page * 64 + 100, page * 128);
  EXPECT_GE(resident_bytes_of_mapping(file.data()), (long long)(page * 129));
  EXPECT_EQ(file.data()[page * 100], 'w');
}

// FileMemory::kCopy: the file's bytes, read whole into a 2 MiB-aligned
// region (resident at once); an empty file is an empty copy.
TEST(MappedFileTest, CopyHoldsTheFilesBytes) {
  const std::string path = test::temp_dir() + "/weights.bin";
  std::vector<char> bytes(3 * 1000 * 1000 + 17);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 131 % 251);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  MappedFile file(path, FileMemory::kCopy);
  ASSERT_EQ(file.size(), bytes.size());
  EXPECT_EQ(file.memory(), FileMemory::kCopy);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(file.data()) % (uintptr_t(2) << 20), 0u);
  EXPECT_EQ(std::memcmp(file.data(), bytes.data(), bytes.size()), 0);
  const long long resident = resident_bytes_of_mapping(file.data());
  if (resident >= 0) {
    EXPECT_GE(resident, (long long)bytes.size());
  }
  // Moved, the copy stays where it is and is unmapped once.
  MappedFile moved = std::move(file);
  EXPECT_EQ(file.data(), nullptr);
  EXPECT_EQ(std::memcmp(moved.data(), bytes.data(), bytes.size()), 0);

  const std::string empty = test::temp_dir() + "/empty.bin";
  std::ofstream(empty, std::ios::binary).flush();
  const MappedFile none(empty, FileMemory::kCopy);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.data(), nullptr);
}

// pread_full / pwrite_full move the whole buffer, or stop where the file
// ends; a bad descriptor is -1 with errno.
TEST(FdIoTest, WholeBuffersOrUpToTheEnd) {
  const std::string path = test::temp_dir() + "/io.bin";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<char> out(100000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = char(i * 7 % 253);
  EXPECT_EQ(pwrite_full(fd, out.data(), out.size(), 10), ssize_t(out.size()));
  std::vector<char> in(out.size());
  EXPECT_EQ(pread_full(fd, in.data(), in.size(), 10), ssize_t(in.size()));
  EXPECT_EQ(in, out);
  EXPECT_EQ(pread_full(fd, in.data(), in.size(), 60), ssize_t(out.size() - 50));
  EXPECT_EQ(pread_full(fd, in.data(), in.size(), 1 << 20), 0);
  ::close(fd);
  errno = 0;
  EXPECT_EQ(pread_full(fd, in.data(), 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
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
