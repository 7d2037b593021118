//===- tensor_io.cpp - .npy / .npz / .safetensors readers -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// See tensor_io.h for the rules. Every length read from a file is checked
// before it is used as an offset, a size or an allocation.
//
//===----------------------------------------------------------------------===//
#include "tensor_io.h"

#include "flags.h"
#include "inflate.h"
#include "npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using kvq::cli::printable;

namespace kvq::tio {

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

bool MemorySource::read(uint64_t off, void *dst, size_t n, std::string &err) {
  if (off > n_ || n > n_ - off) {
    err = "truncated: needs bytes [" + std::to_string(off) + ", " +
          std::to_string(off + n) + "), has " + std::to_string(n_);
    return false;
  }
  if (n)
    std::memcpy(dst, p_ + off, n);
  return true;
}

FileSource::~FileSource() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool FileSource::open(const std::string &path, std::string &err) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below like every other non-regular file.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    err = "cannot open '" + printable(path) + "': " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    err = "cannot stat '" + printable(path) + "': " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    err = "'" + printable(path) + "' is a directory, not a tensor file";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    err = "'" + printable(path) +
          "' is not a regular file (device, FIFO or socket)";
    return false;
  }
  size_ = static_cast<uint64_t>(st.st_size);
  return true;
}

bool FileSource::read(uint64_t off, void *dst, size_t n, std::string &err) {
  if (off > size_ || n > size_ - off) {
    err = "truncated: needs bytes [" + std::to_string(off) + ", " +
          std::to_string(off + n) + "), file has " + std::to_string(size_);
    return false;
  }
  auto *p = static_cast<uint8_t *>(dst);
  while (n > 0) {
    ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      err = got < 0 ? std::string("read failed: ") + std::strerror(errno)
                    : "file shrank while being read";
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
    off += static_cast<uint64_t>(got);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

namespace {

uint32_t le32(const uint8_t *p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
         (uint32_t{p[3]} << 24);
}
uint16_t le16(const uint8_t *p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint64_t le64(const uint8_t *p) {
  return uint64_t{le32(p)} | (uint64_t{le32(p + 4)} << 32);
}
void put16(std::vector<uint8_t> &b, uint32_t v) {
  b.push_back(v & 0xff);
  b.push_back((v >> 8) & 0xff);
}
void put32(std::vector<uint8_t> &b, uint32_t v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}
void put64(std::vector<uint8_t> &b, uint64_t v) {
  put32(b, static_cast<uint32_t>(v));
  put32(b, static_cast<uint32_t>(v >> 32));
}

/// count = product of dims, bytes = count * elem, both checked.
bool shapeBytes(const std::vector<int64_t> &shape, size_t elem, uint64_t &count,
                uint64_t &bytes, std::string &err) {
  count = 1;
  // Strides are products of dimensions too, zeros aside: (0, 2**62, 2**62)
  // holds no data but its strides overflow, so it is refused as well.
  uint64_t span = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      err = "negative dimension " + std::to_string(d);
      return false;
    }
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count) ||
        __builtin_mul_overflow(span, std::max<uint64_t>(1, d), &span) ||
        span > (uint64_t{1} << 62)) {
      err = "shape product overflows 64 bits";
      return false;
    }
  }
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(elem), &bytes) ||
      bytes > (uint64_t{1} << 62)) {
    err = "array of " + std::to_string(count) + " elements is too large";
    return false;
  }
  return true;
}

