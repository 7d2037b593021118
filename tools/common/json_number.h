//===- json_number.h - Numbers in the tools' JSON reports -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The JSON reports (kvq-bench --json, kvq-run --bench --json) give each
// measured figure to a fixed number of decimals: more would only be noise.
// fixed() rounds a double exactly as printf's "%.Nf" does, so the JSON
// library prints that decimal (its shortest round-trip form; trailing
// zeros dropped); significant() does the same for "%.Ng". A value that is
// not finite stays so and prints as null.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_JSON_NUMBER_H
#define KVQ_TOOLS_COMMON_JSON_NUMBER_H

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvq::cli {

/// x as printf prints it with `format` (one "%.*" conversion), read back.
inline double asPrinted(double x, const char *format, int precision) {
  if (!std::isfinite(x))
    return x;
  char buf[512];
  std::snprintf(buf, sizeof(buf), format, precision, x);
  return std::strtod(buf, nullptr);
}

/// x rounded to `decimals` decimals, as "%.*f" prints it.
inline double fixed(double x, int decimals) {
  return asPrinted(x, "%.*f", decimals);
}

/// x rounded to `digits` significant digits, as "%.*g" prints it.
inline double significant(double x, int digits) {
  return asPrinted(x, "%.*g", digits);
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_JSON_NUMBER_H
