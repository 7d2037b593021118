// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/*===- primitive_ops_driver.c - compiled primitive ops vs the runtime -----===*
 *
 * Host program of primitive-ops.mlir: for every primitive kvq op it builds
 * seeded inputs, calls the runtime's C entry point on them directly (the
 * expected result), then calls the op's two compiled functions (static and
 * dynamic shapes, `_mlir_ciface_<op>_{static,dynamic}`) on the same inputs
 * and requires each returned buffer to have the expected shape, a dense
 * row-major layout and the same bytes. Prints one line per function and
 * the runtime's pending status; exits 1 on any difference. Plain C (no
 * _Float16), so the arm64 cross compiler builds it too.
 *
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvq/runtime.h"

/* MLIR's descriptor of a ranked memref, as the C interface passes it. */
#define MEMREF(R)                                                              \
  struct {                                                                     \
    void *allocated;                                                           \
    void *aligned;                                                             \
    int64_t offset;                                                            \
    int64_t sizes[R];                                                          \
    int64_t strides[R];                                                        \
  }
typedef MEMREF(1) memref1;
typedef MEMREF(2) memref2;
typedef MEMREF(3) memref3;
typedef MEMREF(4) memref4;

/* Keys and values: [tokens, kv_heads, head_dim]. */
enum { T = 8, H = 2, D = 16, N = T * H * D, COLS = H * D };

/*===-------------------------- inputs ------------------------------------===*/

static uint32_t rng = 0x9e3779b9u;
static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}
static float uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)(next_u32() >> 8) / 16777216.0f;
}
/* A finite binary16 of magnitude 2^(lo-15) .. 2^(hi-14), random sign. */
static uint16_t f16_bits(int lo, int hi, int any_sign) {
  uint32_t sign = any_sign ? (next_u32() & 1u) : 0u;
  uint32_t exponent = (uint32_t)lo + next_u32() % (uint32_t)(hi - lo + 1);
  return (uint16_t)(sign << 15 | exponent << 10 | (next_u32() & 0x3ffu));
}
static void fill_f16(uint16_t *x, int n, int lo, int hi) {
  for (int i = 0; i < n; ++i)
    x[i] = f16_bits(lo, hi, 1);
}
static void fill_f32(float *x, int n) {
  for (int i = 0; i < n; ++i)
    x[i] = uniform(-2.0f, 2.0f);
  x[3] = 9.5f; /* an outlier, as keys have */
  x[n / 2 + 7] = -7.25f;
}
/* About one element in eight excluded. */
static void fill_mask(uint8_t *m, int n) {
  for (int i = 0; i < n; ++i)
    m[i] = (next_u32() & 7u) == 0;
}
static void fill_codes(uint8_t *c, int n, int bits) {
  for (int i = 0; i < n; ++i)
    c[i] = (uint8_t)(next_u32() & ((1u << bits) - 1u));
}

/* Row-major sizes and strides of `shape`. */
static void dense(int64_t *sizes, int64_t *strides, int rank,
                  const int64_t *shape) {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    sizes[d] = shape[d];
    strides[d] = stride;
    stride *= shape[d];
  }
}
/* Describes the host buffer `data` as a dense memref of the given shape. */
#define VIEW(desc, data, ...)                                                  \
  do {                                                                         \
    const int64_t shape_[] = {__VA_ARGS__};                                    \
    (desc).allocated = (desc).aligned = (data);                                \
    (desc).offset = 0;                                                         \
    dense((desc).sizes, (desc).strides,                                        \
          (int)(sizeof shape_ / sizeof shape_[0]), shape_);                    \
  } while (0)

/*===-------------------------- checking ----------------------------------===*/

static int failures = 0;

