//===- block16_family.h - The attention kernels in blocks of 16 -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The AVX2 and NEON attention kernels (runtime/kernels/attend/attend_avx2.cpp,
// runtime/kernels/attend/attend_neon.cpp) are one family: they walk head rows
// in blocks of 16 channels and sum in one canonical order, so both cover
// the same shapes. Those shapes are written here once, in fillAttend; each
// ISA hands it its kernels as a traits struct (Kernels below), and its
// kernels assert the same predicates.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_ATTEND_BLOCK16_FAMILY_H
#define KVQ_RUNTIME_KERNELS_ATTEND_BLOCK16_FAMILY_H

#include "kernels.h"

namespace kvq {
namespace block16 {

/// Whole blocks of 16 channels per head row.
inline bool whole16(int64_t d) { return d % 16 == 0; }

/// A code row starting at a byte: `first` is a multiple of d (kernels.h,
/// AttendShape), so whole16(d) gives it for every width.
inline bool aligned(int64_t first, int bits, int64_t d) {
  return supportedBits(bits) && (first * bits) % 8 == 0 && whole16(d);
}

/// Per-token value groups of whole registers of 8 weights (axpyCodes).
inline bool groupsOf8(int64_t G, int64_t d) {
  return G > 0 && G % 8 == 0 && d % G == 0;
}

/// Value groups of a power of two >= 8 channels: whole registers of weights
/// that the many-row kernels (the pair kernels among them) index by shifts.
inline bool groups8(int64_t G) { return G >= 8 && (G & (G - 1)) == 0; }

/// Per-row lookups of 2- to 4-bit codes (at most 16 table entries).
inline bool lutBits(int bits) { return bits >= 2 && bits <= 4; }

/// The entries of AttendOps for the shape s, from the family member
/// Kernels: static members named as the entries, of the entries' types;
/// axpyLutRows may be null (the reference stays), and levelRowsCover(bits)
/// says which level widths its axpyLevelRows takes. Entries it leaves null
/// are the reference's (selectAttendOps).
template <class Kernels> void fillAttend(const AttendShape &s, AttendOps &ops) {
  ops.halfToFloatN = Kernels::halfToFloatN;
  ops.halfRowsToFloat = Kernels::halfRowsToFloat;
  // mulHalf is also called on all heads at once (d = heads * head_dim),
  // which d % 8 == 0 covers too. Exact either way (one rounding).
  if (s.d % 8 == 0)
    ops.mulHalf = Kernels::mulHalf;
  if (!whole16(s.d))
    return; // every other kernel walks blocks of 16 channels
  ops.dotHalf = Kernels::dotHalf;
  ops.axpyHalf = Kernels::axpyHalf;
  ops.axpyHalfRows = Kernels::axpyHalfRows;
  if (supportedBits(s.keyBits)) {
    ops.dotCodes = Kernels::dotCodes;
    ops.dotCodesRows = Kernels::dotCodesRows;
    ops.dotLut = Kernels::dotLut;
    ops.dotLutRows = Kernels::dotLutRows;
  }
  if (supportedBits(s.valueBits)) {
    if (groupsOf8(s.G, s.d))
      ops.axpyCodes = Kernels::axpyCodes;
    if (groups8(s.G) && s.d % s.G == 0)
      ops.axpyCodesRows = Kernels::axpyCodesRows;
    if (Kernels::levelRowsCover(s.valueBits))
      ops.axpyLevelRows = Kernels::axpyLevelRows;
  }
  if constexpr (Kernels::axpyLutRows != nullptr)
    if (lutBits(s.valueBits))
      ops.axpyLutRows = Kernels::axpyLutRows;
}

} // namespace block16
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_ATTEND_BLOCK16_FAMILY_H