std::string shapeText(const std::vector<int64_t> &s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

/// Minimal Python literal reader for NumPy's header dict.
class Literal {
public:
  explicit Literal(const std::string &t) : t_(t) {}

  bool dict(std::string &descr, bool &haveDescr, bool &fortran,
            bool &haveFortran, std::vector<int64_t> &shape, bool &haveShape,
            std::string &err) {
    ws();
    if (!eat('{'))
      return fail("the header is not a dict literal", err);
    ws();
    bool first = true;
    while (!peek('}')) {
      if (!first) {
        if (!eat(','))
          return fail("expected ',' or '}' between header entries", err);
        ws();
        if (peek('}'))
          break; // trailing comma
      }
      first = false;
      std::string key;
      if (!string(key, err))
        return false;
      ws();
      if (!eat(':'))
        return fail("expected ':' after key '" + printable(key, 40) + "'", err);
      ws();
      // A repeated key takes the last value, as in a Python dict.
      if (key == "descr") {
        if (!string(descr, err))
          return fail("'descr' must be a string (a plain dtype such as "
                      "'<f4'): " +
                          err,
                      err);
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (!boolean(fortran))
          return fail("'fortran_order' must be True or False", err);
        haveFortran = true;
      } else if (key == "shape") {
        if (!tuple(shape, err))
          return false;
        haveShape = true;
      } else {
        return fail("the header has key '" + printable(key, 40) +
                        "'; NumPy requires exactly descr, fortran_order and "
                        "shape",
                    err);
      }
      ws();
    }
    eat('}');
    ws();
    if (i_ != t_.size())
      return fail("unexpected text after the header dict", err);
    return true;
  }

private:
  const std::string &t_;
  size_t i_ = 0;

  static bool fail(const std::string &m, std::string &err) {
    err = m;
    return false;
  }
  void ws() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' ||
            t_[i_] == '\r' || t_[i_] == '\f'))
      ++i_;
  }
  bool peek(char c) const { return i_ < t_.size() && t_[i_] == c; }
  bool eat(char c) {
    if (!peek(c))
      return false;
    ++i_;
    return true;
  }
  bool string(std::string &out, std::string &err) {
    if (i_ >= t_.size() || (t_[i_] != '\'' && t_[i_] != '"'))
      return fail("expected a quoted string", err);
    const char q = t_[i_++];
    out.clear();
    while (i_ < t_.size() && t_[i_] != q) {
      if (t_[i_] == '\\' || t_[i_] == '\n')
        return fail("escape sequences and newlines in header strings are "
                    "not supported",
                    err);
      out += t_[i_++];
    }
    if (!eat(q))
      return fail("unterminated string", err);
    return true;
  }
  bool word(const char *w) {
    size_t n = std::strlen(w);
    if (t_.compare(i_, n, w) != 0)
      return false;
    size_t after = i_ + n;
    if (after < t_.size() &&
        (std::isalnum(static_cast<unsigned char>(t_[after])) ||
         t_[after] == '_'))
      return false;
    i_ = after;
    return true;
  }
  bool boolean(bool &b) {
    if (word("True"))
      return b = true, true;
    if (word("False"))
      return b = false, true;
    return false;
  }
  /// Python int: "0" or [1-9][0-9]* with optional single underscores
  /// between digits; a leading '-' makes a negative dimension.
  bool integer(int64_t &v, std::string &err) {
    bool neg = eat('-');
    if (neg)
      ws();
    if (i_ >= t_.size() || !std::isdigit(static_cast<unsigned char>(t_[i_])))
      return fail("shape entries must be integers", err);
    if (t_[i_] == '0' && i_ + 1 < t_.size() &&
        (std::isdigit(static_cast<unsigned char>(t_[i_ + 1])) ||
         t_[i_ + 1] == '_' ||
         std::isalpha(static_cast<unsigned char>(t_[i_ + 1]))))
      return fail("shape entries must be decimal integers without leading "
                  "zeros",
                  err);
    uint64_t x = 0;
    bool lastDigit = false;
    while (i_ < t_.size()) {
      char c = t_[i_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        if (__builtin_mul_overflow(x, uint64_t{10}, &x) ||
            __builtin_add_overflow(x, static_cast<uint64_t>(c - '0'), &x) ||
            x > (uint64_t{1} << 62))
          return fail("shape entry too large", err);
        lastDigit = true;
      } else if (c == '_' && lastDigit && i_ + 1 < t_.size() &&
                 std::isdigit(static_cast<unsigned char>(t_[i_ + 1]))) {
        lastDigit = false;
      } else {
        break;
      }
      ++i_;
    }
    if (i_ < t_.size() &&
        (std::isalpha(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.'))
      return fail("shape entries must be integers", err);
    if (neg) {
      err = "negative dimension -" + std::to_string(x) + " in the shape";
      return false;
    }
    v = static_cast<int64_t>(x);
    return true;
  }
  /// (), (n,), (n, m), (n, m,) -- a parenthesised single int is not a tuple.
  bool tuple(std::vector<int64_t> &shape, std::string &err) {
    if (!eat('('))
      return fail("'shape' must be a tuple such as (tokens, heads, dim)", err);
    shape.clear();
    ws();
    if (eat(')'))
      return true;
    bool sawComma = false;
    while (true) {
      int64_t v;
      if (!integer(v, err))
        return false;
      if (shape.size() >= static_cast<size_t>(kMaxDims))
        return fail("more than " + std::to_string(kMaxDims) + " dimensions",
                    err);
      shape.push_back(v);
      ws();
      if (eat(')'))
        break;
      if (!eat(','))
        return fail("malformed shape tuple (entries must be separated by "
                    "commas)",
                    err);
      sawComma = true;
      ws();
      if (eat(')'))
        break;
    }
    if (!sawComma)
      return fail("'shape' must be a tuple; (n) is an int, write (n,)", err);
    return true;
  }
};

DType npyDtype(const std::string &d) {
  if (d.size() != 3 || (d[0] != '<' && d[0] != '=' && d[0] != '|'))
    return DType::Unsupported;
  if (d[1] != 'f')
    return DType::Unsupported;
  if (d[2] == '2')
    return DType::F16;
  if (d[0] == '|')
    return DType::Unsupported; // '|' is for one-byte types
  if (d[2] == '4')
    return DType::F32;
  if (d[2] == '8')
    return DType::F64;
  return DType::Unsupported;
}

} // namespace

const char *dtypeName(DType d) {
  switch (d) {
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  default:
    return "unsupported";
  }
}

size_t dtypeSize(DType d) {
  switch (d) {
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
    return 4;
  case DType::F64:
    return 8;
  default:
    return 0;
  }
}

const char *formatName(Format f) {
  switch (f) {
  case Format::Npy:
    return "npy";
  case Format::Npz:
    return "npz";
  default:
    return "safetensors";
  }
}

uint32_t crc32(const uint8_t *p, size_t n, uint32_t crc) {
  static uint32_t table[256];
  static bool init = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return true;
  }();
  (void)init;
  crc = ~crc;
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t r = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(r >> 16);
}

