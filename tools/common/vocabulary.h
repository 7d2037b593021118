//===- vocabulary.h - The flags every kvq tool spells alike -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One vocabulary for the ideas several tools share (docs/CLI.md is its
// reference):
//   - kFlags: each shared flag's one spelling, and the spellings tools used
//     before, which keep working with a deprecation warning on stderr
//     (renameDeprecatedFlags, run on argv before any parsing);
//   - parseMethodSpecs: the method spec `kivi`, `kivi{bits=2}`,
//     `kvquant{bits=3 refit-interval=0}` (keys are the configuration
//     passes' options; items separated by spaces or commas), where an
//     empty key or value is an error naming the flag, never a default.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_VOCABULARY_H
#define KVQ_TOOLS_COMMON_VOCABULARY_H

#include "flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace kvq::cli {

/// A shared flag: its spelling, the former spellings still accepted (with a
/// warning) and what it means.
struct SharedFlag {
  const char *name;
  std::vector<const char *> deprecated;
  const char *meaning;
};

/// The vocabulary. A tool takes the subset that applies to it, spelled as
/// here; docs/CLI.md lists the same table.
inline const std::vector<SharedFlag> &sharedFlags() {
  static const std::vector<SharedFlag> flags = {
      {"--method", {}, "method specs: a comma list of method[{key=value ...}]"},
      {"--bits", {}, "code width of keys and values (2, 3, 4 or 8)"},
      {"--group-size", {}, "KIVI group size G"},
      {"--residual-length", {"--residual"}, "KIVI fp16 residual window R"},
      {"--sinks", {}, "kivi_sink: tokens kept fp16 (n_sink_tokens)"},
      {"--prefill", {"--prompt-tokens", "--prefill-tokens"},
       "tokens sent as one prefill update before decoding"},
      {"--contexts", {"--tokens"}, "context lengths (a comma list)"},
      {"--threads", {}, "host threads"},
      {"--json", {}, "machine-readable output (JSON) on stdout"},
      {"--seed", {}, "seed of any random choice"},
      {"--quiet", {}, "no progress lines on stderr (progress.h)"},
  };
  return flags;
}

/// The ranges of the shared numeric method flags, which take comma lists
/// (parseIntList): kvq-eval and kvq-run read them alike. The runtime and
/// the configuration passes then check each value against the method and
/// the model (a code width of 2, 3, 4 or 8; a group size dividing head_dim).
constexpr long long kBitsMin = 1, kBitsMax = 16;
constexpr long long kGroupSizeMin = 1, kGroupSizeMax = 1 << 16;
constexpr long long kSinksMin = 0, kSinksMax = 1 << 16;

/// --bits LIST: code widths, each in [kBitsMin, kBitsMax].
inline std::vector<long long> parseBits(const char *tool,
                                        const std::string &list) {
  return parseIntList(tool, "--bits", list, kBitsMin, kBitsMax);
}

/// Rewrites argv in place (argv[i] may point into `storage` afterwards):
/// a deprecated spelling (`--old` or `--old=value`) becomes the shared
/// one, with "TOOL: warning: --old is deprecated; use --new" on stderr.
/// Only the spellings in `accepted` are rewritten (each tool's own former
/// flags), so a flag another tool used to take stays unknown here.
inline void renameDeprecatedFlags(const char *tool, int argc, char **argv,
                                  const std::vector<const char *> &accepted,
                                  std::vector<std::string> &storage) {
  storage.reserve(argc);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--")
      break;
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    for (const char *old : accepted) {
      if (name != old)
        continue;
      for (const SharedFlag &f : sharedFlags())
        for (const char *d : f.deprecated)
          if (name == d) {
            std::fprintf(stderr, "%s: warning: %s is deprecated; use %s\n",
                         tool, d, f.name);
            storage.push_back(f.name + (eq == std::string::npos
                                            ? std::string()
                                            : arg.substr(eq)));
            argv[i] = storage.back().data();
          }
    }
  }
}

/// Removes every `--name value` / `--name=value` from argv (argc shrinks)
/// and returns the last value, or "" when absent. For a shared flag whose
/// name a library linked into an llvm::cl tool already registers (LLVM's
/// hidden --threads), so the tool reads it under the shared rules instead.
/// A missing or empty value is an error naming the flag.
inline std::string takeFlag(const char *tool, int &argc, char **argv,
                            const std::string &name) {
  std::string value;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == name || arg.rfind(name + "=", 0) == 0) {
      if (arg == name) {
        if (i + 1 >= argc)
          fail(tool, name + " needs a value");
        value = argv[++i];
      } else {
        value = arg.substr(name.size() + 1);
      }
      if (value.empty())
        fail(tool, name + " has an empty value");
      continue;
    }
    argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  return value;
}

