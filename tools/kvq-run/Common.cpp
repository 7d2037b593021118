//===- Common.cpp - What every step of kvq-run shares ---------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Common.h"

#include "llvm/Support/raw_ostream.h"

namespace kvq::run {

int fail(const std::string &message) {
  std::string line = message;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' '))
    line.pop_back();
  for (char &c : line)
    if (c == '\n' || c == '\r')
      c = ' ';
  llvm::errs() << "kvq-run: error: " << line << "\n";
  return kFailed;
}

} // namespace kvq::run
