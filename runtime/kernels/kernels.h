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
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_KERNELS_H
#define KVQ_RUNTIME_KERNELS_KERNELS_H

#include "kvq/config_rules.h"
#include "kvq/runtime.h"
#include "matmul.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kvq {

/// Largest number of NUQ levels (8 bits).
constexpr int kMaxLevels = 256;

/// True for the supported code widths 2, 3, 4, 8 (kvq/config_rules.h).
inline bool supportedBits(int bits) { return isSupportedBits(bits); }

//===----------------------------------------------------------------------===//
// Uniform min/max quantization (docs/RUNTIME.md "Numerical decisions")
//===----------------------------------------------------------------------===//

/// Min/max over the n elements x[i*stride] not excluded (exclude may be
/// null; element i is excluded when exclude[i*exStride] != 0). Writes the
/// fp16 scale (max-min)/(2^bits-1) and zero = min. No eligible element:
/// scale 0, zero 0.
void uniformCalibrateRef(const float *x, int64_t n, int64_t stride,
                         const uint8_t *exclude, int64_t exStride, int bits,
                         uint16_t *scale, uint16_t *zero);

/// fp16 scale and zero of a group whose eligible elements span [lo, hi]
/// (any == false: no eligible element, scale 0 and zero 0).
void uniformParams(float lo, float hi, bool any, int bits, uint16_t *scale,
                   uint16_t *zero);

/// One code: clamp(rint((x - z) / s), 0, maxCode); s == 0 gives 0.
uint8_t uniformCode(float x, float s, float z, float maxCode);

/// code = clamp(rint((x - zero) / scale), 0, 2^bits - 1) with the fp16
/// scale/zero; scale 0 gives code 0. Codes are unpacked bytes.
void uniformQuantizeRef(const float *x, int64_t n, int64_t stride,
                        uint16_t scale, uint16_t zero, int bits, uint8_t *codes,
                        int64_t codeStride);

/// x' = code * scale + zero, two float roundings (no FMA: the library is
/// compiled with -ffp-contract=off).
inline float uniformDequant(uint8_t code, float scale, float zero) {
  return static_cast<float>(code) * scale + zero;
}

//===----------------------------------------------------------------------===//
// Non-uniform quantization (Lloyd-Max)
//===----------------------------------------------------------------------===//

/// Index of the level nearest to x among `count` ascending levels; ties go
/// to the lowest index (also among equal levels).
int nearestLevel(const float *levels, int count, float x);

/// Quantile initialisation of `count` levels from m >= 1 sorted values.
void lloydInitSorted(const float *sorted, int64_t m, int count, float *levels);

/// Floats of work a Lloyd-Max fit of m gathered values may use besides them:
/// the SIMD tables' sort keys (2m), then their prefix sums (m + 1 doubles);
/// the reference uses none. Saturates at INT64_MAX; 0 for m < 1.
int64_t lloydWorkFloats(int64_t m);

/// Scratch floats lloydFit takes for n elements: room to gather them, then
/// their work (kvq_nuq_fit_scratch_size). Saturates at INT64_MAX.
int64_t lloydScratchFloats(int64_t n);

/// lloydFitGathered's operands: one group's eligible values, already
/// gathered (kvq_nuq_fit, lloydFit).
struct LloydFitGatheredArgs {
  float *data = nullptr; ///< m values, sorted in place (their order is lost)
  int64_t m = 0;         ///< values in data (0: all-zero levels)
  /// lloydWorkFloats(m) floats of work (the reference uses none); no
  /// kernel table allocates.
  float *work = nullptr;
  int bits = 0;  ///< 2^bits levels
  int iters = 0; ///< assign/update sweeps after the quantile initialisation
  float *levels = nullptr;      ///< out: 2^bits levels, ascending
  double *distortion = nullptr; ///< optional, iters + 1 entries (lloydFitRef)
};

/// Lloyd-Max on m gathered eligible values (sorted in place), as lloydFitRef
/// below.
void lloydFitGathered(const LloydFitGatheredArgs &a);

/// Fit 2^bits levels (ascending, float) to the eligible elements: quantile
/// initialisation at (i + 0.5) / L with linear interpolation, then `iters`
/// assign/update sweeps. scratch holds lloydScratchFloats(n) floats: the
/// eligible elements are gathered into it, and the fit's work follows them.
/// distortion (optional, iters + 1 entries) receives the mean squared error
/// over the eligible elements before the first sweep and after each sweep
/// (float levels).
/// Returns the number of eligible elements; 0 gives all-zero levels.
int64_t lloydFitRef(const float *x, int64_t n, int64_t stride,
                    const uint8_t *exclude, int64_t exStride, int bits,
                    int iters, float *scratch, float *levels,
                    double *distortion);

