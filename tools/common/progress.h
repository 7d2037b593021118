//===- progress.h - Progress lines of the tools' long work ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One line on stderr per finished step of long work (a kvq-bench figure,
// a kvq-run compile, prefill or perplexity document), with the seconds
// since the run began: "TOOL: [  12.3 s] what finished". Only for a person
// watching: nothing is printed when stderr is not a terminal (a pipe, a
// file, a test) or with --quiet, so scripted output never changes.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_PROGRESS_H
#define KVQ_TOOLS_COMMON_PROGRESS_H

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <unistd.h>

namespace kvq::cli {

class Progress {
public:
  /// Off until enabled.
  Progress() = default;
  /// On when stderr is a terminal and not `quiet`.
  Progress(const char *tool, bool quiet)
      : tool_(tool), on_(!quiet && ::isatty(2)) {}

  bool on() const { return on_; }

  /// One line, printf-style (no trailing newline in `fmt`).
  __attribute__((format(printf, 2, 3))) void
  operator()(const char *fmt, ...) const {
    if (!on_)
      return;
    const double s =
        std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, "%s: [%6.1f s] ", tool_, s);
    va_list args;
    va_start(args, fmt);
    std::vfprintf(stderr, fmt, args);
    va_end(args);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }

private:
  using Clock = std::chrono::steady_clock;
  const char *tool_ = "";
  bool on_ = false;
  Clock::time_point start_ = Clock::now();
};

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_PROGRESS_H
