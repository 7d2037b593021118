// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Consumer of an installed kvq (test/CMakeLists.txt, kvq-consumer-runtime-c):
// a 2-bit KIVI cache, a 64-token prefill, one decode step, one attention.
#include <kvq/runtime.h>

#include <math.h>
#include <stdio.h>

enum { kHeads = 2, kDim = 32, kPrefill = 64, kQHeads = 4 };

static int check(kvq_status s, const char *what) {
  if (s != KVQ_OK) {
    fprintf(stderr, "%s: %s (%s)\n", what, kvq_status_string(s),
            kvq_last_error());
    return 1;
  }
  return 0;
}

int main(void) {
  kvq_config cfg;
  kvq_config_init(&cfg, KVQ_METHOD_KIVI);
  cfg.num_layers = 1;
  cfg.num_kv_heads = kHeads;
  cfg.head_dim = kDim;

  kvq_cache_t *cache = NULL;
  if (check(kvq_cache_create(&cfg, &cache), "kvq_cache_create"))
    return 1;

  static float k[kPrefill + 1][kHeads][kDim], v[kPrefill + 1][kHeads][kDim];
  for (int t = 0; t <= kPrefill; ++t)
    for (int h = 0; h < kHeads; ++h)
      for (int c = 0; c < kDim; ++c) {
        k[t][h][c] = sinf(0.1f * (float)(t * 7 + h * 3 + c));
        v[t][h][c] = cosf(0.05f * (float)(t * 5 + h + c * 2));
      }
  if (check(kvq_cache_update(cache, 0, k, v, kPrefill, KVQ_DTYPE_F32),
            "prefill") ||
      check(kvq_cache_update(cache, 0, k[kPrefill], v[kPrefill], 1,
                             KVQ_DTYPE_F32),
            "decode"))
    return 1;

  int64_t length = 0;
  float q[kQHeads][kDim], out[kQHeads][kDim];
  for (int h = 0; h < kQHeads; ++h)
    for (int c = 0; c < kDim; ++c)
      q[h][c] = 0.01f * (float)(h + c);
  if (check(kvq_cache_length(cache, 0, &length), "kvq_cache_length") ||
      check(kvq_cache_attend(cache, 0, &q[0][0], 1, kQHeads, &out[0][0]),
            "kvq_cache_attend"))
    return 1;

  kvq_stats stats;
  if (check(kvq_cache_stats(cache, -1, &stats), "kvq_cache_stats"))
    return 1;
  kvq_cache_destroy(cache);

  for (int h = 0; h < kQHeads; ++h)
    for (int c = 0; c < kDim; ++c)
      if (!isfinite(out[h][c]) || fabsf(out[h][c]) > 1.0f) {
        fprintf(stderr, "attention output out of range\n");
        return 1;
      }
  if (length != kPrefill + 1 || stats.total_bytes >= stats.fp16_bytes) {
    fprintf(stderr, "unexpected cache state\n");
    return 1;
  }
  printf("OK: %lld tokens, %.2f effective bits\n", (long long)length,
         stats.effective_bits);
  return 0;
}
