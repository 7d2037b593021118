//===- kernels.h - Internal kernel interface and dispatch table -*- C++ -*-===//
//
// The numerical primitives behind both the stateless C kernels and the cache
// stores, on float vectors with strides. The cache reaches them through
// kernels(), a table of function pointers, so a SIMD implementation can later
// replace the scalar reference without touching the stores.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_KERNELS_H
#define KVQ_RUNTIME_COMMON_KERNELS_H

#include <cstdint>

namespace kvq {

/// Largest number of NUQ levels (8 bits).
constexpr int kMaxLevels = 256;

/// True for the supported code widths 2, 3, 4, 8.
inline bool supportedBits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

//===----------------------------------------------------------------------===//
// Uniform min/max quantization (DESIGN.md "Numerical decisions")
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
                        uint16_t scale, uint16_t zero, int bits,
                        uint8_t *codes, int64_t codeStride);

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

/// Lloyd-Max on m gathered eligible values (sorted in place), as below.
void lloydFitGathered(float *data, int64_t m, int bits, int iters,
                      float *levels, double *distortion);

/// Fit 2^bits levels (ascending, float) to the eligible elements: quantile
/// initialisation at (i + 0.5) / L with linear interpolation, then `iters`
/// assign/update sweeps. scratch holds >= n floats. distortion (optional,
/// iters + 1 entries) receives the mean squared error over the eligible
/// elements before the first sweep and after each sweep (float levels).
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

/// The k largest of n non-negative values, ties to the earlier index;
/// writes their indices ascending. k <= n.
void topkIndicesRef(const float *values, int64_t n, int64_t k,
                    int64_t *indices);

/// Mean over heads of the per-head L2 norm of one token's key row
/// (accumulated in double, so it is the same on every ISA).
float keyNormRow(const float *row, int heads, int headDim);

//===----------------------------------------------------------------------===//
// Dispatch table
//===----------------------------------------------------------------------===//

/// The hot primitives the stores call. Only the scalar reference exists
/// today; SIMD tables will be selected here at load time.
struct KernelTable {
  const char *name;
  void (*packCodes)(const uint8_t *codes, int64_t n, int bits, uint8_t *out);
  void (*unpackCodes)(const uint8_t *packed, int64_t n, int bits,
                      uint8_t *codes);
  void (*uniformCalibrate)(const float *, int64_t, int64_t, const uint8_t *,
                           int64_t, int, uint16_t *, uint16_t *);
  void (*uniformQuantize)(const float *, int64_t, int64_t, uint16_t, uint16_t,
                          int, uint8_t *, int64_t);
  int64_t (*lloydFit)(const float *, int64_t, int64_t, const uint8_t *,
                      int64_t, int, int, float *, float *, double *);
  void (*topkAbs)(const float *, int64_t, int64_t, const uint8_t *, int64_t,
                  int64_t, uint8_t *, int64_t, float *);
};

/// The active kernel table (currently always the reference).
const KernelTable &kernels();

/// The scalar reference table, for differential tests.
const KernelTable &referenceKernels();

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_KERNELS_H
