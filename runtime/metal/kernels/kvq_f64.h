//===- kvq_f64.h - Software binary64 for MSL --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Metal has no `double`, but the reference kernels accumulate Lloyd-Max
// sums, quantile positions, key norms and outlier counts in double. To give
// bit-identical results the kernels do the same operations on IEEE binary64
// values held in `ulong`, each correctly rounded to nearest-even: add, sub,
// mul, div, sqrt, conversions from float/integers and to float/integers.
// Finite operands only (kvq validates its inputs before any kernel runs);
// results that overflow become infinity.
//
// Internal form: a value is sig * 2^(e - 1085) with the leading 1 of sig at
// bit 62, so the 10 bits below a binary64 mantissa are round bits.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_KERNELS_KVQ_F64_H
#define KVQ_RUNTIME_METAL_KERNELS_KVQ_F64_H

typedef ulong kvq_f64;

/// The sign bit of a binary64.
#define KVQ_F64_SIGN 0x8000000000000000ul

/// Leading zero bits of a 64-bit value (64 for 0).
inline uint kvq_clz64(ulong x) {
  uint hi = uint(x >> 32);
  return hi != 0u ? metal::clz(hi) : 32u + metal::clz(uint(x));
}

/// Shift right, OR-ing every bit shifted out into bit 0 (sticky).
inline ulong kvq_shift_jam(ulong x, uint n) {
  if (n == 0u)
    return x;
  if (n >= 63u)
    return x != 0ul ? 1ul : 0ul;
  return (x >> n) | ((x << (64u - n)) != 0ul ? 1ul : 0ul);
}

/// Round sig * 2^(e - 1085) (leading bit at 62, or smaller for results
/// that will be subnormal) to nearest-even and encode it.
inline kvq_f64 kvq_f64_round_pack(ulong sign, int e, ulong sig) {
  if (e <= 0) {
    sig = kvq_shift_jam(sig, uint(1 - e));
    e = 1;
  }
  uint round_bits = uint(sig & 0x3fful);
  ulong m = sig >> 10;
  if (round_bits > 0x200u || (round_bits == 0x200u && (m & 1ul) != 0ul))
    m += 1ul;
  // A carry out of the mantissa lands in the exponent field by itself.
  ulong bits = (ulong(e - 1) << 52) + m;
  if (bits >= 0x7ff0000000000000ul)
    bits = 0x7ff0000000000000ul;
  return sign | bits;
}

/// Normalize sig (any non-zero value) to bit 62, then round and encode.
inline kvq_f64 kvq_f64_norm_pack(ulong sign, int e, ulong sig) {
  if (sig == 0ul)
    return sign;
  int shift = int(kvq_clz64(sig)) - 1;
  if (shift >= 0)
    return kvq_f64_round_pack(sign, e - shift, sig << uint(shift));
  return kvq_f64_round_pack(sign, e + 1, kvq_shift_jam(sig, 1u));
}

inline bool kvq_f64_is_zero(kvq_f64 a) { return (a << 1) == 0ul; }

/// The internal form of a non-zero finite value.
inline void kvq_f64_unpack(kvq_f64 a, thread int &e, thread ulong &sig) {
  int field = int((a >> 52) & 0x7fful);
  ulong frac = a & 0x000ffffffffffffful;
  if (field == 0) {
    int shift = int(kvq_clz64(frac)) - 1;
    sig = frac << uint(shift);
    e = 11 - shift;
  } else {
    sig = (frac | 0x0010000000000000ul) << 10;
    e = field;
  }
}

inline kvq_f64 kvq_f64_from_float(float f) {
  uint bits = metal::as_type<uint>(f);
  ulong sign = ulong(bits >> 31) << 63;
  uint field = (bits >> 23) & 0xffu;
  ulong frac = ulong(bits & 0x7fffffu);
  if (field == 0u)
    return kvq_f64_norm_pack(sign, 936, frac); // frac * 2^-149
  return kvq_f64_norm_pack(sign, int(field) + 935, frac | 0x800000ul);
}

