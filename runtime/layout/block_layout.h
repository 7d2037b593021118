//===- block_layout.h - Offsets inside storage blocks (C++ and MSL) -*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Where each field of a quantized block sits, as functions of plain
// integers, written once for the three compilers that read blocks: the host
// C++ compiler (blocks.h builds its typed layouts and views from these),
// the Metal compiler and the shim build (the Metal kernels index the same
// blocks in device memory with these). Like kvq_params.h, it stands alone:
// the Apple build concatenates it into the kernels' source string.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_BLOCK_LAYOUT_H
#define KVQ_RUNTIME_LAYOUT_BLOCK_LAYOUT_H

#if defined(__METAL_VERSION__) || defined(KVQ_METAL_SHIM)
typedef ulong kvq_block_index;
#define KVQ_BLOCK_FN inline
#else
#include <stdint.h>
typedef uint64_t kvq_block_index;
#define KVQ_BLOCK_FN constexpr inline
#endif

/// A uniform block (KIVI key group, KIVI value row): `pairs` fp16 scales,
/// then `pairs` fp16 zeros, then the packed codes. Scale and zero i as fp16
/// indexes into the block, and the codes' byte offset.
KVQ_BLOCK_FN kvq_block_index kvq_uniform_scale_half(kvq_block_index i) {
  return i;
}
KVQ_BLOCK_FN kvq_block_index kvq_uniform_zero_half(kvq_block_index pairs,
                                                   kvq_block_index i) {
  return pairs + i;
}
KVQ_BLOCK_FN kvq_block_index kvq_uniform_codes_offset(kvq_block_index pairs) {
  return 4 * pairs;
}

/// A KVQuant outlier entry: its fp16 value, then its channel as uint16;
/// entry o of a list as fp16/uint16 indexes into the list.
#define KVQ_OUTLIER_BYTES 4
KVQ_BLOCK_FN kvq_block_index kvq_outlier_value_half(kvq_block_index o) {
  return 2 * o;
}
KVQ_BLOCK_FN kvq_block_index kvq_outlier_channel_half(kvq_block_index o) {
  return 2 * o + 1;
}

/// Level tables of 2^bits fp16 levels each, back to back (a KVQuant key
/// segment: one per channel; a KVQuant value row: one per head): the fp16
/// index of level `code` of table `table`.
KVQ_BLOCK_FN kvq_block_index kvq_level_half(kvq_block_index table,
                                            kvq_block_index bits,
                                            kvq_block_index code) {
  return (table << bits) + code;
}

/// A KVQuant value row: its heads' level tables, then the packed codes,
/// then its outliers; the codes' byte offset. (A KVQuant key row is its
/// packed codes, then its outliers.)
KVQ_BLOCK_FN kvq_block_index
kvq_kvquant_value_codes_offset(kvq_block_index heads, kvq_block_index bits) {
  return 2 * kvq_level_half(heads, bits, 0);
}

#endif // KVQ_RUNTIME_LAYOUT_BLOCK_LAYOUT_H
