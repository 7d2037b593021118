//===- memfile.h - fuzz input as a file path --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The model readers take a path: the input is put in an anonymous memory
// file (memfd_create, a regular file) named through /proc/self/fd.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_FUZZ_MODEL_FILES_MEMFILE_H
#define KVQ_TEST_FUZZ_MODEL_FILES_MEMFILE_H

#include <cstdint>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace kvqfuzz {

class MemFile {
public:
  MemFile(const uint8_t *data, size_t size) {
    fd_ = memfd_create("kvq-fuzz", MFD_CLOEXEC);
    if (fd_ < 0)
      std::abort();
    for (size_t done = 0; done < size;) {
      ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0)
        std::abort();
      done += size_t(n);
    }
  }
  ~MemFile() { close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_ = -1;
};

/// Aborts if a message is not one line of text.
inline void checkOneLine(const std::string &msg) {
  if (msg.empty())
    std::abort();
  for (char c : msg)
    if (c == '\n' || c == '\r')
      std::abort();
}

} // namespace kvqfuzz

#endif // KVQ_TEST_FUZZ_MODEL_FILES_MEMFILE_H