inline kvq_f64 kvq_f64_from_u64(ulong n) {
  return kvq_f64_norm_pack(0ul, 1085, n);
}

inline kvq_f64 kvq_f64_from_i64(long n) {
  return n < 0 ? kvq_f64_norm_pack(KVQ_F64_SIGN, 1085, ulong(-n))
               : kvq_f64_from_u64(ulong(n));
}

inline kvq_f64 kvq_f64_add(kvq_f64 a, kvq_f64 b) {
  if (kvq_f64_is_zero(a))
    return kvq_f64_is_zero(b) ? (a & b) : b; // -0 + -0 = -0, else +0
  if (kvq_f64_is_zero(b))
    return a;
  ulong sa = a & KVQ_F64_SIGN, sb = b & KVQ_F64_SIGN;
  int ea, eb;
  ulong ma, mb;
  kvq_f64_unpack(a, ea, ma);
  kvq_f64_unpack(b, eb, mb);
  // Order by magnitude: a is the larger.
  if (eb > ea || (eb == ea && mb > ma)) {
    int te = ea;
    ea = eb;
    eb = te;
    ulong tm = ma;
    ma = mb;
    mb = tm;
    ulong ts = sa;
    sa = sb;
    sb = ts;
  }
  uint d = uint(ea - eb);
  if (sa == sb) {
    // One spare bit on top for the carry (the low bits are zero: exact).
    ma >>= 1;
    mb = kvq_shift_jam(mb >> 1, d);
    return kvq_f64_norm_pack(sa, ea + 1, ma + mb);
  }
  if (d == 0u && ma == mb)
    return 0ul; // x - x = +0
  mb = kvq_shift_jam(mb, d);
  return kvq_f64_norm_pack(sa, ea, ma - mb);
}

inline kvq_f64 kvq_f64_sub(kvq_f64 a, kvq_f64 b) {
  return kvq_f64_add(a, b ^ KVQ_F64_SIGN);
}

