//===- quantize_args.h - Quantization operands ------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The uniform and NUQ quantizers' operands and reference kernels: the
// strided per-vector entries of the kernel table (uniformCalibrate,
// uniformQuantize) and the whole-matrix ones behind the C kernels
// (groupQuant, groupDequant, nuqQuant, nuqDequant). kernels.h holds the
// table; the kernels are in this folder.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_QUANTIZE_QUANTIZE_ARGS_H
#define KVQ_RUNTIME_KERNELS_QUANTIZE_QUANTIZE_ARGS_H

#include "grid.h"

#include <cstdint>

namespace kvq {

//===----------------------------------------------------------------------===//
// Uniform min/max quantization (docs/RUNTIME.md "Numerical decisions")
//===----------------------------------------------------------------------===//

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

/// Min/max over the n elements x[i*stride] not excluded (exclude may be
/// null; element i is excluded when exclude[i*exStride] != 0). Writes the
/// fp16 scale (max-min)/(2^bits-1) and zero = min. No eligible element:
/// scale 0, zero 0.
void uniformCalibrateRef(const UniformCalibrateArgs &a);

/// fp16 scale and zero of a group whose eligible elements span [lo, hi]
/// (any == false: no eligible element, scale 0 and zero 0).
void uniformParams(float lo, float hi, bool any, int bits, uint16_t *scale,
                   uint16_t *zero);

/// One code: clamp(rint((x - z) / s), 0, maxCode); s == 0 gives 0.
uint8_t uniformCode(float x, float s, float z, float maxCode);

/// code = clamp(rint((x - zero) / scale), 0, 2^bits - 1) with the fp16
/// scale/zero; scale 0 gives code 0. Codes are unpacked bytes.
void uniformQuantizeRef(const UniformQuantizeArgs &a);

/// x' = code * scale + zero, two float roundings (no FMA: the library is
/// compiled with -ffp-contract=off).
inline float uniformDequant(uint8_t code, float scale, float zero) {
  return static_cast<float>(code) * scale + zero;
}

//===----------------------------------------------------------------------===//
// Whole-matrix kernels (the stateless C entry points after validation)
//===----------------------------------------------------------------------===//

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

/// kvq_group_quant on a validated grid.
void groupQuantRef(const GroupQuantArgs &a);
/// kvq_group_dequant on a validated grid.
void groupDequantRef(const GroupDequantArgs &a);
/// kvq_nuq_quant on a validated grid (levels checked ascending).
void nuqQuantRef(const NuqQuantArgs &a);
/// kvq_nuq_dequant on a validated grid.
void nuqDequantRef(const NuqDequantArgs &a);

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_QUANTIZE_QUANTIZE_ARGS_H
