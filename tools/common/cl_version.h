//===- cl_version.h ---------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --version of the kvq tools built on llvm::cl.
//
// kvq-opt, kvq-import and kvq-run print the kvq version (KVQ_VERSION_STRING,
// set once in the top-level CMakeLists.txt) and the MLIR/LLVM release they
// are built against. Call before the command line is parsed.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_CL_VERSION_H
#define KVQ_TOOLS_COMMON_CL_VERSION_H

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace kvq::cli {

inline void setVersionPrinter(std::string tool) {
  llvm::cl::SetVersionPrinter([tool](llvm::raw_ostream &os) {
    os << tool << " (kvq) " << KVQ_VERSION_STRING << "\n"
       << "  MLIR/LLVM " << LLVM_VERSION_STRING << "\n";
  });
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_CL_VERSION_H