/// High and low 64 bits of x * y.
inline void kvq_mul128(ulong x, ulong y, thread ulong &hi, thread ulong &lo) {
  ulong x0 = x & 0xfffffffful, x1 = x >> 32;
  ulong y0 = y & 0xfffffffful, y1 = y >> 32;
  ulong p00 = x0 * y0, p01 = x0 * y1, p10 = x1 * y0, p11 = x1 * y1;
  ulong mid = (p00 >> 32) + (p01 & 0xfffffffful) + (p10 & 0xfffffffful);
  lo = (mid << 32) | (p00 & 0xfffffffful);
  hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

inline kvq_f64 kvq_f64_mul(kvq_f64 a, kvq_f64 b) {
  ulong sign = (a ^ b) & KVQ_F64_SIGN;
  if (kvq_f64_is_zero(a) || kvq_f64_is_zero(b))
    return sign;
  int ea, eb;
  ulong ma, mb;
  kvq_f64_unpack(a, ea, ma);
  kvq_f64_unpack(b, eb, mb);
  ulong hi, lo;
  kvq_mul128(ma >> 10, mb >> 10, hi, lo); // 53 x 53 bits: [2^104, 2^106)
  // Keep bits 42..105 of the product, the rest as sticky.
  ulong sig = (hi << 22) | (lo >> 42);
  if ((lo & 0x3fffffffffful) != 0ul)
    sig |= 1ul;
  return kvq_f64_norm_pack(sign, ea + eb - 1023, sig);
}

/// a / b for b != 0.
inline kvq_f64 kvq_f64_div(kvq_f64 a, kvq_f64 b) {
  ulong sign = (a ^ b) & KVQ_F64_SIGN;
  if (kvq_f64_is_zero(a))
    return sign;
  int ea, eb;
  ulong ma, mb;
  kvq_f64_unpack(a, ea, ma);
  kvq_f64_unpack(b, eb, mb);
  ma >>= 10;
  mb >>= 10;
  if (ma < mb) {
    ma <<= 1;
    ea -= 1;
  }
  // Restoring division: 63 quotient bits, the remainder as sticky.
  ulong q = 0ul, r = ma;
  for (uint i = 0u; i < 63u; ++i) {
    q <<= 1;
    if (r >= mb) {
      r -= mb;
      q |= 1ul;
    }
    r <<= 1;
  }
  if (r != 0ul)
    q |= 1ul;
  return kvq_f64_round_pack(sign, ea - eb + 1023, q);
}

/// Square root of a value >= 0.
inline kvq_f64 kvq_f64_sqrt(kvq_f64 a) {
  if (kvq_f64_is_zero(a))
    return a;
  int e;
  ulong sig;
  kvq_f64_unpack(a, e, sig);
  ulong m = sig >> 10; // value = m * 2^e2, m in [2^52, 2^53)
  int e2 = e - 1075;
  if ((e2 & 1) != 0) {
    m <<= 1;
    e2 -= 1;
  }
  // Digit by digit on the radicand m * 2^58 (56 root bits); the radicand's
  // low 58 bits are zero, so only m's bits are ever shifted in.
  ulong rem = 0ul, root = 0ul;
  for (uint k = 0u; k < 56u; ++k) {
    ulong pair = k < 27u ? (m >> (52u - 2u * k)) & 3ul : 0ul;
    rem = (rem << 2) | pair;
    root <<= 1;
    ulong t = (root << 1) | 1ul;
    if (rem >= t) {
      rem -= t;
      root |= 1ul;
    }
  }
  ulong out = root << 7;
  if (rem != 0ul)
    out |= 1ul;
  return kvq_f64_round_pack(0ul, e2 / 2 + 1049, out);
}

/// Round to the nearest float, ties to even (like a C cast).
inline float kvq_f64_to_float(kvq_f64 a) {
  uint sign = uint(a >> 63) << 31;
  if (kvq_f64_is_zero(a))
    return metal::as_type<float>(sign);
  int e;
  ulong sig;
  kvq_f64_unpack(a, e, sig);
  int fe = e - 896;
  if (fe >= 255)
    return metal::as_type<float>(sign | 0x7f800000u);
  uint shift = 39u;
  if (fe <= 0) {
    shift += uint(1 - fe);
    fe = 1;
  }
  if (shift >= 64u)
    return metal::as_type<float>(sign); // below half the smallest subnormal
  ulong m = sig >> shift;
  ulong rest = sig & ((1ul << shift) - 1ul);
  ulong half_ulp = 1ul << (shift - 1u);
  if (rest > half_ulp || (rest == half_ulp && (m & 1ul) != 0ul))
    m += 1ul;
  uint bits = (uint(fe - 1) << 23) + uint(m);
  if (bits >= 0x7f800000u)
    bits = 0x7f800000u;
  return metal::as_type<float>(sign | bits);
}

/// Truncation toward zero of a value with |a| < 2^63.
inline long kvq_f64_to_i64(kvq_f64 a) {
  if (kvq_f64_is_zero(a))
    return 0;
  int e;
  ulong sig;
  kvq_f64_unpack(a, e, sig);
  if (e < 1023)
    return 0;
  uint shift = uint(1085 - e);
  long mag = long(sig >> shift);
  return (a & KVQ_F64_SIGN) != 0ul ? -mag : mag;
}

/// ceil(a) for |a| < 2^62.
inline long kvq_f64_ceil_i64(kvq_f64 a) {
  long t = kvq_f64_to_i64(a);
  if ((a & KVQ_F64_SIGN) != 0ul || kvq_f64_is_zero(a))
    return t; // truncation is the ceiling of a negative value
  int e;
  ulong sig;
  kvq_f64_unpack(a, e, sig);
  if (e < 1023)
    return 1; // 0 < a < 1
  uint shift = uint(1085 - e);
  bool fraction = shift > 0u && (sig & ((1ul << shift) - 1ul)) != 0ul;
  return fraction ? t + 1 : t;
}

#endif // KVQ_RUNTIME_METAL_KERNELS_KVQ_F64_H
