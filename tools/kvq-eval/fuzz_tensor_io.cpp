//===- fuzz_tensor_io.cpp - libFuzzer target for kvq-eval's readers -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Any byte string goes through format detection, the container listing
// (.npy header dict, zip central directory, safetensors JSON) and the data
// reads of every entry small enough to convert, from memory, and the raw
// DEFLATE decoder on the bytes themselves. A crash, a
// sanitizer report, a leak or an error message with a raw control byte is a
// finding. Seed corpus: test/fuzz/tensor_io, written by
// test/fuzz/make_tensor_io_corpus.py; how it runs:
// test/fuzz/CMakeLists.txt.
//
//===----------------------------------------------------------------------===//
#include "inflate.h"
#include "tensor_io.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace {
void checkOneLine(const std::string &msg) {
  for (char c : msg)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      std::abort(); // an unescaped control byte reached a message
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kvq::tio::MemorySource src(data, size);
  std::string err;
  // Every format's parser sees every input, not only the detected one.
  for (kvq::tio::Format fmt : {kvq::tio::Format::Npy, kvq::tio::Format::Npz,
                               kvq::tio::Format::Safetensors}) {
    std::vector<kvq::tio::Entry> entries;
    err.clear();
    if (!kvq::tio::list(src, fmt, entries, err)) {
      checkOneLine(err);
      continue;
    }
    for (const kvq::tio::Entry &e : entries) {
      checkOneLine(e.problem);
      if (e.bytes > (uint64_t{1} << 22))
        continue;
      std::vector<float> out;
      err.clear();
      if (!kvq::tio::readData(src, e, out, err))
        checkOneLine(err);
    }
  }
  kvq::tio::Format f;
  err.clear();
  if (!kvq::tio::detect(src, f, err))
    checkOneLine(err);
  // The inflater (np.savez_compressed members) on the raw bytes: whole,
  // under a limit, and as a prefix; the limit must hold.
  std::vector<uint8_t> inflated;
  err.clear();
  if (!kvq::tio::inflate(data, size, 1 << 20, false, inflated, err))
    checkOneLine(err);
  if (inflated.size() > (1u << 20))
    std::abort();
  err.clear();
  if (!kvq::tio::inflate(data, size, 64, true, inflated, err))
    checkOneLine(err);
  if (inflated.size() > 64)
    std::abort();
  // The header dict parser on the raw bytes as text.
  std::string descr;
  bool fortran;
  std::vector<int64_t> shape;
  err.clear();
  if (!kvq::tio::parseNpyHeader(
          std::string(reinterpret_cast<const char *>(data), size), descr,
          fortran, shape, err))
    checkOneLine(err);
  return 0;
}