float bf16ToFloat(uint16_t h) {
  uint32_t x = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

bool parseNpyHeader(const std::string &text, std::string &descr, bool &fortran,
                    std::vector<int64_t> &shape, std::string &err) {
  bool hd = false, hf = false, hs = false;
  Literal lit(text);
  if (!lit.dict(descr, hd, fortran, hf, shape, hs, err))
    return false;
  if (!hd || !hf || !hs) {
    err = std::string("the header lacks ") +
          (!hd   ? "'descr'"
           : !hf ? "'fortran_order'"
                 : "'shape'") +
          " (NumPy requires descr, fortran_order and shape)";
    return false;
  }
  return true;
}

bool parseNpy(Source &src, uint64_t base, uint64_t limit, Entry &e,
              std::string &err) {
  uint8_t pre[12];
  if (limit < 10 || !src.read(base, pre, 10, err)) {
    err = "not a .npy file (too short for the magic and header length)";
    return false;
  }
  static const uint8_t magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (std::memcmp(pre, magic, 6) != 0) {
    err = "not a .npy file (bad magic)";
    return false;
  }
  const int major = pre[6];
  uint64_t headerLen, start;
  if (major == 1) {
    headerLen = le16(pre + 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (limit < 12 || !src.read(base + 10, pre + 10, 2, err)) {
      err = "truncated .npy header length";
      return false;
    }
    headerLen = le32(pre + 8);
    start = 12;
  } else {
    err = "unsupported .npy format version " + std::to_string(major) + "." +
          std::to_string(pre[7]);
    return false;
  }
  if (headerLen > kMaxNpyHeader) {
    err = ".npy header of " + std::to_string(headerLen) +
          " bytes exceeds the " + std::to_string(kMaxNpyHeader) + "-byte limit";
    return false;
  }
  if (headerLen > limit - start) {
    err = "truncated .npy header: " + std::to_string(headerLen) +
          " bytes promised, " + std::to_string(limit - start) + " present";
    return false;
  }
  std::string header(static_cast<size_t>(headerLen), '\0');
  if (!src.read(base + start, header.data(), header.size(), err))
    return false;
  std::string descr;
  bool fortran = false;
  if (!parseNpyHeader(header, descr, fortran, e.shape, err)) {
    err = "malformed .npy header: " + err +
          " (header: " + printable(header, 120) + ")";
    return false;
  }
  e.rawDtype = descr;
  if (fortran) {
    err = "fortran_order arrays are not supported (save with C order, e.g. "
          "np.ascontiguousarray)";
    return false;
  }
  if (descr.size() == 3 && descr[0] == '>') {
    err = "big-endian dtype '" + printable(descr, 20) + "' is not supported";
    return false;
  }
  e.dtype = npyDtype(descr);
  if (e.dtype == DType::Unsupported) {
    err = "dtype '" + printable(descr, 40) +
          "' is not supported (use float16, float32 or float64)";
    return false;
  }
  uint64_t count;
  if (!shapeBytes(e.shape, dtypeSize(e.dtype), count, e.bytes, err))
    return false;
  e.offset = base + start + headerLen;
  const uint64_t have = limit - start - headerLen;
  if (e.bytes > have) {
    err = "truncated data: shape " + shapeText(e.shape) + " of " +
          dtypeName(e.dtype) + " needs " + std::to_string(e.bytes) +
          " bytes, " + std::to_string(have) + " present";
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// .npz (zip: stored members, or deflated ones inflated in memory)
//===----------------------------------------------------------------------===//

namespace {

bool listNpz(Source &src, std::vector<Entry> &out, std::string &err) {
  const uint64_t size = src.size();
  if (size < 22) {
    err = "not a zip archive (too short)";
    return false;
  }
  const uint64_t tailLen = std::min<uint64_t>(size, 22 + 65535);
  std::vector<uint8_t> tail(static_cast<size_t>(tailLen));
  if (!src.read(size - tailLen, tail.data(), tail.size(), err))
    return false;
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tailLen) - 22; i >= 0; --i)
    if (le32(&tail[static_cast<size_t>(i)]) == 0x06054b50u) {
      eocd = i;
      break;
    }
  if (eocd < 0) {
    err = "not a zip archive (no end-of-central-directory record)";
    return false;
  }
  const uint8_t *e = &tail[static_cast<size_t>(eocd)];
  if (le16(e + 4) != 0 || le16(e + 6) != 0) {
    err = "multi-disk zip archives are not supported";
    return false;
  }
  uint64_t entries = le16(e + 10), cdSize = le32(e + 12), cdOff = le32(e + 16);
  if (entries == 0xffff || cdSize == 0xffffffffu || cdOff == 0xffffffffu) {
    // ZIP64: the locator sits just before the end record.
    const uint64_t eocdAbs = size - tailLen + static_cast<uint64_t>(eocd);
    uint8_t loc[20], rec[56];
    if (eocdAbs < 20 || !src.read(eocdAbs - 20, loc, 20, err) ||
        le32(loc) != 0x07064b50u) {
      err = "zip64 archive without a zip64 locator";
      return false;
    }
    const uint64_t recOff = le64(loc + 8);
    if (!src.read(recOff, rec, 56, err) || le32(rec) != 0x06064b50u) {
      err = "bad zip64 end-of-central-directory record";
      return false;
    }
    entries = le64(rec + 32);
    cdSize = le64(rec + 40);
    cdOff = le64(rec + 48);
  }
  if (entries > kMaxZipEntries || cdSize > kMaxZipDirectory || cdOff > size ||
      cdSize > size - cdOff) {
    err = "zip central directory out of bounds (" + std::to_string(entries) +
          " entries, " + std::to_string(cdSize) + " bytes at " +
          std::to_string(cdOff) + ", file " + std::to_string(size) + ")";
    return false;
  }
  std::vector<uint8_t> cd(static_cast<size_t>(cdSize));
  if (!src.read(cdOff, cd.data(), cd.size(), err))
    return false;
  struct Span {
    uint64_t begin, end; // local header to the end of the member's data
    std::string name;
  };
  std::vector<Span> spans;
  size_t p = 0;
  for (uint64_t n = 0; n < entries; ++n) {
    if (cd.size() - p < 46 || le32(&cd[p]) != 0x02014b50u) {
      err = "corrupt zip central directory (entry " + std::to_string(n) + ")";
      return false;
    }
    const uint8_t *h = &cd[p];
    const uint16_t flags = le16(h + 8), method = le16(h + 10);
    const uint32_t crc = le32(h + 16);
    uint64_t csize = le32(h + 20), usize = le32(h + 24);
    const size_t nameLen = le16(h + 28), extraLen = le16(h + 30),
                 commentLen = le16(h + 32);
    uint64_t local = le32(h + 42);
    if (cd.size() - p - 46 < nameLen + extraLen + commentLen) {
      err = "corrupt zip central directory (entry " + std::to_string(n) +
            " overruns it)";
      return false;
    }
    std::string name(reinterpret_cast<const char *>(h + 46), nameLen);
    // ZIP64 extended information: the fields that are 0xffffffff above,
    // in the order usize, csize, local offset.
    const uint8_t *x = h + 46 + nameLen, *xend = x + extraLen;
    while (xend - x >= 4) {
      const uint16_t id = le16(x), len = le16(x + 2);
      if (static_cast<size_t>(xend - x - 4) < len)
        break;
      if (id == 0x0001) {
        const uint8_t *f = x + 4, *fend = f + len;
        auto take = [&](uint64_t &v) {
          if (v == 0xffffffffu && fend - f >= 8) {
            v = le64(f);
            f += 8;
          }
        };
        take(usize);
        take(csize);
        take(local);
      }
      x += 4 + len;
    }
    p += 46 + nameLen + extraLen + commentLen;
    // Every member's local header carries the directory's name, and no two
    // members share bytes (Python's zipfile refuses both: "File name in
    // directory and header differ", "Overlapped entries").
    uint8_t lh[30];
    if (!src.read(local, lh, 30, err) || le32(lh) != 0x04034b50u) {
      err = "corrupt zip: bad local header of '" + printable(name, 80) + "'";
      return false;
    }
    const size_t localNameLen = le16(lh + 26);
    std::string localName(localNameLen, '\0');
    if (!src.read(local + 30, localName.data(), localNameLen, err) ||
        localName != name) {
      err = "corrupt zip: the directory names a member '" +
            printable(name, 80) + "' whose local header says '" +
            printable(localName, 80) + "'";
      return false;
    }
    const uint64_t dataOff = local + 30 + localNameLen + le16(lh + 28);
    if (dataOff > size || csize > size - dataOff) {
      err = "corrupt zip: member '" + printable(name, 80) +
            "' lies outside the file";
      return false;
    }
    spans.push_back({local, dataOff + csize, name});
    Entry en;
    en.name = name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      en.name = name.substr(0, name.size() - 4);
    else {
      en.problem = "member '" + printable(name, 80) + "' is not a .npy array";
      out.push_back(en);
      continue;
    }
    if (flags & 1) {
      en.problem = "member '" + printable(name, 80) + "' is encrypted";
      out.push_back(en);
      continue;
    }
    if (method != 0 && method != 8) {
      en.problem = "member '" + printable(name, 80) +
                   "' is compressed with zip method " + std::to_string(method) +
                   " (kvq-eval reads stored and deflated members: np.savez "
                   "or np.savez_compressed)";
      out.push_back(en);
      continue;
    }
    if (method == 0 && csize != usize) {
      en.problem =
          "member '" + printable(name, 80) + "' is stored with differing sizes";
      out.push_back(en);
      continue;
    }
    // Deflate expands at most 1032:1 (a 258-byte match per 2 bits).
    if (method == 8 &&
        (csize > (uint64_t{1} << 50) || usize > csize * 1032 + 64)) {
      en.problem = "member '" + printable(name, 80) + "' claims " +
                   std::to_string(usize) + " bytes from " +
                   std::to_string(csize) +
                   " deflated ones, more than deflate can produce";
      out.push_back(en);
      continue;
    }
    if (method == 8) {
      // Inflate only as much as a .npy header can take to list the
      // member; readData inflates all of it.
      en.memberOffset = dataOff;
      en.memberBytes = csize;
      en.crc = crc;
      en.checkCrc = true;
      en.deflated = true;
      en.inflatedBytes = usize;
      std::vector<uint8_t> packed(static_cast<size_t>(csize)), head;
      std::string perr;
      if (!src.read(dataOff, packed.data(), packed.size(), err))
        return false;
      const uint64_t headMax = std::min<uint64_t>(usize, 12 + kMaxNpyHeader);
      if (!inflate(packed.data(), packed.size(), static_cast<size_t>(headMax),
                   true, head, perr)) {
        en.problem = "deflated member '" + printable(name, 80) + "': " + perr;
      } else {
        MemorySource hs(head.data(), head.size());
        if (!parseNpy(hs, 0, usize, en, perr))
          en.problem = "deflated member '" + printable(name, 80) + "': " + perr;
      }
      out.push_back(en);
      continue;
    }
    en.memberOffset = dataOff;
    en.memberBytes = csize;
    en.crc = crc;
    en.checkCrc = true;
    std::string perr;
    if (!parseNpy(src, dataOff, csize, en, perr))
      en.problem = "member '" + printable(name, 80) + "': " + perr;
    out.push_back(en);
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span &a, const Span &b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end) {
      err = "corrupt zip: members '" + printable(spans[i - 1].name, 80) +
            "' and '" + printable(spans[i].name, 80) + "' overlap";
      return false;
    }
  return true;
}

DType stDtype(const std::string &s) {
  if (s == "F16")
    return DType::F16;
  if (s == "BF16")
    return DType::BF16;
  if (s == "F32")
    return DType::F32;
  if (s == "F64")
    return DType::F64;
  return DType::Unsupported;
}

const char *stName(DType d) {
  switch (d) {
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::F64:
    return "F64";
  default:
    return "F32";
  }
}

bool listSafetensors(Source &src, std::vector<Entry> &out, std::string &err) {
  uint8_t pre[8];
  if (!src.read(0, pre, 8, err)) {
    err = "not a .safetensors file (shorter than 8 bytes)";
    return false;
  }
  const uint64_t n = le64(pre);
  if (n > kMaxSafetensorsHeader || n > src.size() - 8) {
    err = ".safetensors header length " + std::to_string(n) +
          " exceeds the file or the 100 MB limit";
    return false;
  }
  std::string header(static_cast<size_t>(n), '\0');
  if (!src.read(8, header.data(), header.size(), err))
    return false;
  nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    err = ".safetensors header is not a JSON object (" + printable(header, 80) +
          ")";
    return false;
  }
  const uint64_t dataStart = 8 + n, dataLen = src.size() - dataStart;
  // The tensors' data_offsets, to check that they tile the data bytes.
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      // A map of strings to strings, as the format's reference reader
      // requires.
      bool strings = it.value().is_object();
      for (const auto &m : it.value().items())
        strings = strings && m.value().is_string();
      if (!strings) {
        err = ".safetensors __metadata__ is not an object of strings";
        return false;
      }
      continue;
    }
    Entry e;
    e.name = it.key();
    const nlohmann::json &t = it.value();
    const std::string where = "tensor '" + printable(e.name, 80) + "'";
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() ||
        !t.contains("shape") || !t["shape"].is_array() ||
        !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2) {
      err = ".safetensors " + where +
            " lacks dtype, shape or data_offsets [begin, end]";
      return false;
    }
    e.rawDtype = t["dtype"].get<std::string>();
    e.dtype = stDtype(e.rawDtype);
    if (t["shape"].size() > static_cast<size_t>(kMaxDims)) {
      err = ".safetensors " + where + " has too many dimensions";
      return false;
    }
    for (const auto &d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62)) {
        err = ".safetensors " + where +
              ": shape entries must be "
              "non-negative integers";
        return false;
      }
      e.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    const auto &off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      err = ".safetensors " + where + ": data_offsets must be integers";
      return false;
    }
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > dataLen) {
      err = ".safetensors " + where + ": data_offsets [" + std::to_string(b) +
            ", " + std::to_string(en) + "] outside the " +
            std::to_string(dataLen) + " data bytes";
      return false;
    }
    spans.push_back({b, en, e.name});
    if (e.dtype == DType::Unsupported) {
      e.problem = where + " has dtype '" + printable(e.rawDtype, 20) +
                  "' (use F16, BF16, F32 or F64)";
      out.push_back(e);
      continue;
    }
    uint64_t count, bytes;
    std::string serr;
    if (!shapeBytes(e.shape, dtypeSize(e.dtype), count, bytes, serr)) {
      err = ".safetensors " + where + ": " + serr;
      return false;
    }
    if (bytes != en - b) {
      err = ".safetensors " + where + ": shape " + shapeText(e.shape) + " of " +
            e.rawDtype + " needs " + std::to_string(bytes) +
            " bytes, data_offsets give " + std::to_string(en - b);
      return false;
    }
    e.offset = dataStart + b;
    e.bytes = bytes;
    out.push_back(e);
  }
  // Like the reference reader: in offset order each tensor starts where the
  // one before ends, the first at 0 and the last at the end of the file.
  std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  std::string before;
  for (const Span &t : spans) {
    if (t.begin < at) {
      err = ".safetensors tensors '" + printable(before, 80) + "' and '" +
            printable(t.name, 80) + "' overlap";
      return false;
    }
    if (t.begin > at) {
      err = ".safetensors data bytes [" + std::to_string(at) + ", " +
            std::to_string(t.begin) + ") belong to no tensor (before '" +
            printable(t.name, 80) + "')";
      return false;
    }
    at = t.end;
    before = t.name;
  }
  if (at != dataLen) {
    err = ".safetensors file has " + std::to_string(dataLen - at) +
          " bytes after the last tensor's data";
    return false;
  }
  return true;
}

} // namespace

