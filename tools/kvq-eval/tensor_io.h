//===- tensor_io.h - K/V dump readers for untrusted files -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reads float tensors from NumPy .npy, NumPy .npz (stored members as
// np.savez writes them, deflated ones as np.savez_compressed does; see
// inflate.h) and .safetensors, treating every file as untrusted:
//  - only regular files are opened (a directory, /dev/zero or a FIFO is a
//    one-line error, never a blocking or unbounded read);
//  - every header is size-checked against a fixed limit and against the
//    file before it is read, and the data must lie inside the file;
//  - shape products and byte counts use checked 64-bit arithmetic;
//  - the .npy header dictionary follows NumPy's rules (a Python literal
//    dict with exactly the keys descr, fortran_order and shape; a repeated
//    key takes the last value; the shape a tuple of non-negative ints with
//    commas);
//  - exactly the bytes the header promises are read;
//  - error messages are one line, with file bytes escaped (\xNN).
// The fuzz target (fuzz_tensor_io.cpp) drives the same parsers from memory.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_TENSOR_IO_H
#define KVQ_TOOLS_KVQ_EVAL_TENSOR_IO_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvq::tio {

/// Limits for untrusted input.
constexpr uint64_t kMaxNpyHeader = 100000; ///< .npy header dict bytes
constexpr uint64_t kMaxSafetensorsHeader = 100u << 20; ///< spec's 100 MB
constexpr uint64_t kMaxZipDirectory = 64u << 20;       ///< central directory
constexpr uint64_t kMaxZipEntries = 100000;
constexpr int kMaxDims = 32;

/// Random access to exactly-sized reads of a byte source.
class Source {
public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  /// Read exactly n bytes at off, or false with a reason.
  virtual bool read(uint64_t off, void *dst, size_t n, std::string &err) = 0;
};

class MemorySource : public Source {
public:
  MemorySource(const uint8_t *p, size_t n) : p_(p), n_(n) {}
  uint64_t size() const override { return n_; }
  bool read(uint64_t off, void *dst, size_t n, std::string &err) override;

private:
  const uint8_t *p_;
  size_t n_;
};

/// A regular file, read with pread.
class FileSource : public Source {
public:
  FileSource() = default;
  ~FileSource() override;
  FileSource(const FileSource &) = delete;
  FileSource &operator=(const FileSource &) = delete;
  /// Open `path`; refuses anything but a regular file.
  bool open(const std::string &path, std::string &err);
  uint64_t size() const override { return size_; }
  bool read(uint64_t off, void *dst, size_t n, std::string &err) override;

private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

enum class DType { F16, BF16, F32, F64, Unsupported };
const char *dtypeName(DType d); ///< "float16", ...
size_t dtypeSize(DType d);

enum class Format { Npy, Npz, Safetensors };
const char *formatName(Format f);

/// One tensor a container holds: where its little-endian C-order data is.
struct Entry {
  std::string name; ///< "" for a bare .npy
  std::vector<int64_t> shape;
  DType dtype = DType::Unsupported;
  std::string rawDtype; ///< as the file spells it (for messages)
  uint64_t offset = 0;  ///< data start in the source
  uint64_t bytes = 0;   ///< data length (shape product x dtype size)
  /// .npz: the member's bytes (header + data) and their CRC-32.
  uint64_t memberOffset = 0, memberBytes = 0;
  uint32_t crc = 0;
  bool checkCrc = false;
  /// .npz deflated member (np.savez_compressed): memberBytes compressed
  /// bytes inflate to inflatedBytes; offset is then within the inflated
  /// member.
  bool deflated = false;
  uint64_t inflatedBytes = 0;
  std::string problem; ///< non-empty: this entry cannot be read
};

/// The format from the first bytes; false if none matches.
bool detect(Source &src, Format &fmt, std::string &err);

/// Parse a .npy header at `base` (the member start for .npz).
bool parseNpy(Source &src, uint64_t base, uint64_t limit, Entry &e,
              std::string &err);

/// Every tensor of the container (a .npy has one, named "").
bool list(Source &src, Format fmt, std::vector<Entry> &out, std::string &err);

/// Read an entry's data, converted to float.
bool readData(Source &src, const Entry &e, std::vector<float> &out,
              std::string &err);

/// A loaded tensor and where it came from.
struct Tensor {
  std::string file, name; ///< name "" for a .npy
  Format format = Format::Npy;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

/// Load FILE or FILE:NAME. Without NAME, a .npy is its array and an archive
/// its first tensor named one of `defaults` (e.g. {"keys", "k"}).
bool load(const std::string &spec, const std::vector<std::string> &defaults,
          Tensor &out, std::string &err);

/// True when `spec` names an archive (.npz or .safetensors) that opens.
bool isArchive(const std::string &spec);

/// Parse a Python-literal NumPy header dict (exposed for tests/fuzzing).
bool parseNpyHeader(const std::string &text, std::string &descr, bool &fortran,
                    std::vector<int64_t> &shape, std::string &err);

/// Writers used by the tests (and to build the fuzz corpus).
/// .npy image: version 1.0, '<f2' / '<f4' / '<f8', 64-byte aligned data.
std::vector<uint8_t> npyImage(const std::vector<int64_t> &shape,
                              const std::vector<float> &data, DType dtype);
/// .npz as np.savez writes it: stored members "NAME.npy" whose local
/// headers carry ZIP64 sizes (force_zip64), plain central directory.
bool writeNpz(
    const std::string &path,
    const std::vector<std::pair<std::string, std::vector<uint8_t>>> &members,
    std::string &err, bool deflatedFlag = false);
/// .safetensors with F16/BF16/F32/F64 tensors.
struct StTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  DType dtype = DType::F32;
};
/// `metadata` adds string entries to __metadata__ (after "format": "pt").
std::vector<uint8_t> safetensorsImage(
    const std::vector<StTensor> &tensors,
    const std::vector<std::pair<std::string, std::string>> &metadata = {});
bool writeFile(const std::string &path, const std::vector<uint8_t> &bytes,
               std::string &err);

uint32_t crc32(const uint8_t *p, size_t n, uint32_t crc = 0);
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t h);

} // namespace kvq::tio

#endif // KVQ_TOOLS_KVQ_EVAL_TENSOR_IO_H
