// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/*===- print_memref_driver.c - run a compiled kvq graph, print its result -===*
 *
 * Calls `_mlir_ciface_run` of a graph lowered with --kvq-to-llvm (a function
 * `@run() -> memref<?xf32>` marked llvm.emit_c_interface) and prints every
 * element as a C99 hex float, so outputs of different machines compare
 * bit for bit. Also prints the runtime's pending status.
 *
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvq/runtime.h"

/* The MLIR descriptor of a rank-1 f32 memref. */
struct memref_f32_1d {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
};

void _mlir_ciface_run(struct memref_f32_1d *result);

int main(void) {
  struct memref_f32_1d out;
  _mlir_ciface_run(&out);
  printf("elements: %lld\n", (long long)out.sizes[0]);
  for (int64_t i = 0; i < out.sizes[0]; ++i)
    printf("%a\n", (double)out.aligned[out.offset + i * out.strides[0]]);
  printf("pending status: %d\n", (int)kvq_take_pending_status());
  free(out.allocated); /* the graph malloc'ed it and handed it over */
  return 0;
}
