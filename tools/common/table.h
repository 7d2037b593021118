//===- table.h - Text tables of the kvq tools -------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The first column of a printed table (a method label such as
// `kvquant{refit-interval=0 pre-rope=true}`) is as wide as its longest
// entry, so the columns after it line up whatever labels a run was given.
// Print it with "%-*s" and this width.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_TABLE_H
#define KVQ_TOOLS_COMMON_TABLE_H

#include <algorithm>
#include <string>

namespace kvq::cli {

/// The width of a first column headed `header` holding label(row) for each
/// of `rows`.
template <class Rows, class Label>
int labelColumnWidth(const std::string &header, const Rows &rows,
                     Label label) {
  size_t width = header.size();
  for (const auto &row : rows)
    width = std::max(width, std::string(label(row)).size());
  return static_cast<int>(width);
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_TABLE_H
