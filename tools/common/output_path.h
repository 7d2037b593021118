//===- output_path.h - Whether a tool may write a file there ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Tools that write a file after a long run (kvq-eval --plot and --save,
// kvq-run --dump-kv) check the path first, without creating or truncating
// anything: a failed or interrupted run leaves what was there alone.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_OUTPUT_PATH_H
#define KVQ_TOOLS_COMMON_OUTPUT_PATH_H

#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace kvq::cli {

/// "" when a file can be written at `path`, else why not: its directory
/// must exist and take new files, and anything already there must be a
/// writable non-directory.
inline std::string whyNotWritable(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return "it is a directory";
    return access(path.c_str(), W_OK) == 0 ? "" : "it is not writable";
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  return access(dir.c_str(), W_OK | X_OK) == 0
             ? ""
             : "its directory does not exist or is not writable";
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_OUTPUT_PATH_H
