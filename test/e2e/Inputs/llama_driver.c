// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/*===- llama_driver.c - run a compiled llama2.c model, print its tokens ---===*
 *
 * Host of a model lowered by `kvq-import | kvq-opt --kvq-quantize-kv-cache
 * --kvq-to-llvm` (calling convention: docs/MODEL.md). Reads the checkpoint
 * named on the command line, prefills the prompt "Once upon a time"
 * (token ids 1 403 407 261 378, so the module must be imported with
 * --prefill=5), then decodes greedily for `steps` tokens, printing
 * each id and the last logits as C99 hex floats: outputs of different
 * machines compare bit for bit.
 *
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvq/runtime.h"

struct memref_f32_1d {
  float *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
};
struct memref_i32_1d {
  int32_t *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
};

void *_mlir_ciface_kv_cache_create(void);
void _mlir_ciface_kv_cache_destroy(void *cache);
void _mlir_ciface_prefill(struct memref_f32_1d *logits,
                          struct memref_f32_1d *weights, void *cache,
                          struct memref_i32_1d *tokens, int64_t pos);
void _mlir_ciface_decode(struct memref_f32_1d *logits,
                         struct memref_f32_1d *weights, void *cache,
                         struct memref_i32_1d *tokens, int64_t pos);

static int32_t argmax(const struct memref_f32_1d *l) {
  int32_t best = 0;
  for (int64_t i = 1; i < l->sizes[0]; ++i)
    if (l->aligned[l->offset + i] > l->aligned[l->offset + best])
      best = (int32_t)i;
  return best;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.bin STEPS\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 28, SEEK_SET); /* the 7-int32 llama2.c header */
  int64_t floats = (bytes - 28) / 4;
  float *w = malloc((size_t)floats * sizeof(float));
  if (!w || fread(w, sizeof(float), (size_t)floats, f) != (size_t)floats) {
    fprintf(stderr, "%s: read failed\n", argv[1]);
    return 2;
  }
  fclose(f);
  struct memref_f32_1d weights = {w, w, 0, {floats}, {1}};
  int32_t prompt[5] = {1, 403, 407, 261, 378};
  struct memref_i32_1d tokens = {prompt, prompt, 0, {5}, {1}};
  void *cache = _mlir_ciface_kv_cache_create();
  struct memref_f32_1d logits;
  _mlir_ciface_prefill(&logits, &weights, cache, &tokens, 0);
  int steps = atoi(argv[2]);
  for (int i = 0; i < steps; ++i) {
    int32_t next = argmax(&logits);
    printf("token %d\n", next);
    if (i + 1 == steps)
      break;
    free(logits.allocated);
    struct memref_i32_1d one = {&next, &next, 0, {1}, {1}};
    _mlir_ciface_decode(&logits, &weights, cache, &one, 5 + i);
  }
  for (int64_t i = 0; i < logits.sizes[0]; i += 64)
    printf("logit[%lld] %a\n", (long long)i,
           (double)logits.aligned[logits.offset + i]);
  free(logits.allocated);
  _mlir_ciface_kv_cache_destroy(cache);
  free(w);
  printf("pending status: %d\n", (int)kvq_take_pending_status());
  return 0;
}