/// One method spec: `kivi` or `kivi{bits=2 group-size=16}`.
struct MethodSpec {
  std::string label;  // as written
  std::string method; // fp16, kivi, kivi_sink, kvquant (or a tool's extra)
  std::vector<std::pair<std::string, std::string>> options; // key, value
  /// The options as the configuration passes take them ("k=v k=v").
  std::string passOptions() const {
    std::string s;
    for (const auto &[k, v] : options)
      s += (s.empty() ? "" : " ") + k + "=" + v;
    return s;
  }
};

/// Parses a comma list of method specs for `flag`. `methods` lists the
/// accepted method names. Errors (returned, empty on success) name the
/// flag: an empty list or item, an unknown method, an unclosed brace, an
/// option without '=', with an empty key or an empty value, or given twice.
inline std::string parseMethodSpecs(const std::string &flag,
                                    const std::string &list,
                                    const std::vector<std::string> &methods,
                                    std::vector<MethodSpec> &out) {
  out.clear();
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char ch : list) {
    if (ch == '{' && ++depth > 1)
      return flag + ": nested '{' in '" + printable(list, 80) + "'";
    if (ch == '}' && --depth < 0)
      return flag + ": '}' without '{' in '" + printable(list, 80) + "'";
    if (ch == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
      continue;
    }
    item += ch;
  }
  items.push_back(item);
  if (depth != 0)
    return flag + ": '" + printable(item, 80) + "' has an unclosed '{'";
  for (const std::string &it : items) {
    if (it.empty())
      return flag + ": empty method in '" + printable(list, 80) + "'";
    MethodSpec m;
    m.label = it;
    size_t brace = it.find('{');
    m.method = it.substr(0, brace);
    bool known = false;
    std::string names;
    for (const std::string &name : methods) {
      known = known || name == m.method;
      names += (names.empty() ? "" : ", ") + name;
    }
    if (!known)
      return flag + ": unknown method '" + printable(m.method, 40) +
             "'; expected " + names;
    if (brace != std::string::npos) {
      if (it.back() != '}')
        return flag + ": '" + printable(it, 80) +
               "' has text after its closing '}'";
      std::string body = it.substr(brace + 1, it.size() - brace - 2);
      std::string opt;
      auto take = [&]() -> std::string {
        if (opt.empty())
          return "";
        size_t eq = opt.find('=');
        std::string key = opt.substr(0, eq);
        std::string where = " in '" + printable(it, 80) + "'";
        if (eq == std::string::npos)
          return flag + ": option '" + printable(opt, 40) +
                 "' has no value (write " + printable(opt, 40) + "=VALUE)" +
                 where;
        std::string value = opt.substr(eq + 1);
        if (key.empty())
          return flag + ": option '=" + printable(value, 40) +
                 "' has no name" + where;
        if (value.empty())
          return flag + ": option '" + printable(key, 40) +
                 "' has an empty value" + where;
        for (const auto &[k, v] : m.options)
          if (k == key)
            return flag + ": option '" + printable(key, 40) +
                   "' is given twice" + where;
        m.options.push_back({key, value});
        opt.clear();
        return "";
      };
      for (char ch : body) {
        if (ch == ' ' || ch == ',') {
          if (std::string e = take(); !e.empty())
            return e;
          continue;
        }
        opt += ch;
      }
      if (std::string e = take(); !e.empty())
        return e;
      if (m.options.empty())
        return flag + ": '" + printable(it, 80) +
               "' has empty braces (leave them out, or give key=value)";
    }
    out.push_back(std::move(m));
  }
  return "";
}

/// A numeric option of a method spec (`kvquant{outlier-fraction=0.05}`) and
/// the range a tool accepts before the configuration passes see it: the
/// ranges of the flags of the same names (kvq-eval's sweeps read them
/// from here; kvq-run's --bits, --group-size, --sinks), so that a
/// value is never rounded into something else on the way (1e300 is not an
/// infinite outlier fraction, 2^64 + 2 bits are not 2). The passes and the
/// runtime then apply their own rules (docs/RUNTIME.md, "Limits").
struct NumericOption {
  const char *key;
  bool integer;
  double lo, hi;
  bool hiOpen; // [lo, hi) rather than [lo, hi]
};

