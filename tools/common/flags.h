//===- flags.h - Command-line rules shared by every kvq tool ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One set of rules for kvq-eval and kvq-bench (and any tool that includes
// this):
//   --flag value  and  --flag=value   are the same;
//   a flag without a value (--json) refuses --json=...;
//   integers are decimal digits only, range-checked as 64-bit values before
//   they are narrowed, so --bits 4294967298 is an error, never 2 bits;
//   every problem is one line "TOOL: message" on stderr and exit status 2,
//   with bytes that are not printable ASCII escaped.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_FLAGS_H
#define KVQ_TOOLS_COMMON_FLAGS_H

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace kvq::cli {

/// `s` with every byte outside printable ASCII as \xNN (and \\ for a
/// backslash), cut to `limit` bytes of input with "..." after: safe to put
/// in a one-line message whatever a file or an argument contained.
inline std::string printable(const std::string &s, size_t limit = 200) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\')
      out += "\\\\";
    else if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > limit)
    out += "...";
  return out;
}

/// Print "TOOL: msg" (one line) and exit with status 2.
[[noreturn]] inline void fail(const char *tool, const std::string &msg) {
  std::string line = msg;
  for (char &c : line)
    if (c == '\n' || c == '\r')
      c = ' ';
  std::fprintf(stderr, "%s: %s\n", tool, line.c_str());
  std::exit(2);
}

/// Decimal integer in [lo, hi], else fail() naming the flag and the range.
inline long long parseInt(const char *tool, const std::string &flag,
                          const std::string &text, long long lo, long long hi) {
  bool digits = !text.empty() && text.size() <= 19;
  size_t start = (!text.empty() && text[0] == '-') ? 1 : 0;
  if (start == text.size())
    digits = false;
  for (size_t i = start; digits && i < text.size(); ++i)
    digits = text[i] >= '0' && text[i] <= '9';
  long long x = 0;
  if (digits) {
    errno = 0;
    char *end = nullptr;
    x = std::strtoll(text.c_str(), &end, 10);
    digits = errno == 0 && end && *end == 0;
  }
  if (!digits || x < lo || x > hi)
    fail(tool, flag + " expects an integer in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "], got '" + printable(text, 40) + "'");
  return x;
}

/// Finite number in [lo, hi) (hiOpen) or [lo, hi]; (lo, ...] with loOpen.
inline double parseDouble(const char *tool, const std::string &flag,
                          const std::string &text, double lo, double hi,
                          bool hiOpen, bool loOpen = false) {
  char *end = nullptr;
  errno = 0;
  double x = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  bool ok = !text.empty() && end && *end == 0 && errno == 0 &&
            std::isfinite(x) && (loOpen ? x > lo : x >= lo) &&
            (hiOpen ? x < hi : x <= hi);
  if (!ok) {
    char range[96];
    std::snprintf(range, sizeof(range), "%s%g, %g%s", loOpen ? "(" : "[", lo,
                  hi, hiOpen ? ")" : "]");
    fail(tool, flag + " expects a number in " + range + ", got '" +
                   printable(text, 40) + "'");
  }
  return x;
}

/// "a,b,c" -> {"a", "b", "c"}; an empty item is an error.
inline std::vector<std::string>
splitList(const char *tool, const std::string &flag, const std::string &s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    size_t j = s.find(',', i);
    std::string item =
        s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (item.empty())
      fail(tool, flag + " has an empty item in '" + printable(s, 80) + "'");
    out.push_back(item);
    if (j == std::string::npos)
      break;
    i = j + 1;
  }
  return out;
}

/// "a,b,c" of decimal integers, each in [lo, hi] (parseInt's rule and
/// error), a value given twice kept once, in the order given.
inline std::vector<long long> parseIntList(const char *tool,
                                           const std::string &flag,
                                           const std::string &s, long long lo,
                                           long long hi) {
  std::vector<long long> out;
  for (const std::string &item : splitList(tool, flag, s)) {
    long long x = parseInt(tool, flag, item, lo, hi);
    bool seen = false;
    for (long long y : out)
      seen = seen || y == x;
    if (!seen)
      out.push_back(x);
  }
  return out;
}

/// Walks argv. Typical use:
///   kvq::cli::Parser p("kvq-eval", argc, argv);
///   while (p.next()) {
///     if (p.is("--keys")) keys = p.value();
///     else if (p.is("--json")) json = p.flag();
///     else p.unknown();
///   }
class Parser {
public:
  Parser(const char *tool, int argc, char **argv)
      : tool_(tool), argc_(argc), argv_(argv) {}

  /// Advance to the next argument; false at the end.
  bool next() {
    if (i_ > 0 && hasInline_ && !consumed_)
      fail(tool_, name_ + " takes no value (got '" + name_ + "=" +
                      printable(inline_, 40) + "')");
    if (++i_ >= argc_)
      return false;
    std::string a = argv_[i_];
    consumed_ = false;
    hasInline_ = false;
    inline_.clear();
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      if (a == "-h") {
        name_ = "--help";
        return true;
      }
      fail(tool_, "unexpected argument '" + printable(a, 80) +
                      "' (flags are --name value or --name=value; see "
                      "--help)");
    }
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      name_ = a.substr(0, eq);
      inline_ = a.substr(eq + 1);
      hasInline_ = true;
    } else {
      name_ = a;
    }
    return true;
  }

  /// The current flag's name ("--keys").
  const std::string &name() const { return name_; }
  bool is(const char *flagName) const { return name_ == flagName; }

  /// The current flag's value: after '=' or the next argument.
  std::string value() {
    consumed_ = true;
    if (hasInline_)
      return inline_;
    if (i_ + 1 >= argc_)
      fail(tool_, name_ + " needs a value");
    return argv_[++i_];
  }
  /// A flag without a value: true (--flag=... is refused by next()).
  bool flag() { return true; }

  long long intValue(long long lo, long long hi) {
    std::string n = name_;
    return parseInt(tool_, n, value(), lo, hi);
  }
  double doubleValue(double lo, double hi, bool hiOpen, bool loOpen = false) {
    std::string n = name_;
    return parseDouble(tool_, n, value(), lo, hi, hiOpen, loOpen);
  }
  std::vector<std::string> listValue() {
    std::string n = name_;
    return splitList(tool_, n, value());
  }

  [[noreturn]] void unknown() const {
    fail(tool_, "unknown option '" + printable(name_, 80) + "' (see --help)");
  }
  [[noreturn]] void error(const std::string &msg) const { fail(tool_, msg); }

private:
  const char *tool_;
  int argc_;
  char **argv_;
  int i_ = 0;
  std::string name_, inline_;
  bool hasInline_ = false, consumed_ = false;
};

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_FLAGS_H
