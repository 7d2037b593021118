//===- layer_section.h - The layer sections of a saved cache ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One layer of the saved cache format (docs/RUNTIME.md, "Saved cache
// format"), per method, as a list of the blocks it holds. The CPU stores
// and the Metal cache layers both save by filling a section with spans of
// their own memory and load from the section a reader filled with spans of
// the checked data, so the layout and every check on saved bytes are
// written once, here, and a cache saved by one backend loads into the
// other.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_LAYER_SECTION_H
#define KVQ_RUNTIME_LAYOUT_LAYER_SECTION_H

#include "bitpack.h"
#include "blocks.h"
#include "kvq/runtime.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace kvq {

class ByteReader;
class ByteWriter;

/// n bytes at p: a block being saved, or a checked block of the data being
/// loaded. A null p is a block the token does not hold.
struct Span {
  const uint8_t *p = nullptr;
  int64_t n = 0;
  explicit operator bool() const { return p != nullptr; }
};

/// fp16 layer: each token's K row and V row (2C bytes each).
struct Fp16Section {
  std::vector<Span> k, v;
};

/// kivi / kivi_sink layer.
struct KiviSection {
  int64_t tokens = 0;
  std::vector<int64_t> sinks; ///< ascending positions
  /// The running top-k of key norms: (norm, position), in the cache's order.
  std::vector<std::pair<float, int64_t>> top;
  /// Per token, the blocks it holds: fp16 K row (window or sink), fp16 V
  /// row (window or sink), value block (kiviValueRowLayout).
  std::vector<Span> kf, vf, vq;
  /// Per quantized key group (kiviKeyTarget / G of them): scales, zeros
  /// and the codes of its non-sink rows (kiviKeyGroupLayout); a null span
  /// for a group whose rows are all sinks.
  std::vector<Span> keyGroups;
};

/// kvquant layer.
struct KvquantSection {
  int64_t tokens = 0;
  int64_t sinks = 0;   ///< fp16 sinks: positions [0, sinks)
  int64_t seg0End = 0; ///< the prefill fit covers [sinks, seg0End); 0: none
  int64_t quantizedUpTo = 0; ///< [quantizedUpTo, tokens) await a refit
  /// Key level tables (kvquantTableLayout) of the segments, in order;
  /// segment j starts at kvquantSegmentStart.
  std::vector<Span> tables;
  /// A token holds fp16 rows (kf, vf) or quantized rows (kq with kOut key
  /// outliers, vq with vOut value outliers).
  struct Row {
    Span kf, vf, kq, vq;
    uint16_t kOut = 0, vOut = 0;
  };
  std::vector<Row> rows;
};

/// A kivi key group block holds its codes nibble-major (bitpack.h; the
/// layout of the CPU store) when this holds, else as one row-major
/// LSB-first stream.
inline bool kiviKeysNibbleMajor(const kvq_config &c) {
  return nibbleMajorFits(c.head_dim, c.key_bits);
}

/// First position of key segment j: the prefill fit at the sinks, then a
/// refit every refit_interval tokens after it.
inline int64_t kvquantSegmentStart(const kvq_config &c, const KvquantSection &s,
                                   int64_t j) {
  return j == 0 ? s.sinks : s.seg0End + (j - 1) * c.refit_interval;
}

void writeSection(ByteWriter &w, const Fp16Section &s);
/// The fp16 section in parts, for a store that gathers its rows a few
/// tokens at a time: the token count, then the rows of consecutive tokens
/// (writeSection(Fp16Section) is the one, then the other, for all rows).
void writeFp16Tokens(ByteWriter &w, int64_t tokens);
void writeFp16Rows(ByteWriter &w, const Fp16Section &rows);
void writeSection(ByteWriter &w, const KiviSection &s);
void writeSection(ByteWriter &w, const KvquantSection &s);

/// Read a layer of configuration cfg, checking every count, block and value
/// (docs/RUNTIME.md, "What the loader checks"): KVQ_ERR_CORRUPT_DATA with a
/// one-line message on the first failure; never reads past r's end. The
/// spans point into r's data. Allocates bookkeeping only (vectors sized by
/// counts already checked against the bytes left).
kvq_status readSection(ByteReader &r, const kvq_config &cfg, Fp16Section &s);
kvq_status readSection(ByteReader &r, const kvq_config &cfg, KiviSection &s);
kvq_status readSection(ByteReader &r, const kvq_config &cfg, KvquantSection &s);

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_LAYER_SECTION_H
