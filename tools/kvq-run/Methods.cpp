//===- Methods.cpp - kvq-run: the methods a run compiles with -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Methods.h"
#include "tools/kvq-run/Common.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace kvq::run {

namespace {

/// The --method specs (tools/common/vocabulary.h): `none` (the graph's own
/// f32 tensors) and the cache methods, each optionally with pass options.
std::vector<MethodSpec> parseMethods(const std::string &list,
                                     std::string *error) {
  std::vector<MethodSpec> out;
  *error = kvq::cli::parseMethodSpecs(
      "--method", list, {"none", "fp16", "kivi", "kivi_sink", "kvquant"}, out);
  if (!error->empty())
    return {};
  for (const MethodSpec &m : out)
    if (m.method == "none" && !m.options.empty())
      return *error = "--method: 'none' takes no options",
             std::vector<MethodSpec>{};
  *error = kvq::cli::checkMethodOptions("--method", out);
  if (!error->empty())
    return {};
  return out;
}

/// Each spec once per value of every method flag that applies to it: a
/// flag applies to the methods that read it (bits: the quantized ones;
/// group-size: kivi, kivi_sink; sinks: kivi_sink) and only to the specs
/// that do not set it themselves. A spec that becomes several is labelled
/// with the options the flags added ("kivi{bits=2}", "kivi{group-size=8
/// bits=2}"). A flag that no listed method reads is a warning on stderr.
std::vector<MethodSpec> expandSpecs(const std::vector<MethodSpec> &specs,
                                    const MethodFlags &flags) {
  struct Axis {
    std::string flag, key;
    const std::vector<long long> *values;
    std::vector<std::string> methods, ownKeys;
  };
  std::vector<Axis> axes;
  for (size_t i = 0; i < listFlags().size(); ++i) {
    const ListFlag &f = listFlags()[i];
    axes.push_back({std::string("--") + f.name, f.name, &flags.values[i],
                    f.methods, f.ownKeys});
  }
  for (const Axis &a : axes) {
    if (a.values->empty())
      continue;
    std::string ignored;
    for (const MethodSpec &m : specs)
      if (m.method != "none" && m.method != "fp16" &&
          std::find(a.methods.begin(), a.methods.end(), m.method) ==
              a.methods.end())
        ignored += (ignored.empty() ? "" : ", ") + m.label;
    if (ignored.empty())
      continue;
    std::string users;
    for (const std::string &u : a.methods)
      users += (users.empty() ? "" : ", ") + u;
    llvm::errs() << "kvq-run: warning: " << a.flag << " does not apply to "
                 << ignored << " (only to " << users << "): ignored there\n";
  }
  std::vector<MethodSpec> out;
  for (const MethodSpec &m : specs) {
    std::vector<std::vector<std::pair<std::string, std::string>>> variants = {
        {}};
    for (const Axis &a : axes) {
      bool reads = std::find(a.methods.begin(), a.methods.end(), m.method) !=
                   a.methods.end();
      bool own = false;
      for (const auto &[key, value] : m.options)
        own = own || std::find(a.ownKeys.begin(), a.ownKeys.end(), key) !=
                         a.ownKeys.end();
      if (!reads || own || a.values->empty())
        continue;
      std::vector<std::vector<std::pair<std::string, std::string>>> next;
      for (const auto &v : variants)
        for (long long x : *a.values) {
          next.push_back(v);
          next.back().push_back({a.key, std::to_string(x)});
        }
      variants = std::move(next);
    }
    for (const auto &added : variants) {
      MethodSpec e = m;
      e.options.insert(e.options.end(), added.begin(), added.end());
      if (variants.size() > 1) {
        std::string extra;
        for (const auto &[k, v] : added)
          extra += (extra.empty() ? "" : " ") + k + "=" + v;
        e.label =
            m.label.back() == '}'
                ? m.label.substr(0, m.label.size() - 1) + " " + extra + "}"
                : m.label + "{" + extra + "}";
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

} // namespace

std::optional<std::vector<MethodSpec>> planMethods(const Options &opt) {
  std::string error;
  std::vector<MethodSpec> specs = parseMethods(opt.methods, &error);
  if (specs.empty()) {
    fail(error.empty() ? "--method is empty" : error);
    return std::nullopt;
  }
  return expandSpecs(specs, opt.methodFlags);
}

std::string passOptionsFor(const MethodSpec &m) {
  if (m.method == "none")
    return "";
  std::string s = "method=" + m.method;
  std::string extra = m.passOptions();
  if (!extra.empty())
    s += " " + extra;
  return s;
}

} // namespace kvq::run
