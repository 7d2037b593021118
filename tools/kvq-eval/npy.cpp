//===- npy.cpp - Minimal NumPy .npy reader and writer ---------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reading goes through tensor_io (the hardened parser); this file keeps the
// binary16 conversions and the simple writer the tests use.
//
//===----------------------------------------------------------------------===//
#include "npy.h"

#include "flags.h"
#include "tensor_io.h"

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
    uint32_t r = m >> shift, rest = m & ((1u << shift) - 1),
             half = 1u << (shift - 1);
    if (rest > half || (rest == half && (r & 1u)))
      ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ((e - 112) << 10) | ((mag & 0x7fffffu) >> 13),
           rest = mag & 0x1fffu;
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

bool kvq::npy::parse(const std::vector<uint8_t> &bytes, Array &out,
                     std::string &err) {
  kvq::tio::MemorySource src(bytes.data(), bytes.size());
  kvq::tio::Entry e;
  if (!kvq::tio::parseNpy(src, 0, src.size(), e, err) ||
      !kvq::tio::readData(src, e, out.data, err))
    return false;
  out.shape = e.shape;
  out.wasHalf = e.dtype == kvq::tio::DType::F16;
  return true;
}

bool kvq::npy::read(const std::string &path, Array &out, std::string &err) {
  kvq::tio::FileSource src;
  if (!src.open(path, err))
    return false;
  kvq::tio::Entry e;
  if (!kvq::tio::parseNpy(src, 0, src.size(), e, err) ||
      !kvq::tio::readData(src, e, out.data, err)) {
    err = kvq::cli::printable(path) + ": " + err;
    return false;
  }
  out.shape = e.shape;
  out.wasHalf = e.dtype == kvq::tio::DType::F16;
  return true;
}

bool kvq::npy::write(const std::string &path, const std::vector<int64_t> &shape,
                     const std::vector<float> &data, bool asHalf,
                     std::string &err) {
  std::string dict = std::string("{'descr': '") + (asHalf ? "<f2" : "<f4") +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) +
            (shape.size() == 1 || i + 1 < shape.size() ? "," : "") +
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
  const uint8_t head[] = {0x93,
                          'N',
                          'U',
                          'M',
                          'P',
                          'Y',
                          1,
                          0,
                          static_cast<uint8_t>(dict.size() & 0xff),
                          static_cast<uint8_t>(dict.size() >> 8)};
  out.write(reinterpret_cast<const char *>(head), sizeof(head));
  out << dict;
  for (float f : data) {
    if (asHalf) {
      uint16_t h = floatToHalf(f);
      const char b[2] = {static_cast<char>(h & 0xff),
                         static_cast<char>(h >> 8)};
      out.write(b, 2);
    } else {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const char b[4] = {
          static_cast<char>(u & 0xff), static_cast<char>((u >> 8) & 0xff),
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