bool detect(Source &src, Format &fmt, std::string &err) {
  uint8_t b[9] = {0};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), 9));
  if (!src.read(0, b, n, err))
    return false;
  if (n >= 6 && std::memcmp(b, "\x93NUMPY", 6) == 0) {
    fmt = Format::Npy;
    return true;
  }
  if (n >= 4 && b[0] == 'P' && b[1] == 'K' &&
      ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6))) {
    fmt = Format::Npz;
    return true;
  }
  if (n >= 9 && b[8] == '{') {
    fmt = Format::Safetensors;
    return true;
  }
  err = "not a .npy, .npz or .safetensors file (unrecognised magic bytes)";
  return false;
}

bool list(Source &src, Format fmt, std::vector<Entry> &out, std::string &err) {
  out.clear();
  if (fmt == Format::Npy) {
    Entry e;
    if (!parseNpy(src, 0, src.size(), e, err))
      return false;
    out.push_back(e);
    return true;
  }
  return fmt == Format::Npz ? listNpz(src, out, err)
                            : listSafetensors(src, out, err);
}

bool readData(Source &src, const Entry &e, std::vector<float> &out,
              std::string &err) {
  if (!e.problem.empty()) {
    err = e.problem;
    return false;
  }
  if (e.deflated) {
    std::vector<uint8_t> packed(static_cast<size_t>(e.memberBytes)), member;
    if (!src.read(e.memberOffset, packed.data(), packed.size(), err))
      return false;
    std::string ierr;
    if (!inflate(packed.data(), packed.size(),
                 static_cast<size_t>(e.inflatedBytes), false, member, ierr)) {
      err = "deflated member '" + printable(e.name, 80) + ".npy': " + ierr;
      return false;
    }
    if (member.size() != e.inflatedBytes) {
      err = "member '" + printable(e.name, 80) + ".npy' inflates to " +
            std::to_string(member.size()) + " bytes, its directory says " +
            std::to_string(e.inflatedBytes);
      return false;
    }
    if (crc32(member.data(), member.size()) != e.crc) {
      err = "member '" + printable(e.name, 80) +
            ".npy' fails its CRC-32 check (corrupt archive)";
      return false;
    }
    MemorySource ms(member.data(), member.size());
    Entry plain = e;
    plain.deflated = false;
    plain.checkCrc = false;
    return readData(ms, plain, out, err);
  }
  if (e.checkCrc) {
    uint32_t crc = 0;
    std::vector<uint8_t> buf(1 << 20);
    for (uint64_t at = 0; at < e.memberBytes;) {
      size_t n = static_cast<size_t>(
          std::min<uint64_t>(buf.size(), e.memberBytes - at));
      if (!src.read(e.memberOffset + at, buf.data(), n, err))
        return false;
      crc = crc32(buf.data(), n, crc);
      at += n;
    }
    if (crc != e.crc) {
      err = "member '" + printable(e.name, 80) +
            ".npy' fails its CRC-32 check (corrupt archive)";
      return false;
    }
  }
  const size_t elem = dtypeSize(e.dtype);
  const uint64_t count = elem ? e.bytes / elem : 0;
  if (count > out.max_size()) {
    err = "array too large";
    return false;
  }
  out.resize(static_cast<size_t>(count));
  std::vector<uint8_t> buf;
  const uint64_t chunk = (uint64_t{1} << 20) / elem;
  for (uint64_t i = 0; i < count; i += chunk) {
    const uint64_t m = std::min(chunk, count - i);
    buf.resize(static_cast<size_t>(m * elem));
    if (!src.read(e.offset + i * elem, buf.data(), buf.size(), err))
      return false;
    const uint8_t *p = buf.data();
    float *o = out.data() + i;
    for (uint64_t k = 0; k < m; ++k) {
      switch (e.dtype) {
      case DType::F16:
        o[k] = kvq::npy::halfToFloat(le16(p + 2 * k));
        break;
      case DType::BF16:
        o[k] = bf16ToFloat(le16(p + 2 * k));
        break;
      case DType::F32: {
        uint32_t u = le32(p + 4 * k);
        std::memcpy(&o[k], &u, 4);
        break;
      }
      default: {
        uint64_t u = le64(p + 8 * k);
        double d;
        std::memcpy(&d, &u, 8);
        o[k] = static_cast<float>(d);
        break;
      }
      }
    }
  }
  return true;
}

