//===- matmul.cpp - kvq_matmul: dense layers on the kernel table ----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Checks the arguments, then splits the outputs into tasks of whole weight
// rows and runs them on the default parallel-for. A task's rows depend on
// the shape only; and since every output is one task's, in the one order of
// matmul.h, neither the split nor the thread count changes a bit.
//
//===----------------------------------------------------------------------===//
#include "checked.h"
#include "guard.h"
#include "kernels.h"
#include "matmul.h"
#include "parallel.h"
#include "status.h"

#include <cstdint>

namespace {

/// Multiply-adds a task does at least (about 1 MB of f32 weights in
/// decode): a smaller call runs on the calling thread, where a pool's
/// wake-up would cost more than the work.
constexpr int64_t kTaskMacs = int64_t{1} << 18;

/// Weight rows of a task are a multiple of this, so the tiles of every
/// kernel (1 to 4 rows) cover whole tasks.
constexpr int64_t kTaskRowQuantum = 12;

/// Weight rows a task takes at least when there are several input rows
/// (prefill): a task reads all m input rows again, so four times the 12
/// rows of a minimal task read them a quarter as often (a 512-token
/// prefill of the 1B-class shape about 8 % faster on one thread).
constexpr int64_t kPrefillTaskRows = 48;

kvq_status validate(const float *x, int64_t xStride, const void *w,
                    kvq_weight_type wType, int64_t wStride, const float *y,
                    int64_t yStride, int64_t m, int64_t n, int64_t k) {
  const char *entry = "kvq_matmul";
  if (m < 0 || n < 0 || k < 0)
    return kvq::fail(KVQ_ERR_INVALID_ARGUMENT,
                     "%s: sizes must not be negative (m %lld, n %lld, k %lld)",
                     entry, (long long)m, (long long)n, (long long)k);
  if (wType != KVQ_WEIGHT_F32 && wType != KVQ_WEIGHT_F16 &&
      wType != KVQ_WEIGHT_BF16)
    return kvq::fail(KVQ_ERR_INVALID_ARGUMENT, "%s: unknown weight type %d",
                     entry, static_cast<int>(wType));
  if (m == 0 || n == 0)
    return KVQ_OK;
  if (!y || (k > 0 && (!x || !w)))
    return kvq::fail(KVQ_ERR_NULL_POINTER, "%s: %s is null", entry,
                     !y ? "y" : !x ? "x" : "w");
  if ((k > 0 && (xStride < k || wStride < k)) || yStride < n)
    return kvq::fail(KVQ_ERR_INVALID_ARGUMENT,
                     "%s: a row stride is shorter than its row (x_stride "
                     "%lld, w_stride %lld for k %lld; y_stride %lld for n "
                     "%lld)",
                     entry, (long long)xStride, (long long)wStride,
                     (long long)k, (long long)yStride, (long long)n);
  const int64_t wBytes = kvq::weightBytes(wType);
  int64_t span;
  if (!kvq::checkedProduct({m, xStride, 4}, kvq::kMaxBufferBytes, &span) ||
      !kvq::checkedProduct({n, wStride, wBytes}, kvq::kMaxBufferBytes,
                           &span) ||
      !kvq::checkedProduct({m, yStride, 4}, kvq::kMaxBufferBytes, &span))
    return kvq::fail(KVQ_ERR_INVALID_ARGUMENT,
                     "%s: a buffer's extent overflows", entry);
  auto misaligned = [](const void *p, int64_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) != 0;
  };
  const struct {
    const char *name;
    const void *p;
    int64_t bytes;
  } buffers[] = {{"x", x, 4}, {"w", w, wBytes}, {"y", y, 4}};
  for (const auto &b : buffers)
    if (misaligned(b.p, b.bytes))
      return kvq::fail(KVQ_ERR_INVALID_ARGUMENT,
                       "%s: %s is not aligned to its %lld-byte elements",
                       entry, b.name, (long long)b.bytes);
  return KVQ_OK;
}

} // namespace

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_matmul(const float *x, int64_t x_stride,
                                    const void *w, kvq_weight_type w_type,
                                    int64_t w_stride, float *y,
                                    int64_t y_stride, int64_t m, int64_t n,
                                    int64_t k) {
  return kvq::guarded("kvq_matmul", [&]() -> kvq_status {
    if (kvq_status s = validate(x, x_stride, w, w_type, w_stride, y, y_stride,
                                m, n, k))
      return s;
    if (m == 0 || n == 0)
      return KVQ_OK;
    const kvq::MatmulArgs args{x, x_stride, w, w_type, w_stride,
                               y, y_stride, m,    n,      k};
    const kvq::MatmulKernel kernel = kvq::kernels().matmul;
    // Rows per task: enough multiply-adds to be worth a task.
    const int64_t perRow = m * (k > 0 ? k : 1);
    int64_t rows = (kTaskMacs + perRow - 1) / perRow;
    if (m > 1 && rows < kPrefillTaskRows)
      rows = kPrefillTaskRows;
    rows = (rows + kTaskRowQuantum - 1) / kTaskRowQuantum * kTaskRowQuantum;
    const int64_t tasks = (n + rows - 1) / rows;
    if (tasks <= 1) {
      kernel(args, 0, n);
      return KVQ_OK;
    }
    kvq::runTasks(kvq::defaultParallel(), tasks, [&](int64_t t) {
      const int64_t j0 = t * rows;
      kernel(args, j0, j0 + rows < n ? j0 + rows : n);
    });
    return KVQ_OK;
  });
}

} // extern "C"
