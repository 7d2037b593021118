//===- cl_version.h ---------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --version and command-line errors of the kvq tools built on llvm::cl.
//
// kvq-opt, kvq-import and kvq-run print the kvq version (version.h) and
// the MLIR/LLVM release they
// are built against. Call before the command line is parsed.
// kvq-import and kvq-run parse with parseCommandLine, which keeps the rules
// of flags.h for a bad command line (one line, exit status 2).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_CL_VERSION_H
#define KVQ_TOOLS_COMMON_CL_VERSION_H

#include "flags.h"
#include "version.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <string>
#include <string_view>
#include <unistd.h>

namespace kvq::cli {

inline void setVersionPrinter(std::string tool) {
  llvm::cl::SetVersionPrinter([tool](llvm::raw_ostream &os) {
    os << tool << " (kvq) " << versionString() << "\n"
       << "  MLIR/LLVM " << LLVM_VERSION_STRING << "\n";
  });
}

/// cl::ParseCommandLineOptions under the rules every kvq tool shares
/// (flags.h): --flag value and --flag=value (llvm::cl accepts both), and a
/// bad command line -- an unknown flag, a missing value, a bad number --
/// is one line "TOOL: message" on stderr and exit status 2 (llvm::cl alone
/// prints several lines and exits 1).
inline void parseCommandLine(const char *tool, int argc, char **argv,
                             const char *overview) {
  // Some llvm::cl errors (a bad or missing value) go straight to stderr,
  // not to the stream passed in: stderr is captured while parsing.
  std::string errors;
  llvm::raw_string_ostream os(errors);
  std::fflush(stderr);
  FILE *capture = std::tmpfile();
  const int saved = capture ? ::dup(2) : -1;
  if (saved >= 0)
    ::dup2(::fileno(capture), 2);
  const bool ok = llvm::cl::ParseCommandLineOptions(argc, argv, overview, &os);
  if (saved >= 0) {
    llvm::errs().flush();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::rewind(capture);
    std::string direct;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), capture)) > 0;)
      direct.append(buf, n);
    errors = direct + errors;
  }
  if (capture)
    std::fclose(capture);
  if (ok) {
    std::fputs(errors.c_str(), stderr); // warnings, if any, as they were
    return;
  }
  os.flush();
  // llvm::cl starts each line with "PROGRAM: "; the lines become one.
  std::string line;
  size_t start = 0;
  while (start < errors.size()) {
    size_t end = errors.find('\n', start);
    if (end == std::string::npos)
      end = errors.size();
    std::string_view l(errors.data() + start, end - start);
    start = end + 1;
    const size_t colon = l.find(": ");
    if (colon != std::string_view::npos &&
        l.substr(0, colon).find(' ') == std::string_view::npos)
      l.remove_prefix(colon + 2);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\r'))
      l.remove_suffix(1);
    if (!l.empty())
      line += (line.empty() ? "" : " ") + std::string(l);
  }
  fail(tool, printable(line.empty() ? "bad command line" : line, 400));
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_CL_VERSION_H