bool isArchive(const std::string &spec) {
  FileSource f;
  std::string err;
  Format fmt;
  return f.open(spec, err) && detect(f, fmt, err) && fmt != Format::Npy;
}

bool load(const std::string &spec, const std::vector<std::string> &defaults,
          Tensor &out, std::string &err) {
  std::string path = spec, name;
  bool named = false;
  struct stat st;
  if (::stat(spec.c_str(), &st) != 0) {
    size_t colon = spec.rfind(':');
    if (colon != std::string::npos && colon > 0 &&
        ::stat(spec.substr(0, colon).c_str(), &st) == 0) {
      path = spec.substr(0, colon);
      name = spec.substr(colon + 1);
      named = true;
    }
  }
  FileSource src;
  Format fmt;
  std::vector<Entry> entries;
  if (!src.open(path, err))
    return false;
  if (!detect(src, fmt, err) || !list(src, fmt, entries, err)) {
    err = printable(path) + ": " + err;
    return false;
  }
  const Entry *pick = nullptr;
  if (fmt == Format::Npy) {
    if (named) {
      err = printable(path) +
            " is a .npy file (one array): ':" + printable(name, 80) +
            "' names nothing in it";
      return false;
    }
    pick = &entries[0];
  } else {
    std::vector<std::string> want =
        named ? std::vector<std::string>{name} : defaults;
    for (const std::string &w : want) {
      for (const Entry &e : entries)
        if (e.name == w) {
          pick = &e;
          break;
        }
      if (pick)
        break;
    }
    if (!pick) {
      std::string have;
      size_t shown = 0;
      for (const Entry &e : entries) {
        if (shown++ == 12) {
          have += ", ...";
          break;
        }
        have += (have.empty() ? "" : ", ") + printable(e.name, 60);
      }
      std::string asked;
      for (const std::string &w : want)
        asked += (asked.empty() ? "'" : " or '") + printable(w, 60) + "'";
      err = printable(path) + ": no tensor named " + asked +
            " (it has: " + (have.empty() ? std::string("none") : have) +
            "); choose one with FILE:NAME";
      return false;
    }
  }
  if (!readData(src, *pick, out.data, err)) {
    err = printable(path) + ": " + err;
    return false;
  }
  out.file = path;
  out.name = pick->name;
  out.format = fmt;
  out.dtype = pick->dtype;
  out.shape = pick->shape;
  return true;
}

