//===- OptionalParser.h - pass options that may be left unset ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The options that set a #kvq.config keep the base configuration's value
// when they are not given, so they are std::optional<T>: std::nullopt is
// "not given", on the command line, in a pipeline string and in the C++
// options structs alike (a sentinel such as -1 would be a valid-looking
// value; Option::hasValue() is set for every field of an options struct).
// This is the llvm::cl parser of such options: integers, doubles, and the
// kvq dialect's enums spelled as the dialect spells them (symbolizeEnum), so
// the accepted words are written once, in the .td file.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_OPTIONALPARSER_H
#define KVQ_PASSES_OPTIONALPARSER_H

#include "kvq/dialect/KvqDialect.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <type_traits>

namespace llvm::cl {

template <typename T>
class parser<std::optional<T>> : public basic_parser<std::optional<T>> {
public:
  parser(Option &o) : basic_parser<std::optional<T>>(o) {}

  /// Returns true on error (llvm::cl's convention). An empty value and
  /// "None" (how raw_ostream prints an empty std::optional, as in
  /// --dump-pass-pipeline) are "not given", so a printed pipeline parses
  /// back.
  bool parse(Option &o, StringRef, StringRef arg, std::optional<T> &value) {
    if (arg.empty() || arg == "None") {
      value = std::nullopt;
      return false;
    }
    if constexpr (std::is_enum_v<T>) {
      if (std::optional<T> v = ::mlir::kvq::symbolizeEnum<T>(arg)) {
        value = v;
        return false;
      }
      return o.error("'" + arg + "' is not one of " + spellings());
    } else if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      if (arg.getAsDouble(v))
        return o.error("'" + arg + "' is not a number");
      value = static_cast<T>(v);
      return false;
    } else {
      T v = 0;
      if (!llvm::to_integer(arg, v, 10))
        return o.error("'" + arg + "' is not an integer");
      value = v;
      return false;
    }
  }

  StringRef getValueName() const override {
    if constexpr (std::is_enum_v<T>)
      return "enum";
    else if constexpr (std::is_floating_point_v<T>)
      return "number";
    else
      return "int";
  }

  void printOptionDiff(const Option &o, const std::optional<T> &,
                       const OptionValue<std::optional<T>> &,
                       size_t globalWidth) const {
    this->printOptionNoValue(o, globalWidth);
  }

  /// How mlir::PassOptions prints the value in a textual pipeline.
  static void print(raw_ostream &os, const std::optional<T> &value) {
    if (!value)
      return;
    if constexpr (std::is_enum_v<T>)
      os << ::mlir::kvq::stringifyEnum(*value);
    else
      os << *value;
  }

private:
  /// "a, b or c": every value the enum spells.
  static std::string spellings() {
    std::string out;
    SmallVector<StringRef> words;
    for (unsigned i = 0; i < 64; ++i) {
      StringRef s = ::mlir::kvq::stringifyEnum(static_cast<T>(i));
      if (!s.empty())
        words.push_back(s);
    }
    for (size_t i = 0; i < words.size(); ++i)
      out += (i == 0                  ? ""
              : i + 1 == words.size() ? " or "
                                      : ", ") +
             words[i].str();
    return out;
  }
};

} // namespace llvm::cl

#endif // KVQ_PASSES_OPTIONALPARSER_H
