//===- outliers_neon.cpp - NEON outlier screening -------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_outlier_screen eight elements at a time: |x| >= threshold is exact
// on any ISA, so the mask is the reference's.
//
//===----------------------------------------------------------------------===//
#include "../neon/neon_kernels.h"
#include "../neon/neon_util.h"

#include <cstring>

using namespace kvq;
using namespace kvq::neon;

namespace {

void outlierScreenNeon(const OutlierScreenArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const int64_t rows = a.rows, cols = a.cols;
  const float *threshold = a.threshold;
  uint8_t *mask = a.mask;
  if (cols % 8 != 0)
    return outlierScreenRef(a);
  const uint32x4_t one = vdupq_n_u32(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 8) {
      float32x4_t a, b;
      load8(x, dtype, r * cols + c, a, b);
      uint32x4_t ma =
          vandq_u32(vcgeq_f32(vabsq_f32(a), vld1q_f32(threshold + c)), one);
      uint32x4_t mb =
          vandq_u32(vcgeq_f32(vabsq_f32(b), vld1q_f32(threshold + c + 4)), one);
      uint64_t bytes = narrow8(ma, mb);
      std::memcpy(mask + r * cols + c, &bytes, 8);
    }
}

} // namespace

void kvq::neon::fillOutliersNeon(KernelTable &t) {
  t.outlierScreen = outlierScreenNeon;
}
