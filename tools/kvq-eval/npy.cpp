//===- npy.cpp - Minimal NumPy .npy reader and writer ---------------------===//
//
// The header is a Python dict literal; only the three keys NumPy writes
// ('descr', 'fortran_order', 'shape') are understood.
//
//===----------------------------------------------------------------------===//
#include "npy.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace kvq::npy;

uint16_t kvq::npy::floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u)
    return sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u);
  if (mag >= 0x477ff000u)
    return sign | 0x7c00u;
  uint32_t e = mag >> 23;
  if (e < 113) {
    if (e == 0)
      return sign;
    uint32_t m = (mag & 0x7fffffu) | 0x800000u, shift = 126 - e;
    if (shift > 24)
      return sign;
    uint32_t r = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (r & 1u)))
      ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ((e - 112) << 10) | ((mag & 0x7fffffu) >> 13), rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u)))
    ++r;
  return sign | static_cast<uint16_t>(r);
}

float kvq::npy::halfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

namespace {

/// Value text of `key` in the header dict, or "" when absent.
std::string field(const std::string &header, const std::string &key) {
  for (const char quote : {'\'', '"'}) {
    std::string k = std::string(1, quote) + key + quote;
    size_t at = header.find(k);
    if (at == std::string::npos)
      continue;
    at = header.find(':', at + k.size());
    if (at == std::string::npos)
      return "";
    ++at;
    while (at < header.size() && std::isspace(static_cast<unsigned char>(header[at])))
      ++at;
    size_t end = at;
    if (at < header.size() && header[at] == '(') {
      end = header.find(')', at);
      return end == std::string::npos ? "" : header.substr(at, end - at + 1);
    }
    if (at < header.size() && (header[at] == '\'' || header[at] == '"')) {
      end = header.find(header[at], at + 1);
      return end == std::string::npos ? "" : header.substr(at + 1, end - at - 1);
    }
    while (end < header.size() && header[end] != ',' && header[end] != '}')
      ++end;
    std::string v = header.substr(at, end - at);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back())))
      v.pop_back();
    return v;
  }
  return "";
}

bool parseShape(const std::string &text, std::vector<int64_t> &shape) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    return false;
  shape.clear();
  std::string body = text.substr(1, text.size() - 2);
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && (std::isspace(static_cast<unsigned char>(body[i])) || body[i] == ','))
      ++i;
    if (i >= body.size())
      break;
    if (!std::isdigit(static_cast<unsigned char>(body[i])))
      return false;
    int64_t v = 0;
    while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) {
      v = v * 10 + (body[i] - '0');
      if (v > (int64_t{1} << 40))
        return false;
      ++i;
    }
    shape.push_back(v);
  }
  return true;
}

} // namespace

bool kvq::npy::parse(const std::vector<uint8_t> &bytes, Array &out,
                     std::string &err) {
  static const uint8_t magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0) {
    err = "not a .npy file (bad magic)";
    return false;
  }
  const int major = bytes[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = bytes[8] | (size_t{bytes[9]} << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) {
      err = "truncated .npy header";
      return false;
    }
    headerLen = bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) |
                (size_t{bytes[11]} << 24);
    offset = 12;
  } else {
    err = "unsupported .npy format version " + std::to_string(major);
    return false;
  }
  if (bytes.size() < offset + headerLen) {
    err = "truncated .npy header";
    return false;
  }
  std::string header(bytes.begin() + offset, bytes.begin() + offset + headerLen);
  std::string descr = field(header, "descr");
  std::string fortran = field(header, "fortran_order");
  std::string shapeText = field(header, "shape");
  if (descr.empty() || fortran.empty() || shapeText.empty()) {
    err = "malformed .npy header (needs descr, fortran_order and shape)";
    return false;
  }
  if (fortran != "False") {
    err = "fortran_order arrays are not supported (save with C order)";
    return false;
  }
  if (descr.size() == 3 && descr[0] == '>') {
    err = "big-endian dtype '" + descr + "' is not supported";
    return false;
  }
  const bool isHalf = descr == "<f2" || descr == "|f2" || descr == "=f2";
  const bool isFloat = descr == "<f4" || descr == "=f4";
  if (!isHalf && !isFloat) {
    err = "dtype '" + descr + "' is not supported (use float16 or float32)";
    return false;
  }
  if (!parseShape(shapeText, out.shape)) {
    err = "malformed shape " + shapeText;
    return false;
  }
  int64_t count = 1;
  for (int64_t d : out.shape) {
    count *= d;
    if (count > (int64_t{1} << 40)) {
      err = "array too large";
      return false;
    }
  }
  const size_t elem = isHalf ? 2 : 4;
  const size_t dataStart = offset + headerLen;
  if (bytes.size() - dataStart < static_cast<size_t>(count) * elem) {
    err = "truncated data: " + std::to_string(count) + " elements need " +
          std::to_string(count * elem) + " bytes, file has " +
          std::to_string(bytes.size() - dataStart);
    return false;
  }
  out.wasHalf = isHalf;
  out.data.resize(static_cast<size_t>(count));
  const uint8_t *p = bytes.data() + dataStart;
  for (int64_t i = 0; i < count; ++i) {
    if (isHalf) {
      uint16_t h = static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8));
      out.data[static_cast<size_t>(i)] = halfToFloat(h);
    } else {
      uint32_t b = uint32_t{p[4 * i]} | (uint32_t{p[4 * i + 1]} << 8) |
                   (uint32_t{p[4 * i + 2]} << 16) | (uint32_t{p[4 * i + 3]} << 24);
      float f;
      std::memcpy(&f, &b, 4);
      out.data[static_cast<size_t>(i)] = f;
    }
  }
  return true;
}

bool kvq::npy::read(const std::string &path, Array &out, std::string &err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = "cannot open '" + path + "'";
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (!parse(bytes, out, err)) {
    err = path + ": " + err;
    return false;
  }
  return true;
}

bool kvq::npy::write(const std::string &path,
                     const std::vector<int64_t> &shape,
                     const std::vector<float> &data, bool asHalf,
                     std::string &err) {
  std::string dict = std::string("{'descr': '") + (asHalf ? "<f2" : "<f4") +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "") +
            (i + 1 < shape.size() ? " " : "");
  dict += "), }";
  // Pad with spaces so that the data starts on a 64-byte boundary.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    err = "cannot write '" + path + "'";
    return false;
  }
  const uint8_t head[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                          static_cast<uint8_t>(dict.size() & 0xff),
                          static_cast<uint8_t>(dict.size() >> 8)};
  out.write(reinterpret_cast<const char *>(head), sizeof(head));
  out << dict;
  for (float f : data) {
    if (asHalf) {
      uint16_t h = floatToHalf(f);
      const char b[2] = {static_cast<char>(h & 0xff), static_cast<char>(h >> 8)};
      out.write(b, 2);
    } else {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const char b[4] = {static_cast<char>(u & 0xff), static_cast<char>((u >> 8) & 0xff),
                         static_cast<char>((u >> 16) & 0xff), static_cast<char>(u >> 24)};
      out.write(b, 4);
    }
  }
  if (!out) {
    err = "write to '" + path + "' failed";
    return false;
  }
  return true;
}