//===----------------------------------------------------------------------===//
// Dense-and-sparse outliers and sinks
//===----------------------------------------------------------------------===//

/// k = ceil(fraction * eligible), computed as ceil(f*n - 1e-6) so that a
/// float fraction such as 0.07f does not round an exact product up.
int64_t outlierCount(float fraction, int64_t eligible);

/// The rank split on any element accessor: get(i) returns element i as
/// float, skip(i) says whether it is excluded, mark(i, bool) writes the mask.
/// Returns the k-th largest magnitude bits (0 when k == 0).
template <class Get, class Skip, class Mark>
uint32_t topkAbsGeneric(Get get, Skip skip, Mark mark, int64_t n, int64_t k);

/// Mark exactly min(k, eligible) eligible elements with the largest |x|,
/// ties to the earlier index (mask[i*maskStride] = 1, others 0). threshold
/// (optional) receives the k-th largest |x|, +inf when k == 0. Works without
/// scratch memory: the threshold is found by bisection on the float bits.
void topkAbsRef(const float *x, int64_t n, int64_t stride,
                const uint8_t *exclude, int64_t exStride, int64_t k,
                uint8_t *mask, int64_t maskStride, float *threshold);

/// topkIndices' operands (kvq_sink_select after validation).
struct TopkIndicesArgs {
  const float *values = nullptr; ///< n non-negative values (key norms)
  int64_t n = 0;
  int64_t k = 0;              ///< how many to select, k <= n
  int64_t *indices = nullptr; ///< out: k indices, ascending
};

/// The k largest of the n values, ties to the earlier index; writes their
/// indices ascending.
void topkIndicesRef(const TopkIndicesArgs &a);

/// Mean over heads of the per-head L2 norm of one token's key row
/// (accumulated in double, so it is the same on every ISA).
float keyNormRow(const float *row, int heads, int headDim);

//===----------------------------------------------------------------------===//
// Whole-matrix kernels (the stateless C entry points after validation)
//===----------------------------------------------------------------------===//

/// A validated [rows, cols] matrix split into vectors of `group` elements
/// along `axis` (kvq_axis): vector v starts at flat index base(v) and its
/// elements are `stride` apart.
struct Grid {
  int64_t rows = 0, cols = 0, group = 0;
  int axis = 0;
  int64_t vectors() const { return rows * cols / group; }
  int64_t stride() const { return axis == KVQ_AXIS_PER_TOKEN ? 1 : cols; }
  int64_t base(int64_t v) const {
    if (axis == KVQ_AXIS_PER_TOKEN) {
      int64_t perRow = cols / group;
      return (v / perRow) * cols + (v % perRow) * group;
    }
    return (v / cols) * group * cols + v % cols;
  }
  /// [rows, cols] with one group per column over all rows (a store's key
  /// channels, each quantized over a block of tokens).
  static Grid columns(int64_t rows, int64_t cols) {
    return Grid{rows, cols, rows, KVQ_AXIS_PER_CHANNEL};
  }
};

/// Bytes per element of a (valid) dtype: 2 for fp16 bits, 4 for f32.
inline int64_t dtypeBytes(kvq_dtype dtype) {
  return dtype == KVQ_DTYPE_F16 ? 2 : 4;
}

// The operands of the whole-matrix kernels, by name. Matrices are
// row-major [rows, cols] (the grid's), element e at flat index e of every
// buffer with one entry per element (x, exclude, codes, mask, out); a
// vector's entries (scale, zero, levels, threshold) go by its index v.

/// groupQuant's operands (kvq_group_quant after validation).
struct GroupQuantArgs {
  const void *x = nullptr;         ///< the input, elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of x
  Grid grid;                       ///< the validated grid
  int bits = 0;                    ///< code width (supportedBits)
  /// Optional (null: none): exclude[e] != 0 leaves element e out of its
  /// vector's min/max; it is still coded.
  const uint8_t *exclude = nullptr;
  int layout = KVQ_CODES_PACKED; ///< a kvq_code_layout, of codes
  uint8_t *codes = nullptr;      ///< out: rows * cols codes
  /// Out: the fp16 scale and zero of vector v (uniformParams).
  uint16_t *scale = nullptr, *zero = nullptr;
};