/* Compares one returned buffer with the runtime's bytes and frees it. */
static int same_result(const char *what, void *allocated, void *aligned,
                       int64_t offset, const int64_t *sizes,
                       const int64_t *strides, int rank, const int64_t *shape,
                       size_t element, const void *expected) {
  int ok = 1;
  int64_t stride = 1, count = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (sizes[d] != shape[d] || (shape[d] > 1 && strides[d] != stride)) {
      printf("  %s: dimension %d has size %lld stride %lld, expected %lld "
             "stride %lld\n",
             what, d, (long long)sizes[d], (long long)strides[d],
             (long long)shape[d], (long long)stride);
      ok = 0;
    }
    stride *= shape[d];
    count *= shape[d];
  }
  if (ok) {
    const unsigned char *got =
        (const unsigned char *)aligned + offset * element;
    for (int64_t i = 0; i < count; ++i)
      if (memcmp(got + i * element,
                 (const unsigned char *)expected + i * element, element) != 0) {
        printf("  %s: element %lld differs from the runtime's\n", what,
               (long long)i);
        ok = 0;
        break;
      }
  }
  free(allocated); /* the compiled function handed it over */
  return ok;
}
#define SAME(what, desc, element, expected, ...)                               \
  same_result(what, (desc).allocated, (desc).aligned, (desc).offset,           \
              (desc).sizes, (desc).strides,                                    \
              (int)(sizeof((desc).sizes) / sizeof(int64_t)),                   \
              (const int64_t[]){__VA_ARGS__}, element, expected)

static void report(const char *op, const char *variant, int ok) {
  printf("%s %s: %s\n", op, variant, ok ? "match" : "MISMATCH");
  failures += !ok;
}

/* The runtime call that gives the expected values must succeed. */
static void require_ok(kvq_status status, const char *call) {
  if (status == KVQ_OK)
    return;
  printf("%s failed: %s\n", call, kvq_last_error());
  exit(1);
}

/*===-------------------------- the ops -----------------------------------===*/

struct group_quant_results {
  memref3 codes, scale, zero;
};
typedef void group_quant_fn(struct group_quant_results *, memref3 *, memref3 *);
group_quant_fn _mlir_ciface_group_quant_static,
    _mlir_ciface_group_quant_dynamic;

static void group_quant(void) {
  static uint16_t x[N], scale[T * H * 2], zero[T * H * 2];
  static uint8_t mask[N], codes[N];
  fill_f16(x, N, 11, 16);
  x[21] = 0x5a00; /* 192: an outlier the mask may or may not exclude */
  fill_mask(mask, N);
  require_ok(kvq_group_quant(x, KVQ_DTYPE_F16, T, COLS, KVQ_AXIS_PER_TOKEN, 8,
                             2, mask, KVQ_CODES_UNPACKED, codes, scale, zero),
             "kvq_group_quant");
  group_quant_fn *fns[] = {_mlir_ciface_group_quant_static,
                           _mlir_ciface_group_quant_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 in, m;
    VIEW(in, x, T, H, D);
    VIEW(m, mask, T, H, D);
    struct group_quant_results r;
    fns[v](&r, &in, &m);
    int ok = SAME("codes", r.codes, 1, codes, T, H, D);
    ok &= SAME("scale", r.scale, 2, scale, T, H, 2);
    ok &= SAME("zero point", r.zero, 2, zero, T, H, 2);
    report("group_quant", v ? "dynamic" : "static", ok);
  }
}

typedef void group_dequant_fn(memref3 *, memref3 *, memref3 *, memref3 *);
group_dequant_fn _mlir_ciface_group_dequant_static,
    _mlir_ciface_group_dequant_dynamic;

static void group_dequant(void) {
  /* Per channel in groups of 4 tokens: scale and zero are [2, H, D]. */
  static uint8_t codes[N];
  static uint16_t scale[2 * COLS], zero[2 * COLS];
  static float out[N];
  fill_codes(codes, N, 3);
  for (int i = 0; i < 2 * COLS; ++i) {
    scale[i] = f16_bits(9, 13, 0);
    zero[i] = f16_bits(11, 15, 1);
  }
  require_ok(kvq_group_dequant(codes, KVQ_CODES_UNPACKED, scale, zero, T, COLS,
                               KVQ_AXIS_PER_CHANNEL, 4, 3, out, KVQ_DTYPE_F32),
             "kvq_group_dequant");
  group_dequant_fn *fns[] = {_mlir_ciface_group_dequant_static,
                             _mlir_ciface_group_dequant_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 c, s, z, r;
    VIEW(c, codes, T, H, D);
    VIEW(s, scale, 2, H, D);
    VIEW(z, zero, 2, H, D);
    fns[v](&r, &c, &s, &z);
    report("group_dequant", v ? "dynamic" : "static",
           SAME("output", r, 4, out, T, H, D));
  }
}

typedef void nuq_fit_fn(memref4 *, memref3 *, memref3 *);
nuq_fit_fn _mlir_ciface_nuq_fit_static, _mlir_ciface_nuq_fit_dynamic;

