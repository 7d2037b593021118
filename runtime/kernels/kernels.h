//===- kernels.h - Internal kernel interface and dispatch table -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The numerical primitives behind both the stateless C kernels and the cache
// stores, on float vectors with strides. Callers reach them through
// kernels(), a table of function pointers chosen once (kernel_table.cpp):
// the scalar reference here, or the AVX2 / NEON table of runtime/kernels/x86 and
// runtime/kernels/neon, which must give the reference's bits (their differential
// tests check it).
//
// Each operation's operands and reference kernels are declared beside its
// kernels: quantize/quantize_args.h, lloyd/lloyd_args.h,
// outliers/outliers_args.h, attend/attend_args.h, rope/rope_args.h,
// matmul/matmul.h, and grid.h for the matrices of the whole-matrix kernels.
// This header holds the tables (AttendOps, KernelTable) and their choice,
// and includes those, so callers include kernels.h alone.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_KERNELS_H
#define KVQ_RUNTIME_KERNELS_KERNELS_H

#include "attend_args.h"
#include "grid.h"
#include "kvq/config_rules.h"
#include "kvq/runtime.h"
#include "lloyd_args.h"
#include "matmul.h"
#include "outliers_args.h"
#include "quantize_args.h"
#include "rope_args.h"

#include <cstdint>
#include <vector>