/// groupDequant's operands (kvq_group_dequant after validation).
struct GroupDequantArgs {
  const uint8_t *codes = nullptr; ///< rows * cols codes
  int layout = KVQ_CODES_PACKED;  ///< a kvq_code_layout, of codes
  /// The fp16 scale and zero of vector v.
  const uint16_t *scale = nullptr, *zero = nullptr;
  Grid grid;                       ///< the validated grid
  int bits = 0;                    ///< code width (supportedBits)
  void *out = nullptr;             ///< out: rows * cols elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of out
};

/// nuqQuant's operands (kvq_nuq_quant after validation).
struct NuqQuantArgs {
  const void *x = nullptr;         ///< the input, elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of x
  Grid grid;                       ///< the validated grid
  int bits = 0;                    ///< code width (supportedBits)
  /// Vector v's 2^bits fp16 levels at levels[v * 2^bits], ascending
  /// (checked by the caller).
  const uint16_t *levels = nullptr;
  int layout = KVQ_CODES_PACKED; ///< a kvq_code_layout, of codes
  uint8_t *codes = nullptr;      ///< out: rows * cols codes (nearestLevel)
};

/// nuqDequant's operands (kvq_nuq_dequant after validation).
struct NuqDequantArgs {
  const uint8_t *codes = nullptr; ///< rows * cols codes
  int layout = KVQ_CODES_PACKED;  ///< a kvq_code_layout, of codes
  /// Vector v's 2^bits fp16 levels at levels[v * 2^bits].
  const uint16_t *levels = nullptr;
  Grid grid;                       ///< the validated grid
  int bits = 0;                    ///< code width (supportedBits)
  void *out = nullptr;             ///< out: rows * cols elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of out
};

/// outlierSplit's operands (kvq_outlier_split after validation).
struct OutlierSplitArgs {
  const void *x = nullptr;         ///< the input, elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of x
  Grid grid;                       ///< the validated grid
  /// Each vector marks outlierCount(fraction, its eligible elements).
  float fraction = 0.0f;
  /// Optional (null: none): exclude[e] != 0 keeps element e out of the
  /// ranking (its mask byte is 0).
  const uint8_t *exclude = nullptr;
  uint8_t *mask = nullptr; ///< out: rows * cols bytes, 1 for an outlier
  /// Optional out: vector v's k-th largest |x| (+inf when k == 0).
  float *threshold = nullptr;
};

/// outlierScreen's operands (kvq_outlier_screen after validation): no grid,
/// one threshold per column.
struct OutlierScreenArgs {
  const void *x = nullptr;         ///< [rows, cols] elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of x
  int64_t rows = 0, cols = 0;
  const float *threshold = nullptr; ///< [cols]
  uint8_t *mask = nullptr; ///< out: [rows, cols], |x[r][c]| >= threshold[c]
};

/// keyNorm's operands (kvq_key_norm after validation).
struct KeyNormArgs {
  /// [tokens, heads * headDim] elements of dtype: one key row per token.
  const void *keys = nullptr;
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of keys
  int64_t tokens = 0;
  int heads = 0;          ///< KV heads (> 0)
  int64_t headDim = 0;    ///< channels per head
  float *norms = nullptr; ///< out: [tokens]
};

/// kvq_group_quant on a validated grid.
void groupQuantRef(const GroupQuantArgs &a);
/// kvq_group_dequant on a validated grid.
void groupDequantRef(const GroupDequantArgs &a);
/// kvq_nuq_quant on a validated grid (levels checked ascending).
void nuqQuantRef(const NuqQuantArgs &a);
/// kvq_nuq_dequant on a validated grid.
void nuqDequantRef(const NuqDequantArgs &a);
/// kvq_outlier_split on a validated grid.
void outlierSplitRef(const OutlierSplitArgs &a);
/// kvq_outlier_screen: mask[r][c] = |x[r][c]| >= threshold[c].
void outlierScreenRef(const OutlierScreenArgs &a);
/// kvq_key_norm: mean over heads of the per-head L2 norm (sums in double,
/// d ascending, so every implementation must keep that order per token).
void keyNormRef(const KeyNormArgs &a);

//===----------------------------------------------------------------------===//
// Fused attention inner kernels (attention.h drives them)
//===----------------------------------------------------------------------===//