inline const std::vector<NumericOption> &numericMethodOptions() {
  static const std::vector<NumericOption> table = {
      {"bits", true, double(kBitsMin), double(kBitsMax), false},
      {"key-bits", true, double(kBitsMin), double(kBitsMax), false},
      {"value-bits", true, double(kBitsMin), double(kBitsMax), false},
      {"group-size", true, double(kGroupSizeMin), double(kGroupSizeMax), false},
      {"residual-length", true, 0, double(1 << 30), false},
      {"sinks", true, double(kSinksMin), double(kSinksMax), false},
      {"outlier-fraction", false, 0, 1, true},
      {"lloyd-iters", true, 0, 100, false},
      {"refit-interval", true, 0, double(1 << 30), false},
      {"kvquant-sinks", true, 0, double(1 << 16), false},
      {"kvquant-group-size", true, 1, double(1 << 16), false},
  };
  return table;
}

/// A fraction the runtime keeps in an f32 (kvq_config.outlier_fraction)
/// that is not 0 but becomes 0 there.
inline bool f32Underflows(double x) {
  return x != 0 && static_cast<float>(x) == 0.0f;
}

/// The entry of numericMethodOptions() for `key` (which must be there).
inline const NumericOption &numericOption(const std::string &key) {
  for (const NumericOption &o : numericMethodOptions())
    if (key == o.key)
      return o;
  std::fprintf(stderr, "kvq: no numeric method option '%s'\n", key.c_str());
  std::abort();
}

/// Checks the numeric options of `specs` (numericMethodOptions) and those
/// that name a choice (residual-mode, pre-rope); returns "" or one message
/// naming `flag`, the option, its range or choices, the value and the
/// spec. Other keys are left to the pass.
inline std::string checkMethodOptions(const std::string &flag,
                                      const std::vector<MethodSpec> &specs) {
  // The options that name a choice.
  static const std::vector<std::pair<const char *, std::vector<const char *>>>
      choices = {{"residual-mode", {"sliding", "block"}},
                 {"pre-rope", {"true", "false"}}};
  for (const MethodSpec &m : specs)
    for (const auto &[key, value] : m.options)
      for (const auto &[name, allowed] : choices) {
        if (key != name)
          continue;
        std::string list;
        bool ok = false;
        for (size_t i = 0; i < allowed.size(); ++i) {
          ok = ok || value == allowed[i];
          list += std::string(i == 0 ? "" : " or ") + allowed[i];
        }
        if (!ok)
          return flag + ": option '" + key + "' expects " + list + ", got '" +
                 printable(value, 40) + "' in '" + printable(m.label, 80) +
                 "'";
      }
  for (const MethodSpec &m : specs)
    for (const auto &[key, value] : m.options)
      for (const NumericOption &o : numericMethodOptions()) {
        if (key != o.key)
          continue;
        bool ok = false;
        double x = 0;
        if (o.integer) {
          size_t start = value[0] == '-' ? 1 : 0;
          ok = value.size() > start && value.size() <= 19 &&
               value.find_first_not_of("0123456789", start) ==
                   std::string::npos;
          if (ok) {
            errno = 0;
            long long v = std::strtoll(value.c_str(), nullptr, 10);
            ok = errno == 0;
            x = double(v);
          }
        } else {
          char *end = nullptr;
          errno = 0;
          x = std::strtod(value.c_str(), &end);
          ok = end && *end == 0 && errno == 0 && std::isfinite(x);
        }
        ok = ok && x >= o.lo && (o.hiOpen ? x < o.hi : x <= o.hi);
        if (ok && !o.integer && f32Underflows(x))
          return flag + ": option '" + key + "' is " + printable(value, 40) +
                 ", which the runtime's f32 holds as 0 (give 0, or at least " +
                 "1.4e-45) in '" + printable(m.label, 80) + "'";
        if (ok)
          continue;
        char range[96];
        std::snprintf(range, sizeof(range), "[%.0f, %.0f%s", o.lo, o.hi,
                      o.hiOpen ? ")" : "]");
        if (!o.integer)
          std::snprintf(range, sizeof(range), "[%g, %g%s", o.lo, o.hi,
                        o.hiOpen ? ")" : "]");
        return flag + ": option '" + key + "' expects " +
               (o.integer ? "an integer" : "a number") + " in " + range +
               ", got '" + printable(value, 40) + "' in '" +
               printable(m.label, 80) + "'";
      }
  return "";
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_VOCABULARY_H
