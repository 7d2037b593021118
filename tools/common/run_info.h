//===- run_info.h - Where and when a measurement ran ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The context every timing report carries (kvq-bench --json, kvq-run
// --bench --json), so a figure can be traced to its build and machine:
//   "version"       what --version prints (version.h: the release plus
//                   +g<commit> of the checkout built);
//   "commit"        the commit part of it (null outside a git checkout);
//   "load_average"  the one-minute load average at the start and the end
//                   of the run (-1: unknown): a shared machine's other work
//                   moves every figure;
//   "machine"       the CPU model, the CPUs online, and the date of the
//                   start of the run (UTC, ISO 8601).
// The kernel table the runtime chose (the ISA level) is the tool's own key
// ("kernels" in kvq-bench), where the tool can see it.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_RUN_INFO_H
#define KVQ_TOOLS_COMMON_RUN_INFO_H

#include "json_number.h"
#include "version.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unistd.h>

namespace kvq::cli {

/// The CPU's model name (/proc/cpuinfo), or "unknown", with the x86 family
/// and model numbers where the kernel gives them: a name such as "AMD EPYC"
/// alone does not tell a Zen 3 (no AVX-512) from a Zen 5.
inline std::string cpuModel() {
  FILE *f = std::fopen("/proc/cpuinfo", "r");
  if (!f)
    return "unknown";
  auto value = [](const char *line) {
    const char *colon = std::strchr(line, ':');
    std::string v = colon ? colon + 1 : "";
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t\n") + 1);
    return v;
  };
  char line[512];
  std::string model = "unknown", family, number;
  // The first of each (every processor repeats them; arm64 may give its
  // "Model" after the processors).
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, "model name", 10) == 0 ||
        std::strncmp(line, "Model", 5) == 0) {
      if (model == "unknown")
        model = value(line);
    } else if (std::strncmp(line, "cpu family", 10) == 0) {
      if (family.empty())
        family = value(line);
    } else if (std::strncmp(line, "model", 5) == 0 &&
               std::isspace(static_cast<unsigned char>(line[5]))) {
      if (number.empty())
        number = value(line);
    }
  }
  std::fclose(f);
  if (!family.empty() && !number.empty())
    model += " (family " + family + ", model " + number + ")";
  return model;
}

/// The current UTC time, ISO 8601.
inline std::string utcNow() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

/// The one-minute load average, or -1 when the system does not say.
inline double loadAverage() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

/// The commit in a version string "X.Y.Z+g<commit>", or "" when it has none.
inline std::string commitOf(const std::string &version) {
  const size_t at = version.find("+g");
  return at == std::string::npos ? "" : version.substr(at + 2);
}

/// Taken at the start of a run (start()) and completed at its end
/// (finish()).
struct RunInfo {
  std::string version = cli::versionString();
  std::string cpu, date;
  long cores = -1; ///< CPUs online (-1: unknown)
  double loadStart = -1, loadEnd = -1;

  static RunInfo start() {
    RunInfo i;
    i.loadStart = loadAverage();
    i.cpu = cpuModel();
    i.cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    i.date = utcNow();
    return i;
  }
  void finish() { loadEnd = loadAverage(); }

  /// Adds "version", "commit", "load_average" and "machine" to `doc`.
  void addTo(nlohmann::ordered_json &doc) const {
    doc["version"] = version;
    const std::string commit = commitOf(version);
    doc["commit"] = commit.empty() ? nlohmann::ordered_json()
                                   : nlohmann::ordered_json(commit);
    doc["load_average"] = {{"start", fixed(loadStart, 2)},
                           {"end", fixed(loadEnd, 2)}};
    doc["machine"] = {{"cpu", cpu}, {"cores", cores}, {"date", date}};
  }
};

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_RUN_INFO_H