/// What the attention ops' fast paths depend on: fixed when a cache is
/// created (kvq_config), so a cache picks its ops once (selectAttendOps).
/// The stores call every op with these: d = head_dim (mulHalf also with
/// d = heads * head_dim), key ops (dotCodes, dotCodesRows, dotLut,
/// dotLutRows, dotNibbleRows) with keyBits, value ops
/// (axpyCodes, axpyCodesRows, axpyLutRows, axpyLevelRows) with valueBits
/// and G, and every `first` a multiple of d. Only nq (query steps x query
/// heads per KV head) varies per call.
struct AttendShape {
  int64_t d = 0;                  ///< head_dim
  int64_t heads = 0;              ///< KV heads
  int64_t G = 0;                  ///< channels per value group (KIVI; 0: none)
  int keyBits = 0, valueBits = 0; ///< code widths (0: no codes)
};

// The operands of the AttendOps entries with six or more, by name (their
// contracts are at the entries below; the five-operand fp16 entries keep
// BLAS-like positional arguments).

/// dotCodes' operands.
struct CodesDot {
  const uint8_t *packed = nullptr; ///< a packed code stream
  int64_t first = 0;               ///< the row's first code index
  int bits = 0;
  const float *q = nullptr; ///< [nq][d] folded queries
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< [nq]
};

/// axpyCodes' operands.
struct CodesAxpy {
  const uint8_t *packed = nullptr;
  int64_t first = 0;
  int bits = 0;
  const float *ws = nullptr; ///< [nq][d/G] group weights
  int64_t G = 0;             ///< channels per group
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// dotCodesRows' operands.
struct CodeRowsDot {
  const uint8_t *const *rows = nullptr; ///< n byte-aligned head rows
  int64_t n = 0;
  int bits = 0;
  const float *q = nullptr; ///< [nq][d] folded queries
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r*outStride + j]
  int64_t outStride = 0;
};

/// axpyHalfRows' operands.
struct HalfRowsAxpy {
  const uint16_t *const *rows = nullptr; ///< n fp16 head rows
  int64_t n = 0;
  const float *w = nullptr; ///< nq weights per row, wStride apart
  int64_t wStride = 0;
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// dotHalfRows' operands.
struct HalfRowsDot {
  const uint16_t *rows = nullptr; ///< n fp16 head rows, rowStride apart
  int64_t rowStride = 0, n = 0;
  const float *q = nullptr; ///< [nq][d]
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r*outStride + j]
  int64_t outStride = 0;
};

/// dotLut's operands.
struct LutDot {
  const uint8_t *packed = nullptr;
  int64_t first = 0;
  int bits = 0;
  const float *lut = nullptr; ///< [nq][d][2^bits] per-channel tables
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< [nq]
};

/// dotLutRows' operands.
struct LutRowsDot {
  const uint8_t *const *rows = nullptr; ///< n rows (token blocks)
  int64_t n = 0;
  int64_t first = 0; ///< the head's first code index in every row
  int bits = 0;
  const float *lut = nullptr; ///< [nq][d][2^bits] per-channel tables
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r * outStride + j]
  int64_t outStride = 0;
};

/// Rows per tile of levelColumns (the lanes of an AVX-512 register).
constexpr int64_t kLevelColumnRows = 16;

/// levelColumns' operands.
struct LevelColumns {
  const uint8_t *const *rows = nullptr; ///< n <= kLevelColumnRows rows
  int64_t n = 0;
  int64_t first = 0; ///< the head's first code index in every row
  int bits = 0;
  const float *levels = nullptr; ///< [d][2^bits] per-channel levels
  int64_t d = 0;
  float *cols = nullptr; ///< cols[c * kLevelColumnRows + r]
};

/// outlierScores' operands: one KVQuant key row's outliers.
struct OutlierScores {
  const uint8_t *entries = nullptr; ///< k outlier entries (blocks.h)
  int64_t k = 0;
  const uint8_t *codes = nullptr; ///< the row's packed codes, every head
  int bits = 0;
  const float *q = nullptr;   ///< [heads][nq][d] queries
  const float *lut = nullptr; ///< [heads][nq][d][2^bits] product tables
  int64_t nq = 0, d = 0;
  float *scores = nullptr; ///< [heads][nq] the row's scores
};