//===----------------------------------------------------------------------===//
// Writers (tests and corpus)
//===----------------------------------------------------------------------===//

namespace {
void appendData(std::vector<uint8_t> &b, const std::vector<float> &data,
                DType dtype) {
  for (float f : data) {
    switch (dtype) {
    case DType::F16:
      put16(b, kvq::npy::floatToHalf(f));
      break;
    case DType::BF16:
      put16(b, floatToBf16(f));
      break;
    case DType::F64: {
      double d = f;
      uint64_t u;
      std::memcpy(&u, &d, 8);
      put64(b, u);
      break;
    }
    default: {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      put32(b, u);
      break;
    }
    }
  }
}
} // namespace

std::vector<uint8_t> npyImage(const std::vector<int64_t> &shape,
                              const std::vector<float> &data, DType dtype) {
  std::string dict = std::string("{'descr': '") +
                     (dtype == DType::F16   ? "<f2"
                      : dtype == DType::F64 ? "<f8"
                                            : "<f4") +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) +
            (shape.size() == 1 || i + 1 < shape.size() ? "," : "") +
            (i + 1 < shape.size() ? " " : "");
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  put16(b, static_cast<uint32_t>(dict.size()));
  b.insert(b.end(), dict.begin(), dict.end());
  appendData(b, data, dtype);
  return b;
}

