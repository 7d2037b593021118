//===- json_report.h - The layout of the tools' JSON reports ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq-run's reports (--json) keep one member of the top-level object per
// line and one row of a result list per line, so that a report reads (and
// greps) as a table: the values are built and escaped by the JSON library,
// only the line breaks are chosen here. Bytes that are not UTF-8 (a
// checkpoint's vocabulary may hold any) are replaced, never an exception.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_JSON_REPORT_H
#define KVQ_TOOLS_COMMON_JSON_REPORT_H

#include <nlohmann/json.hpp>

#include <string>

namespace kvq::cli {

using Json = nlohmann::ordered_json;

/// `v` on one line, members and elements separated by ", " and keys by
/// ": ".
inline std::string jsonInline(const Json &v) {
  auto scalar = [](const Json &x) {
    return x.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  std::string out;
  if (v.is_object()) {
    out = "{";
    for (auto it = v.begin(); it != v.end(); ++it)
      out += (it == v.begin() ? "" : ", ") + scalar(Json(it.key())) + ": " +
             jsonInline(it.value());
    return out + "}";
  }
  if (v.is_array()) {
    out = "[";
    for (size_t i = 0; i < v.size(); ++i)
      out += (i ? ", " : "") + jsonInline(v[i]);
    return out + "]";
  }
  return scalar(v);
}

/// The report `doc` (an object): a member per line; a list of objects
/// with one object per line.
inline std::string jsonReport(const Json &doc) {
  std::string out = "{\n";
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    out += (it == doc.begin() ? "  " : ",\n  ") + jsonInline(Json(it.key())) +
           ": ";
    const Json &v = it.value();
    if (v.is_array() && !v.empty() && v[0].is_object()) {
      out += "[\n";
      for (size_t i = 0; i < v.size(); ++i)
        out += "    " + jsonInline(v[i]) + (i + 1 < v.size() ? ",\n" : "\n");
      out += "  ]";
    } else {
      out += jsonInline(v);
    }
  }
  return out + "\n}\n";
}

} // namespace kvq::cli

#endif // KVQ_TOOLS_COMMON_JSON_REPORT_H