/// outlierAxpy's operands: one KVQuant value row's outliers.
struct OutlierAxpy {
  const uint8_t *entries = nullptr; ///< k outlier entries (blocks.h)
  int64_t k = 0;
  const uint8_t *codes = nullptr; ///< the row's packed codes, every head
  int bits = 0;
  const float *levels = nullptr; ///< [heads][levelCount] the row's levels
  int64_t levelCount = 0;
  const float *w = nullptr; ///< [heads][nq] the row's attention weights
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [heads][nq][d]
};

/// Whether the indices an outlier kernel forms for a list of k entries
/// stay below 2^31: an entry of channel c = h*d + cc forms indices below
/// (h + 1) * d * nq * scale <= (c + d) * nq * scale, and the last entry has
/// the largest channel (ascending), so one bound without a division (the
/// check runs per row). SIMD versions gather with 32-bit lane indices and
/// take the reference otherwise (~2^27 query elements per KV head or more:
/// gigabytes of product tables).
inline bool outlierIndicesFit(const uint8_t *entries, int64_t k, int64_t nq,
                              int64_t d, int64_t scale) {
  if (k == 0)
    return true;
  if (nq >= (int64_t{1} << 31))
    return false;
  uint16_t last[2]; // value, channel (blocks.h)
  std::memcpy(last, entries + 4 * (k - 1), sizeof last);
  return (last[1] + d) * nq * scale < (int64_t{1} << 31);
}

