//===- version.h - the kvq version the tools print ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// KVQ_VERSION_STRING (the release plus +g<commit>, set in the top-level
// CMakeLists.txt, which is configured again when the checkout's HEAD
// moves) is compiled into version.cpp alone: a new commit rebuilds one file,
// not every tool.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_VERSION_H
#define KVQ_TOOLS_COMMON_VERSION_H

namespace kvq::cli {

/// What every tool's --version prints and its JSON records.
const char *versionString();

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_VERSION_H