static void nuq_fit(void) {
  /* Per channel over 8 tokens, 3 bits: one 8-level table per channel. */
  static float x[N];
  static uint8_t mask[N];
  static uint16_t levels[COLS * 8];
  fill_f32(x, N);
  fill_mask(mask, N);
  int64_t floats = kvq_nuq_fit_scratch_size(8, 3);
  float *scratch = malloc((size_t)floats * sizeof(float));
  require_ok(kvq_nuq_fit(x, KVQ_DTYPE_F32, T, COLS, KVQ_AXIS_PER_CHANNEL, 8, 3,
                         4, mask, scratch, floats, levels),
             "kvq_nuq_fit");
  free(scratch);
  nuq_fit_fn *fns[] = {_mlir_ciface_nuq_fit_static,
                       _mlir_ciface_nuq_fit_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 in, m;
    memref4 r;
    VIEW(in, x, T, H, D);
    VIEW(m, mask, T, H, D);
    fns[v](&r, &in, &m);
    report("nuq_fit", v ? "dynamic" : "static",
           SAME("levels", r, 2, levels, 1, H, D, 8));
  }
}

typedef void nuq_quant_fn(memref3 *, memref3 *, memref4 *);
nuq_quant_fn _mlir_ciface_nuq_quant_static, _mlir_ciface_nuq_quant_dynamic;

static void nuq_quant(void) {
  /* Per token over head_dim, 2 bits: one 4-level table per (token, head),
   * fit by the runtime on the same input. */
  static uint16_t x[N], levels[T * H * 4];
  static uint8_t codes[N];
  fill_f16(x, N, 10, 16);
  int64_t floats = kvq_nuq_fit_scratch_size(16, 2);
  float *scratch = malloc((size_t)floats * sizeof(float));
  require_ok(kvq_nuq_fit(x, KVQ_DTYPE_F16, T, COLS, KVQ_AXIS_PER_TOKEN, 16, 2,
                         3, NULL, scratch, floats, levels),
             "kvq_nuq_fit");
  free(scratch);
  require_ok(kvq_nuq_quant(x, KVQ_DTYPE_F16, T, COLS, KVQ_AXIS_PER_TOKEN, 16, 2,
                           levels, KVQ_CODES_UNPACKED, codes),
             "kvq_nuq_quant");
  nuq_quant_fn *fns[] = {_mlir_ciface_nuq_quant_static,
                         _mlir_ciface_nuq_quant_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 in, r;
    memref4 l;
    VIEW(in, x, T, H, D);
    VIEW(l, levels, T, H, 1, 4);
    fns[v](&r, &in, &l);
    report("nuq_quant", v ? "dynamic" : "static",
           SAME("codes", r, 1, codes, T, H, D));
  }
}

typedef void nuq_dequant_fn(memref3 *, memref3 *, memref4 *);
nuq_dequant_fn _mlir_ciface_nuq_dequant_static,
    _mlir_ciface_nuq_dequant_dynamic;

static void nuq_dequant(void) {
  static uint8_t codes[N];
  static uint16_t levels[T * H * 4], out[N];
  fill_codes(codes, N, 2);
  /* Ascending tables: four positive levels of increasing exponent. */
  for (int i = 0; i < T * H * 4; ++i)
    levels[i] = f16_bits(11 + i % 4, 11 + i % 4, 0);
  require_ok(kvq_nuq_dequant(codes, KVQ_CODES_UNPACKED, levels, T, COLS,
                             KVQ_AXIS_PER_TOKEN, 16, 2, out, KVQ_DTYPE_F16),
             "kvq_nuq_dequant");
  nuq_dequant_fn *fns[] = {_mlir_ciface_nuq_dequant_static,
                           _mlir_ciface_nuq_dequant_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 c, r;
    memref4 l;
    VIEW(c, codes, T, H, D);
    VIEW(l, levels, T, H, 1, 4);
    fns[v](&r, &c, &l);
    report("nuq_dequant", v ? "dynamic" : "static",
           SAME("output", r, 2, out, T, H, D));
  }
}

struct outlier_split_results {
  memref3 mask, threshold;
};
typedef void outlier_split_fn(struct outlier_split_results *, memref3 *,
                              memref3 *);
outlier_split_fn _mlir_ciface_outlier_split_static,
    _mlir_ciface_outlier_split_dynamic;