bool writeNpz(
    const std::string &path,
    const std::vector<std::pair<std::string, std::vector<uint8_t>>> &members,
    std::string &err, bool deflatedFlag) {
  std::vector<uint8_t> z, cd;
  for (const auto &m : members) {
    const std::string name = m.first + ".npy";
    const std::vector<uint8_t> &data = m.second;
    const uint32_t crc = crc32(data.data(), data.size());
    const uint32_t offset = static_cast<uint32_t>(z.size());
    const uint16_t method = deflatedFlag ? 8 : 0;
    // Local header as CPython's zipfile writes it with force_zip64: sizes
    // 0xffffffff and a ZIP64 extra field with the real ones.
    put32(z, 0x04034b50u);
    put16(z, 45);
    put16(z, 0);
    put16(z, method);
    put16(z, 0);
    put16(z, 0x21); // 1980-01-01
    put32(z, crc);
    put32(z, 0xffffffffu);
    put32(z, 0xffffffffu);
    put16(z, static_cast<uint32_t>(name.size()));
    put16(z, 20);
    z.insert(z.end(), name.begin(), name.end());
    put16(z, 1);
    put16(z, 16);
    put64(z, data.size());
    put64(z, data.size());
    z.insert(z.end(), data.begin(), data.end());
    put32(cd, 0x02014b50u);
    put16(cd, 45);
    put16(cd, 45);
    put16(cd, 0);
    put16(cd, method);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, crc);
    put32(cd, static_cast<uint32_t>(data.size()));
    put32(cd, static_cast<uint32_t>(data.size()));
    put16(cd, static_cast<uint32_t>(name.size()));
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0x01800000u);
    put32(cd, offset);
    cd.insert(cd.end(), name.begin(), name.end());
  }
  const uint32_t cdOff = static_cast<uint32_t>(z.size());
  z.insert(z.end(), cd.begin(), cd.end());
  put32(z, 0x06054b50u);
  put16(z, 0);
  put16(z, 0);
  put16(z, static_cast<uint32_t>(members.size()));
  put16(z, static_cast<uint32_t>(members.size()));
  put32(z, static_cast<uint32_t>(cd.size()));
  put32(z, cdOff);
  put16(z, 0);
  return writeFile(path, z, err);
}

std::vector<uint8_t> safetensorsImage(
    const std::vector<StTensor> &tensors,
    const std::vector<std::pair<std::string, std::string>> &metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  for (const auto &[key, value] : metadata)
    h["__metadata__"][key] = value;
  std::vector<uint8_t> data;
  for (const StTensor &t : tensors) {
    const uint64_t begin = data.size();
    appendData(data, t.data, t.dtype);
    h[t.name] = {{"dtype", stName(t.dtype)},
                 {"shape", t.shape},
                 {"data_offsets", {begin, static_cast<uint64_t>(data.size())}}};
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> b;
  put64(b, text.size());
  b.insert(b.end(), text.begin(), text.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

bool writeFile(const std::string &path, const std::vector<uint8_t> &bytes,
               std::string &err) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    err = "cannot write '" + printable(path) + "'";
    return false;
  }
  f.write(reinterpret_cast<const char *>(bytes.data()),
          static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    err = "write to '" + printable(path) + "' failed";
    return false;
  }
  return true;
}

} // namespace kvq::tio
