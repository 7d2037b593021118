//===- Common.h - What every step of kvq-run shares -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The one-line error and the exit status of a failed run. Steps return
// that status rather than exit, so that what main() holds (the random
// checkpoint's scratch file, the thread pool) is released on every path.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_COMMON_H
#define KVQ_TOOLS_KVQ_RUN_COMMON_H

#include <string>

namespace kvq::run {

/// The exit status of any error.
inline constexpr int kFailed = 2;

/// "kvq-run: error: MESSAGE" on stderr as one line, as every kvq tool's
/// errors (tools/common/flags.h); returns kFailed.
int fail(const std::string &message);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_COMMON_H
