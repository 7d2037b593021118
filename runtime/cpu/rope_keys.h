//===- rope_keys.h - Scores of pre-RoPE keys, rotation folded in -*- C++ -*-=//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The key pass of a pre-RoPE cache (attendKeysRotated) never forms a
// rotated key. For pair i of a head (channels a, b of the cache's RoPE
// style) turned by the angle of (c_i, s_i),
//
//   q . R k = sum_i c_i (q_a k_a + q_b k_b) + s_i (q_b k_a - q_a k_b),
//
// so each pair costs two products for A_i = q_a k_a + q_b k_b, two for
// B_i = q_b k_a - q_a k_b and two fused multiply-adds into the score:
// half the arithmetic of rotating the key and then dotting it.
//
// The canonical score (every kernel and ISA computes exactly this):
//   S_l = +0 for l < 16; for i = 0, 1, ..., pairs - 1, with l = i mod 16,
//     A = fma(q_b, k_b, q_a * k_a),   B = fma(-q_a, k_b, q_b * k_a),
//     S_l = fma(c_i, A, S_l),         S_l = fma(s_i, B, S_l);
//   score = ((T_0 + T_2) + (T_1 + T_3)) with T the fixed tree
//   (S_l + S_{l+8}), then (+4), then (+2) of canonicalTree.
// k is the key as loadRow decodes it and (c_i, s_i) the angles
// Rope::angles gives, so the score depends only on the token's key, its
// position and the query, not on the layout its store decoded it in.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_ROPE_KEYS_H
#define KVQ_RUNTIME_CPU_ROPE_KEYS_H

#include <cstdint>
#include <vector>

namespace kvq {

/// The queries of the key pass split by pair side: for query vector k and
/// pair i, a(k)[i] = q_a, b(k)[i] = q_b and negA(k)[i] = -q_a.
class RopeQueries {
public:
  /// Split K query vectors of d channels (q[k * d + c]); pairs (2i, 2i+1)
  /// when interleaved, else (i, i + d/2).
  void split(const float *q, int64_t K, int64_t d, bool interleaved);

  int64_t pairs() const { return pairs_; }
  /// Floats from a(k) to a(k + 1); b(k) = a(k) + pairs(), negA(k) =
  /// a(k) + 2 * pairs().
  int64_t stride() const { return 3 * pairs_; }
  const float *a(int64_t k) const { return v_.data() + (3 * k) * pairs_; }
  const float *b(int64_t k) const { return a(k) + pairs_; }
  const float *negA(int64_t k) const { return a(k) + 2 * pairs_; }

private:
  int64_t pairs_ = 0;
  std::vector<float> v_; ///< [K][a, b, -a][pairs]
};

/// End of the canonical score: T_l = S_l + S_{l+8}, U_l = T_l + T_{l+4},
/// (U_0 + U_2) + (U_1 + U_3), S_l at S[l * stride].
inline float canonicalTree(const float *S, int64_t stride) {
  float T[8], U[4];
  for (int l = 0; l < 8; ++l)
    T[l] = S[l * stride] + S[(l + 8) * stride];
  for (int l = 0; l < 4; ++l)
    U[l] = T[l] + T[l + 4];
  return (U[0] + U[2]) + (U[1] + U[3]);
}

/// Canonical scores of n <= kKeyTile key rows of one head (row t at
/// keys + t * stride, channels in the style's order) with angles by rows
/// (pair i of row t at cos[t * pairs + i]) against query vectors k0 ..
/// k0 + nq - 1: out[t * outStride + j].
void ropeScoresRows(const float *keys, int64_t stride, int64_t n,
                    const float *cos, const float *sin, const RopeQueries &q,
                    int64_t k0, int64_t nq, bool interleaved, float *out,
                    int64_t outStride);

/// The same from fp16 rows (row t of the head at rows[t]), converted
/// exactly in registers.
void ropeScoresHalfRows(const uint16_t *const *rows, int64_t n,
                        const float *cos, const float *sin,
                        const RopeQueries &q, int64_t k0, int64_t nq,
                        bool interleaved, float *out, int64_t outStride);

/// The same for a whole tile of kKeyTile keys of one head by columns
/// (channel c of token t at cols[c * kKeyTile + t]) with angles by columns
/// (cos[i * kKeyTile + t]), tokens in vector lanes.
void ropeScoresColumns(const float *cols, const float *cos, const float *sin,
                       const RopeQueries &q, int64_t k0, int64_t nq,
                       bool interleaved, float *out, int64_t outStride);

/// A whole tile of one head's keys inside a nibble-major KIVI key group
/// (bitpack.h): kKeyTile rows from row0 (even) of a group of `rows` rows
/// (even), the head's nibbles from nib0; channel c of the head decodes as
/// code * scale[c] + zero[c], as loadRow does.
struct NibbleKeyTile {
  const uint8_t *codes;
  int64_t rows, row0, nib0;
  int bits; ///< 2 or 4
  const float *scale, *zero;
};

/// ropeScoresColumns of that tile for one query vector k, decoding the
/// codes in registers (head_dim a multiple of 8).
void ropeScoresNibbles(const NibbleKeyTile &tile, const float *cos,
                       const float *sin, const RopeQueries &q, int64_t k,
                       bool interleaved, float *out, int64_t outStride);

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_ROPE_KEYS_H
