//===- table_avx2.cpp - Run-time selection of the AVX2+F16C table ---------===//
//
// The x86_64 SIMD table exists only when the CPU (and the OS, for the YMM
// state) supports AVX2, F16C and FMA; otherwise kernels() keeps the
// reference. Checked with cpuid/xgetbv directly so the test does not depend
// on which feature names a compiler's __builtin_cpu_supports knows.
//
//===----------------------------------------------------------------------===//
#include "x86_kernels.h"

#include <cpuid.h>

namespace {

bool cpuHasAvx2F16cFma() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27),
             avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c))
    return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0x6u) != 0x6u) // XMM and YMM state saved by the OS
    return false;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, a, b, c, d);
  return b & (1u << 5); // AVX2
}

} // namespace

const kvq::KernelTable *kvq::simdKernelTable() {
  if (!cpuHasAvx2F16cFma())
    return nullptr;
  static const KernelTable table = [] {
    KernelTable t = referenceKernels();
    t.name = "avx2";
    x86::fillQuantAvx2(t);
    x86::fillMiscAvx2(t);
    x86::fillAttendAvx2(t.attend);
    return t;
  }();
  return &table;
}