namespace kvq {

/// Largest number of NUQ levels (8 bits).
constexpr int kMaxLevels = 256;

/// True for the supported code widths 2, 3, 4, 8 (kvq/config_rules.h).
inline bool supportedBits(int bits) { return isSupportedBits(bits); }

//===----------------------------------------------------------------------===//
// The attention ops (operands: attend_args.h, rope_args.h)
//===----------------------------------------------------------------------===//

/// One head row of d channels against nq query vectors. Codes are read from
/// a packed stream starting at code index `first` (any bit offset).
/// Every SIMD table sums in one canonical order per op, so x86_64 and arm64
/// give the same bits (attend_order_test). The reference follows it for
/// dotNibbleRows, axpyCodesRows, axpyLevelRows and groupWeightsHalf; for the
/// other ops it sums in plain channel order, and attention is checked against
/// it with a tolerance, not bit for bit.
struct AttendOps {
  /// out[i] = half(h[i]) for n values (block scales, zeros, levels).
  void (*halfToFloatN)(const uint16_t *h, int64_t n, float *out);
  /// out[r*count + i] = half(rows[r][i]): halfToFloatN over many blocks in
  /// one call (the per-token value headers of an attention chunk).
  void (*halfRowsToFloat)(const uint16_t *const *rows, int64_t n, int64_t count,
                          float *out);
  /// out[c] = code_c * scale[c] + zero[c] (a product, then a sum: exact,
  /// as uniformDequant) for n packed codes from bit 0 of `packed`: a
  /// uniform key row dequantized for the pre-RoPE key pass.
  void (*dequantCodes)(const uint8_t *packed, int64_t n, int bits,
                       const float *scale, const float *zero, float *out);
  /// out[j*d + c] = q[j*d + c] * half(h[c]): folds per-channel key scales
  /// into the queries.
  void (*mulHalf)(const uint16_t *h, const float *q, int64_t nq, int64_t d,
                  float *out);
  /// out[j] = sum_c q[j*d + c] * half(row[c]).
  void (*dotHalf)(const uint16_t *row, const float *q, int64_t nq, int64_t d,
                  float *out);
  /// acc[j*d + c] += w[j] * half(row[c]).
  void (*axpyHalf)(const uint16_t *row, const float *w, int64_t nq, int64_t d,
                   float *acc);
  /// out[j] = sum_c q[j*d + c] * code_c (uniform codes, scales folded in q).
  void (*dotCodes)(const CodesDot &a);
  /// acc[j*d + c] += ws[j*(d/G) + c/G] * code_c (per-token groups of G).
  void (*axpyCodes)(const CodesAxpy &a);
  /// Many rows of one head at once, so SIMD versions keep accumulators in
  /// registers across rows. rows[r] is the byte-aligned start of a head
  /// row's packed codes (or fp16 values).
  /// out[r*outStride + j] = sum_c q[j*d + c] * code(rows[r], c).
  void (*dotCodesRows)(const CodeRowsDot &a);
  /// acc[j*d + c] += ws[r*wsStride + j*(d/G) + c/G] * code(rows[r], c),
  /// rows in order, one fused multiply-add per element and row; except
  /// 2-bit codes, whose rows go in pairs (2k, 2k+1): one addition of
  /// pairTerm(w_2k, a, w_2k+1, b) per element and pair (a lone last row:
  /// one FMA). The pair's 16 possible terms are one table, so AVX-512 looks
  /// them up with one permute per 16 channels of two rows.
  void (*axpyCodesRows)(const CodeRowsAxpy &a);
  /// acc[j*d + c] += w[r*wStride + j] * half(rows[r][c]).
  void (*axpyHalfRows)(const HalfRowsAxpy &a);
  /// dotHalf over n rows a fixed stride apart, out[r*outStride + j], with
  /// dotHalf's bits: rows sit in vector lanes where one row is too narrow
  /// to fill them. Null where no version covers the shape (always in the
  /// reference): the stores then call dotHalf row by row.
  void (*dotHalfRows)(const HalfRowsDot &a);
  /// out[j] = sum_c lut[(j*d + c) * 2^bits + code_c] (per-channel tables).
  void (*dotLut)(const LutDot &a);
  /// dotLut over n rows: out[r*outStride + j] = dotLut(rows[r], first, bits,
  /// lut, nq, d)[j], each with dotLut's bits on the same table. Rows sit in
  /// vector lanes in the AVX-512 version, so one 16-entry table lookup per
  /// channel serves 16 rows.
  void (*dotLutRows)(const LutRowsDot &a);
  /// A KVQuant key row's outliers corrected into its dotLutRows scores:
  /// entry o (fp16 value x, channel c = h*d + cc, i = (h*nq + j)*d + cc)
  /// replaces its dense slot's term, scores[h*nq + j] += q[i] * x -
  /// lut[i * 2^bits + code_c] (a float product, then a float difference,
  /// then the addition), the entries in stored order for every j, so every
  /// ISA gives the same bits. `codes` is readable 3 bytes past its last
  /// code (the outlier list follows it in a key block).
  void (*outlierScores)(const OutlierScores &a);
  /// A KVQuant value row's outliers corrected into the accumulators: entry
  /// o (fp16 value x, channel c = h*d + cc) replaces its dense slot's
  /// level l = levels[h*levelCount + code_c], acc[(h*nq + j)*d + cc] +=
  /// w[h*nq + j] * x - w[h*nq + j] * l for every j. The entries' channels
  /// are strictly ascending (the layer loader checks it), so the additions
  /// touch distinct accumulators and their order does not matter. `codes`
  /// is readable 3 bytes past its last code (the list follows it).
  void (*outlierAxpy)(const OutlierAxpy &a);
  /// Dequantize n <= kLevelColumnRows rows by per-channel level tables
  /// into columns: cols[c*kLevelColumnRows + r] = levels[c * 2^bits +
  /// code(rows[r], first + c)], exact lookups (a pre-RoPE KVQuant key
  /// tile, tokens in the lanes of ropeScoresColumns).
  void (*levelColumns)(const LevelColumns &a);
  /// acc[j*d + c] += luts[r*lutStride + j*lutEntries(bits) + code(rows[r],
  /// c)] over the rows in order (one table per row and query vector, e.g.
  /// weight x the row's levels). One addition per element and row, so
  /// every ISA gives the same bits.
  void (*axpyLutRows)(const LutRowsAxpy &a);
  /// Key dots over a nibble-major block (bitpack.h) of n rows of 2- or
  /// 4-bit codes: rows [r0, r0 + m), the head's P = d*bits/4 nibbles
  /// starting at nibble index nib0, against nq folded query vectors:
  /// out[r*outStride + j] = (S_0 + S_1) + (S_2 + S_3), where S_a sums, from
  /// +0 in ascending i = a (mod 4), the table term nibbleTerm(q + j*d, i, x)
  /// of the row's nibble x. Rows sit in vector lanes, so a 16-entry table
  /// lookup per nibble replaces per-code arithmetic; every ISA computes the
  /// same terms in the same order, so they give the same bits.
  void (*dotNibbleRows)(const NibbleRowsDot &a);
  /// acc[j*d + c] = fma(w[r*wStride + j], levels[r*levelStride +
  /// code(rows[r], c)], acc[j*d + c]) over the rows in order (one FMA per
  /// element and row; a row's table holds 2^bits levels, readable up to 16
  /// floats). Each code is looked up once for all nq query vectors, where
  /// axpyLutRows needs a weighted table per query (GQA).
  void (*axpyLevelRows)(const LevelRowsAxpy &a);
  /// groupWeightsPortable (group_weights.h) straight from the n tokens'
  /// fp16 headers (heads*perHead scales, then as many zeros), the
  /// conversion fused in, for any nq. Null where no fused version covers
  /// the shape (always in the reference): the caller then converts with
  /// halfRowsToFloat and calls groupWeightsPortable. Same bits either way.
  void (*groupWeightsHalf)(const GroupWeightsArgs &a);
  /// The canonical pre-RoPE scores (runtime/cpu/rope_keys.h) of a.tiles
  /// tiles of 2- or 4-bit keys, channel c decoding as code * scale[c] +
  /// zero[c] (a product, then a sum, as loadRow). With 2-bit codes a
  /// pair's two codes are one 4-bit index, so its A and B for all 16 code
  /// pairs are two tables; with 4-bit codes three tables of 16 hold q_a
  /// and q_b times channel a's levels and channel b's levels. The tables
  /// are built once per pair and query vector with the canonical
  /// operations and shared by the tiles; a pair then costs two (2-bit) or
  /// three (4-bit) lookups and two (or four) FMAs per 16 tokens. Same bits
  /// as the portable ropeScoresNibbles. Null where no table version
  /// covers the shape (always in the reference): the store then scores
  /// tile by tile with the portable loops.
  void (*ropeNibbleTiles)(const RopeNibbleTiles &a);
  /// The canonical pre-RoPE scores of row-major code rows, channel c
  /// decoding as code * scale[c] + zero[c] (a product, then a sum, as
  /// loadRow), decoded in registers instead of into a row of floats first.
  /// Same bits as loadKeys followed by ropeScoresRows. Null where no
  /// version covers the shape (always in the reference): the store then
  /// decodes the rows (loadKeys) and scores them with ropeScoresRows.
  void (*ropeCodeRows)(const RopeCodeRows &a);
  /// The same for fp16 rows, converted in registers: the bits of
  /// ropeScoresHalfRows (rope_keys.h), which the key pass calls where this
  /// is null (always in the reference).
  void (*ropeHalfRows)(const RopeHalfRows &a);
};

/// Every entry of AttendOps, for code that treats them alike.
#define KVQ_ATTEND_OPS(X)                                                      \
  X(halfToFloatN)                                                              \
  X(halfRowsToFloat)                                                           \
  X(dequantCodes)                                                              \
  X(mulHalf)                                                                   \
  X(dotHalf)                                                                   \
  X(axpyHalf)                                                                  \
  X(dotCodes)                                                                  \
  X(axpyCodes)                                                                 \
  X(dotCodesRows)                                                              \
  X(axpyCodesRows)                                                             \
  X(axpyHalfRows)                                                              \
  X(dotHalfRows)                                                               \
  X(dotLut)                                                                    \
  X(dotLutRows)                                                                \
  X(outlierScores)                                                             \
  X(outlierAxpy)                                                               \
  X(levelColumns)                                                              \
  X(axpyLutRows)                                                               \
  X(dotNibbleRows)                                                             \
  X(axpyLevelRows)                                                             \
  X(groupWeightsHalf)                                                          \
  X(ropeNibbleTiles)                                                           \
  X(ropeCodeRows)                                                              \
  X(ropeHalfRows)

/// The portable versions of the attention inner kernels: any shape.
const AttendOps &referenceAttendOps();

struct KernelTable;

/// The attention ops a cache of this shape runs on table t, chosen once per
/// cache (LayerStore): each entry is t's kernel where t covers the shape,
/// else the reference's. SIMD kernels never fall back themselves; they
/// assert the conditions their table declared.
AttendOps selectAttendOps(const KernelTable &t, const AttendShape &shape);

//===----------------------------------------------------------------------===//
// Dispatch table
//===----------------------------------------------------------------------===//

/// The hot primitives. kernels() picks a SIMD table (AVX2+F16C on x86_64
/// when the CPU has it, NEON on arm64) at first use; every SIMD entry gives
/// the same bytes as the reference (differential tests in test/unit), except
/// the attention ops, whose float sums may be reordered and which a cache
/// takes through selectAttendOps.
struct KernelTable {
  const char *name;
  void (*packCodes)(const uint8_t *codes, int64_t n, int bits, uint8_t *out);
  void (*unpackCodes)(const uint8_t *packed, int64_t n, int bits,
                      uint8_t *codes);
  /// uniformCalibrateRef's contract.
  void (*uniformCalibrate)(const UniformCalibrateArgs &a);
  /// uniformQuantizeRef's contract.
  void (*uniformQuantize)(const UniformQuantizeArgs &a);
  /// lloydFitRef's contract.
  int64_t (*lloydFit)(const LloydFitArgs &a);
  /// topkAbsRef's contract.
  void (*topkAbs)(const TopkAbsArgs &a);
  // Whole-matrix kernels behind the C entry points (the contracts of the
  // *Ref kernels of the same name: quantize_args.h, outliers_args.h).
  void (*groupQuant)(const GroupQuantArgs &a);
  void (*groupDequant)(const GroupDequantArgs &a);
  void (*nuqQuant)(const NuqQuantArgs &a);
  void (*nuqDequant)(const NuqDequantArgs &a);
  /// Lloyd-Max on m gathered values (lloydFitGathered's contract).
  void (*lloydFitGathered)(const LloydFitGatheredArgs &a);
  void (*outlierSplit)(const OutlierSplitArgs &a);
  void (*outlierScreen)(const OutlierScreenArgs &a);
  void (*keyNorm)(const KeyNormArgs &a);
  /// kvq_sink_select after validation (topkIndicesRef's contract).
  void (*topkIndices)(const TopkIndicesArgs &a);
  /// The table's attention kernels that cover `shape`, null for the others
  /// (selectAttendOps fills those from the reference).
  AttendOps (*attendFor)(const AttendShape &shape);
  /// kvq_matmul's outputs [j0, j1) (matmul.h: one summation order, so the
  /// same bits as the reference on every table).
  MatmulKernel matmul;
  /// f32 -> fp16 of kvq_cache_update's input (floatToHalfN's bits).
  void (*floatToHalfN)(const float *src, int64_t n, uint16_t *dst);
};

/// The active kernel table: the SIMD table of this CPU, or the reference
/// when there is none or the environment sets KVQ_KERNELS=reference.
const KernelTable &kernels();

/// The scalar reference table, for differential tests.
const KernelTable &referenceKernels();

/// The SIMD table this build and CPU offer (null when none), whatever
/// KVQ_KERNELS says; differential tests compare it with the reference.
const KernelTable *simdKernels();

/// Every SIMD table this build and CPU can run, best first (x86_64 with
/// AVX-512: the AVX-512 table and the AVX2-only one), so differential tests
/// cover each; empty when there is none.
std::vector<const KernelTable *> simdKernelVariants();

/// Provided by the SIMD backend of this target (runtime/kernels/x86, runtime/kernels/neon):
/// its table, or null when the CPU lacks the features. kernel_table.cpp
/// supplies a null one for targets without a backend.
const KernelTable *simdKernelTable();

/// Provided by the SIMD backend too: the next-best table when the CPU runs
/// more than one (x86_64 with AVX-512: the AVX2-only table), else null.
const KernelTable *simdFallbackKernelTable();

/// Provided by the SIMD backend too: every SIMD table of this build, best
/// first, whether or not this CPU can run its kernels (x86_64: the AVX-512
/// and the AVX2 table; arm64: NEON), for tests of the selection alone:
/// selectAttendOps only reads which kernels a table declares for a shape,
/// so the AVX-512 table's choices are checked on CPUs without AVX-512 too.
/// Never call an entry of a table that simdKernelVariants() does not list.
std::vector<const KernelTable *> simdTablesForSelection();

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_KERNELS_H