/// axpyLutRows' operands.
struct LutRowsAxpy {
  const uint8_t *const *rows = nullptr;
  int64_t n = 0;
  int bits = 0;
  const float *luts = nullptr; ///< a table per row and query vector
  int64_t lutStride = 0;       ///< floats between rows' tables
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// axpyCodesRows' operands.
struct CodeRowsAxpy {
  const uint8_t *const *rows = nullptr; ///< n byte-aligned head rows
  int64_t n = 0;
  int bits = 0;
  const float *ws = nullptr; ///< group weights, wsStride floats per row
  int64_t wsStride = 0;
  int64_t G = 0; ///< channels per group
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// axpyLevelRows' operands.
struct LevelRowsAxpy {
  const uint8_t *const *rows = nullptr;
  int64_t n = 0;
  int bits = 0;
  const float *levels = nullptr; ///< a table of levels per row
  int64_t levelStride = 0;
  const float *w = nullptr; ///< nq weights per row, wStride apart
  int64_t wStride = 0;
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// dotNibbleRows' operands.
struct NibbleRowsDot {
  const uint8_t *codes = nullptr; ///< a nibble-major block of n rows
  int64_t n = 0;
  int64_t r0 = 0, m = 0; ///< rows [r0, r0 + m)
  int64_t nib0 = 0;      ///< the head's first nibble
  int bits = 0;
  const float *q = nullptr; ///< [nq][d] folded queries
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r*outStride + j]
  int64_t outStride = 0;
};

/// Most tiles of 16 rows one ropeNibbleTiles call scores.
constexpr int64_t kRopeNibbleMaxTiles = 4;

/// ropeNibbleTiles' operands: one head's 2- or 4-bit keys in a
/// nibble-major KIVI key group (bitpack.h), stored before RoPE.
struct RopeNibbleTiles {
  const uint8_t *codes = nullptr; ///< the group's codes
  int bits = 0;                   ///< 2 or 4
  int64_t rows = 0;               ///< its coded rows (even)
  int64_t row0 = 0;               ///< the first tile's first coded row (even)
  int64_t tiles = 0;              ///< 1 .. kRopeNibbleMaxTiles tiles of 16 rows
  int64_t nib0 = 0;               ///< the head's first nibble
  const float *scale = nullptr, *zero = nullptr; ///< the head's d channels
  /// Angles of tile u's pair i, token t at cos[(u * d/2 + i) * 16 + t].
  const float *cos = nullptr, *sin = nullptr;
  /// Query vector j's pair sides q_a, q_b, -q_a at q + j * qStride, each
  /// d/2 floats (RopeQueries' layout).
  const float *q = nullptr;
  int64_t qStride = 0, nq = 0, d = 0;
  bool interleaved = false; ///< pairs (2i, 2i+1), else (i, i + d/2)
  float *out = nullptr;     ///< out[(u * 16 + t) * outStride + j]
  int64_t outStride = 0;
};

/// What the pre-RoPE row kernels (ropeCodeRows, ropeHalfRows) share: n
/// rows of one head, their angles by rows, the query vectors and where
/// the scores go.
struct RopeRowsScore {
  int64_t n = 0; ///< 1 .. 16 rows
  /// Angles of row t's pair i at cos[t * d/2 + i].
  const float *cos = nullptr, *sin = nullptr;
  /// Query vector j's pair sides q_a, q_b, -q_a at q + j * qStride, each
  /// d/2 floats (RopeQueries' layout).
  const float *q = nullptr;
  int64_t qStride = 0, nq = 0, d = 0;
  bool interleaved = false; ///< pairs (2i, 2i+1), else (i, i + d/2)
  float *out = nullptr;     ///< out[t * outStride + j]
  int64_t outStride = 0;
};

/// ropeCodeRows' operands: one head's keys in n rows of row-major packed
/// codes (a KIVI key group's rows, stored before RoPE).
struct RopeCodeRows : RopeRowsScore {
  /// Row t's codes of the head: channel c at bits [c * bits, (c + 1) *
  /// bits) from bit 0 of rows[t], as packedCodeAt reads them.
  const uint8_t *const *rows = nullptr;
  int bits = 0;                                  ///< 3
  const float *scale = nullptr, *zero = nullptr; ///< the head's d channels
};

/// ropeHalfRows' operands: one head's keys in n fp16 rows (rows[t], d
/// halves each: the fp16 cache, KIVI's window and sinks).
struct RopeHalfRows : RopeRowsScore {
  const uint16_t *const *rows = nullptr;
};

/// groupWeightsHalf's operands.
struct GroupWeightsArgs {
  const uint16_t *const *headers = nullptr; ///< n tokens' fp16 headers
  const int64_t *rowOf = nullptr;           ///< their score rows
  int64_t n = 0;
  const float *scores = nullptr;
  int64_t heads = 0, nq = 0, perHead = 0;
  float *ws = nullptr, *zsum = nullptr;
};

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

/// The entry of a kernel written with positional arguments (in the order
/// of the struct's fields): kernels keep plain locals, callers name them.
template <auto F> void dotCodesEntry(const CodesDot &a) {
  F(a.packed, a.first, a.bits, a.q, a.nq, a.d, a.out);
}
template <auto F> void axpyCodesEntry(const CodesAxpy &a) {
  F(a.packed, a.first, a.bits, a.ws, a.G, a.nq, a.d, a.acc);
}
template <auto F> void dotCodesRowsEntry(const CodeRowsDot &a) {
  F(a.rows, a.n, a.bits, a.q, a.nq, a.d, a.out, a.outStride);
}
template <auto F> void axpyHalfRowsEntry(const HalfRowsAxpy &a) {
  F(a.rows, a.n, a.w, a.wStride, a.nq, a.d, a.acc);
}
template <auto F> void dotLutEntry(const LutDot &a) {
  F(a.packed, a.first, a.bits, a.lut, a.nq, a.d, a.out);
}
/// dotLutRows as one dotLut call per row (F: dotLut's positional kernel),
/// for the tables without a many-row version: the same bits by definition.
template <auto F> void dotLutRowsByRow(const LutRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    F(a.rows[r], a.first, a.bits, a.lut, a.nq, a.d, a.out + r * a.outStride);
}
template <auto F> void dotLutRowsEntry(const LutRowsDot &a) {
  F(a.rows, a.n, a.first, a.bits, a.lut, a.nq, a.d, a.out, a.outStride);
}
template <auto F> void axpyLutRowsEntry(const LutRowsAxpy &a) {
  F(a.rows, a.n, a.bits, a.luts, a.lutStride, a.nq, a.d, a.acc);
}
template <auto F> void axpyCodesRowsEntry(const CodeRowsAxpy &a) {
  F(a.rows, a.n, a.bits, a.ws, a.wsStride, a.G, a.nq, a.d, a.acc);
}
template <auto F> void axpyLevelRowsEntry(const LevelRowsAxpy &a) {
  F(a.rows, a.n, a.bits, a.levels, a.levelStride, a.w, a.wStride, a.nq, a.d,
    a.acc);
}
template <auto F> void dotNibbleRowsEntry(const NibbleRowsDot &a) {
  F(a.codes, a.n, a.r0, a.m, a.nib0, a.bits, a.q, a.nq, a.d, a.out,
    a.outStride);
}
template <auto F> void groupWeightsHalfEntry(const GroupWeightsArgs &a) {
  F(a.headers, a.rowOf, a.n, a.scores, a.heads, a.nq, a.perHead, a.ws, a.zsum);
}

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

/// The term of a pair of 2-bit value rows in axpyCodesRows: codes a and b
/// of rows 2k and 2k+1 with weights wa and wb, fma(wb, b, wa * a).
inline float pairTerm(float wa, unsigned a, float wb, unsigned b) {
  return __builtin_fmaf(wb, static_cast<float>(b), wa * static_cast<float>(a));
}

/// The term of dotNibbleRows for nibble i (value x) of a row: 2-bit,
/// fma(q[2i+1], x >> 2, q[2i] * (x & 3)) (two channels); 4-bit, q[i] * x.
/// SIMD versions tabulate it for x = 0..15 with the same operations.
inline float nibbleTerm(const float *q, int64_t i, unsigned x, int bits) {
  if (bits == 2)
    return __builtin_fmaf(q[2 * i + 1], static_cast<float>(x >> 2),
                          q[2 * i] * static_cast<float>(x & 3u));
  return q[i] * static_cast<float>(x);
}

/// Floats per table of axpyLutRows: at least 16, periodic past 2^bits
/// (entry l holds the value of code l mod 2^bits), so a SIMD version loads
/// whole registers and may leave bits above a code in its lookup index.
constexpr int64_t lutEntries(int bits) {
  return (int64_t{1} << bits) > 16 ? (int64_t{1} << bits) : 16;
}

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

// The operands of the table's per-vector entries with the longest lists, by
// name (as AttendOps' entries take theirs; contracts at the *Ref kernels
// above). These kernels keep positional arguments; the table holds their
// entries (uniformCalibrateEntry<F>, ...). The whole-matrix kernels, the
// gathered Lloyd fit and topkIndices take their operand structs (above)
// themselves.

/// uniformCalibrate's operands: n elements x[i*stride], exclude[i*exStride]
/// (exclude may be null).
struct UniformCalibrateArgs {
  const float *x = nullptr;
  int64_t n = 0, stride = 1;
  const uint8_t *exclude = nullptr;
  int64_t exStride = 0;
  int bits = 0;
  uint16_t *scale = nullptr, *zero = nullptr; ///< fp16 results
};

/// uniformQuantize's operands.
struct UniformQuantizeArgs {
  const float *x = nullptr;
  int64_t n = 0, stride = 1;
  uint16_t scale = 0, zero = 0; ///< fp16
  int bits = 0;
  uint8_t *codes = nullptr; ///< codes[i*codeStride], unpacked bytes
  int64_t codeStride = 1;
};

/// lloydFit's operands.
struct LloydFitArgs {
  const float *x = nullptr;
  int64_t n = 0, stride = 1;
  const uint8_t *exclude = nullptr;
  int64_t exStride = 0;
  int bits = 0, iters = 0;
  float *scratch = nullptr; ///< lloydScratchFloats(n) floats
  float *levels = nullptr;  ///< 2^bits levels, ascending
  double *distortion = nullptr; ///< optional, iters + 1 entries
};

/// topkAbs' operands.
struct TopkAbsArgs {
  const float *x = nullptr;
  int64_t n = 0, stride = 1;
  const uint8_t *exclude = nullptr;
  int64_t exStride = 0;
  int64_t k = 0;
  uint8_t *mask = nullptr; ///< mask[i*maskStride]
  int64_t maskStride = 1;
  float *threshold = nullptr; ///< optional
};

template <auto F> void uniformCalibrateEntry(const UniformCalibrateArgs &a) {
  F(a.x, a.n, a.stride, a.exclude, a.exStride, a.bits, a.scale, a.zero);
}
template <auto F> void uniformQuantizeEntry(const UniformQuantizeArgs &a) {
  F(a.x, a.n, a.stride, a.scale, a.zero, a.bits, a.codes, a.codeStride);
}
template <auto F> int64_t lloydFitEntry(const LloydFitArgs &a) {
  return F(a.x, a.n, a.stride, a.exclude, a.exStride, a.bits, a.iters,
           a.scratch, a.levels, a.distortion);
}
template <auto F> void topkAbsEntry(const TopkAbsArgs &a) {
  F(a.x, a.n, a.stride, a.exclude, a.exStride, a.k, a.mask, a.maskStride,
    a.threshold);
}

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
  // *Ref kernels of the same name).
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
