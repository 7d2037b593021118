//===- lloyd_args.h - Lloyd-Max operands ------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The non-uniform levels' fit (Lloyd-Max): its operands, scratch sizes
// and reference kernels (lloydFit, lloydFitGathered of the kernel table).
// kernels.h holds the table; the kernels are in this folder.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_ARGS_H
#define KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_ARGS_H

#include <cstdint>

namespace kvq {

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

/// lloydFit's operands.
struct LloydFitArgs {
  const float *x = nullptr;
  int64_t n = 0, stride = 1;
  const uint8_t *exclude = nullptr;
  int64_t exStride = 0;
  int bits = 0, iters = 0;
  float *scratch = nullptr;     ///< lloydScratchFloats(n) floats
  float *levels = nullptr;      ///< 2^bits levels, ascending
  double *distortion = nullptr; ///< optional, iters + 1 entries
};

/// Fit 2^bits levels (ascending, float) to the eligible elements: quantile
/// initialisation at (i + 0.5) / L with linear interpolation, then `iters`
/// assign/update sweeps. scratch holds lloydScratchFloats(n) floats: the
/// eligible elements are gathered into it, and the fit's work follows them.
/// distortion (optional, iters + 1 entries) receives the mean squared error
/// over the eligible elements before the first sweep and after each sweep
/// (float levels).
/// Returns the number of eligible elements; 0 gives all-zero levels.
int64_t lloydFitRef(const LloydFitArgs &a);

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_ARGS_H
