//===- x86_kernels.h - Pieces of the AVX2 kernel table ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Each x86 kernel file fills its part of the table; table_x86.cpp checks
// the CPU and assembles them. The attention fill* functions take a cache's
// shape and set only the entries whose kernels cover it (selectAttendOps).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_X86_X86_KERNELS_H
#define KVQ_RUNTIME_KERNELS_X86_X86_KERNELS_H

#include "kernels.h"

#include <cstdint>
#include <type_traits>

namespace kvq {
namespace x86 {

/// Code words per head row at most in the rows-in-lanes lookups of
/// KVQuant keys (dotLutRows, levelColumns): the transposed words' buffer.
constexpr int64_t kLutRowWords = 32;

/// Where those lookups apply, on AVX2 and AVX-512 alike: 2- to 4-bit codes,
/// head rows of whole 32-channel blocks (whole 32-bit words), at most
/// kLutRowWords words.
inline bool lutRowTilesCover(int bits, int64_t d) {
  return bits >= 2 && bits <= 4 && d % 32 == 0 && d * bits <= 32 * kLutRowWords;
}

/// How far ahead, in columns, the per-channel group quantizers (AVX2 and
/// AVX-512) prefetch each row while a chunk of 32 columns computes: the
/// rows are a stride apart, which the hardware prefetchers miss. On a Zen 5
/// with fp16 input, 128 columns (four chunks, 256 bytes) made KIVI's
/// quantize about 1.2x faster than 32 (the next chunk); 256 was no faster.
constexpr int64_t kColumnPrefetchAhead = 128;

/// pick(std::integral_constant<int, B>{}) for the code width B = bits
/// among Widths, a null kernel for any other width: how a kernel turns a
/// run-time width into its specialised template.
template <int... Widths, class Pick>
auto kernelForBits(int bits, Pick pick)
    -> decltype(pick(std::integral_constant<int, 2>{})) {
  decltype(pick(std::integral_constant<int, 2>{})) kernel = nullptr;
  ((bits == Widths ? (kernel = pick(std::integral_constant<int, Widths>{}))
                   : kernel),
   ...);
  return kernel;
}

/// quantize_avx2.cpp: (un)packing, uniform and NUQ (de)quantization.
void fillQuantAvx2(KernelTable &t);
/// quantize_avx2.cpp: KernelTable::groupQuant on AVX2 (any grid).
void groupQuantAvx2(const GroupQuantArgs &a);
/// quantize_avx512_group.cpp: groupQuant for groups of 32 codes at a time.
void fillGroupQuantAvx512(KernelTable &t);
/// quantize_avx2.cpp: KernelTable::nuqQuant on AVX2 (any grid).
void nuqQuantAvx2(const NuqQuantArgs &a);
/// quantize_avx512_nuq.cpp: nuqQuant for 2-4 bits without gathers.
void fillNuqAvx512(KernelTable &t);
/// lloyd_avx512_sort.cpp: Lloyd fits that sort up to 128 values in registers.
void fillSortAvx512(KernelTable &t);
/// lloyd_avx512_sort.cpp: that sort (sortFloats' bytes), for the differential
/// test; AVX-512F only.
void sortFloatsForTests(float *data, int64_t m, float *work);
/// outliers_avx2.cpp: the rank split, screening, key norms, sink top-k.
void fillOutliersAndSinksAvx2(KernelTable &t);
/// f32 -> fp16 input conversion (convert_avx2.cpp).
void fillConvertAvx2(KernelTable &t);
/// attend_avx2.cpp: the fused-attention inner kernels.
void fillAttendAvx2(const AttendShape &s, AttendOps &ops);
/// attend_avx2_half_narrow.cpp: fp16 rows of heads of d % 16 == 8
/// channels, with the reference's bits.
void fillHalfNarrowAvx2(const AttendShape &s, AttendOps &ops);
/// attend_x86_nibble.cpp: key dots over nibble-major blocks, AVX2 and AVX-512F.
void fillNibbleAvx2(const AttendShape &s, AttendOps &ops);
void fillNibbleAvx512(const AttendShape &s, AttendOps &ops);
/// attend_avx2_lut_rows.cpp: dotLutRows with 8 token rows in the lanes.
void fillLutRowsAvx2(const AttendShape &s, AttendOps &ops);
/// attend_avx2_outliers.cpp: KVQuant's outlier corrections without
/// AVX-512 (any width).
void fillOutliersAvx2(const AttendShape &s, AttendOps &ops);
/// attend_avx512_lut.cpp: dotLut without gathers (2-4 bits), and
/// axpyLutRows on 16 channels per register.
void fillLutAvx512(const AttendShape &s, AttendOps &ops);
/// attend_x86_pairs.cpp: the 2-bit case of axpyCodesRowsAvx2 (rows in pairs),
/// and the AVX-512 axpyCodesRows (2-bit pairs, 4-bit rows).
void axpyCodePairsAvx2(const CodeRowsAxpy &a);
void fillPairsAvx512(const AttendShape &s, AttendOps &ops);
/// attend_avx512_codes.cpp: the 3- and 4-bit cases of the AVX-512
/// axpyCodesRows.
void axpyCodes34Avx512(const CodeRowsAxpy &a);
/// attend_avx512_half.cpp: dotHalf and axpyHalfRows on 16 lanes.
void fillHalfAvx512(const AttendShape &s, AttendOps &ops);
/// attend_x86_group_weights.cpp: fused KIVI value headers, AVX2 and AVX-512F.
void fillGroupWeightsAvx2(const AttendShape &s, AttendOps &ops);
void fillGroupWeightsAvx512(const AttendShape &s, AttendOps &ops);
/// rope_avx512_nibble.cpp: pre-RoPE 2-bit KIVI key tiles by tables.
void fillRopeNibbleAvx512(const AttendShape &s, AttendOps &ops);
/// matmul_avx2.cpp, matmul_avx512.cpp: KernelTable::matmul.
void matmulAvx2(const MatmulArgs &a, int64_t j0, int64_t j1);
void matmulAvx512(const MatmulArgs &a, int64_t j0, int64_t j1);
/// rope_avx512_rows.cpp: pre-RoPE key rows (3-bit KIVI codes, fp16)
/// decoded in registers.
void fillRopeRowsAvx512(const AttendShape &s, AttendOps &ops);

} // namespace x86
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_X86_X86_KERNELS_H