static void outlier_split(void) {
  /* Per channel over 8 tokens, fraction 0.25: two outliers per channel. */
  static float x[N], threshold[COLS];
  static uint8_t exclude[N], mask[N];
  fill_f32(x, N);
  x[5 * COLS + 4] = x[6 * COLS + 4]; /* a tie, broken by rank */
  fill_mask(exclude, N);
  require_ok(kvq_outlier_split(x, KVQ_DTYPE_F32, T, COLS, KVQ_AXIS_PER_CHANNEL,
                               8, 0.25f, exclude, mask, threshold),
             "kvq_outlier_split");
  outlier_split_fn *fns[] = {_mlir_ciface_outlier_split_static,
                             _mlir_ciface_outlier_split_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 in, m;
    VIEW(in, x, T, H, D);
    VIEW(m, exclude, T, H, D);
    struct outlier_split_results r;
    fns[v](&r, &in, &m);
    int ok = SAME("mask", r.mask, 1, mask, T, H, D);
    ok &= SAME("threshold", r.threshold, 4, threshold, 1, H, D);
    report("outlier_split", v ? "dynamic" : "static", ok);
  }
}

typedef void outlier_screen_fn(memref3 *, memref3 *, memref2 *);
outlier_screen_fn _mlir_ciface_outlier_screen_static,
    _mlir_ciface_outlier_screen_dynamic;

static void outlier_screen(void) {
  /* Three decode tokens against thresholds frozen per channel. */
  static float x[3 * COLS], threshold[COLS];
  static uint8_t mask[3 * COLS];
  fill_f32(x, 3 * COLS);
  for (int i = 0; i < COLS; ++i)
    threshold[i] = uniform(0.5f, 1.5f);
  x[COLS + 9] = threshold[9]; /* |x| == threshold is an outlier */
  require_ok(kvq_outlier_screen(x, KVQ_DTYPE_F32, 3, COLS, threshold, mask),
             "kvq_outlier_screen");
  outlier_screen_fn *fns[] = {_mlir_ciface_outlier_screen_static,
                              _mlir_ciface_outlier_screen_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 in, r;
    memref2 t;
    VIEW(in, x, 3, H, D);
    VIEW(t, threshold, H, D);
    fns[v](&r, &in, &t);
    report("outlier_screen", v ? "dynamic" : "static",
           SAME("mask", r, 1, mask, 3, H, D));
  }
}

typedef void key_norm_fn(memref1 *, memref3 *);
key_norm_fn _mlir_ciface_key_norm_static, _mlir_ciface_key_norm_dynamic;

static void key_norm(void) {
  static uint16_t keys[N];
  static float norms[T];
  fill_f16(keys, N, 10, 16);
  require_ok(kvq_key_norm(keys, KVQ_DTYPE_F16, T, H, D, norms), "kvq_key_norm");
  key_norm_fn *fns[] = {_mlir_ciface_key_norm_static,
                        _mlir_ciface_key_norm_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref3 k;
    memref1 r;
    VIEW(k, keys, T, H, D);
    fns[v](&r, &k);
    report("key_norm", v ? "dynamic" : "static", SAME("norms", r, 4, norms, T));
  }
}

typedef void sink_select_fn(memref1 *, memref1 *);
sink_select_fn _mlir_ciface_sink_select_static,
    _mlir_ciface_sink_select_dynamic;

static void sink_select(void) {
  /* Three of eight tokens; a tie at the third place (positions 2 and 6). */
  static float norms[T] = {1.0f, 4.0f, 2.5f, 0.5f, 7.0f, 1.5f, 2.5f, 0.25f};
  static int64_t positions[3];
  require_ok(kvq_sink_select(norms, T, 3, positions), "kvq_sink_select");
  sink_select_fn *fns[] = {_mlir_ciface_sink_select_static,
                           _mlir_ciface_sink_select_dynamic};
  for (int v = 0; v < 2; ++v) {
    memref1 n, r;
    VIEW(n, norms, T);
    fns[v](&r, &n);
    report("sink_select", v ? "dynamic" : "static",
           SAME("positions", r, 8, positions, 3));
  }
}

int main(void) {
  group_quant();
  group_dequant();
  nuq_fit();
  nuq_quant();
  nuq_dequant();
  outlier_split();
  outlier_screen();
  key_norm();
  sink_select();
  printf("pending status: %d\n", (int)kvq_take_pending_status());
  return failures ? 1 : 0;
}
