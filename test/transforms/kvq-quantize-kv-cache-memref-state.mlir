// RUN: kvq-opt %s --split-input-file --verify-diagnostics --kvq-quantize-kv-cache=method=fp16 | FileCheck %s
// RUN: kvq-opt %s --split-input-file --kvq-to-llvm | FileCheck %s --check-prefix=LLVM
// RUN: kvq-opt %s --split-input-file --kvq-quantize-kv-cache=method=fp16 \
// RUN:   | kvq-opt --split-input-file --kvq-to-llvm | FileCheck %s --check-prefix=LLVM
// REQUIRES: mlir-runner
// RUN: %python %S/Inputs/equivalence.py %s --run "%kvq_run" | FileCheck %s --check-prefix=SAME

// KV caches held in memref arguments and updated in place, adopted by
// kvq-quantize-kv-cache. The pass reads each function in its tensor form
// (passes/transforms/kvcache/MemrefState.h): a memref argument is a tensor
// argument, a write through a subview an insert_slice, a linalg op on
// buffers the same op on tensors. The adopted function takes a !kvq.cache
// for its cache buffers and keeps every other buffer argument, read through
// bufferization.to_tensor and written back with materialize_in_destination.
// The FileCheck lines pin the rewrite; the LLVM lines show that the graph
// lowers through --kvq-to-llvm as written and rewritten; the SAME lines run
// both for several decode steps on the same inputs, the caches allocated
// once and updated in place, and compare every output
// (Inputs/equivalence.py).

// Hugging Face LlamaAttention with a static cache as torch-mlir lowers it
// (@torch_hf_decode of kvq-quantize-kv-cache-frontend-forms.mlir), through
// MLIR's `one-shot-bufferize="bufferize-function-boundaries
// function-boundary-type-conversion=identity-layout-map"`, printed as it
// came out: the write a memref.subview at pos and a memref.copy into it, the
// reads subviews of the prefix, linalg.transpose/batch_matmul/softmax on
// allocations, and the caches returned as the arguments they are.
// EQUIV: func=bufferized_hf_decode caches=3,4 cache_results=1,2 pos=5 steps=4

// LLVM-LABEL: llvm.func @bufferized_hf_decode(
// CHECK-LABEL: func.func @bufferized_hf_decode(
// CHECK-SAME: %[[Q:arg[0-9]+]]: memref<1x2x1x4xf32>, %[[K:arg[0-9]+]]: memref<1x2x1x4xf32>, %[[V:arg[0-9]+]]: memref<1x2x1x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> memref<1x2x1x4xf32>
// CHECK: bufferization.to_tensor %[[K]] restrict
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]
// CHECK-NOT: memref.copy
// CHECK: %[[OUT:.*]] = bufferization.to_buffer %{{.*}} : tensor<1x2x1x4xf32> to memref<1x2x1x4xf32>
// CHECK-NEXT: return %[[OUT]] : memref<1x2x1x4xf32>
// SAME: @bufferized_hf_decode: 32 values over 4 steps agree

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @bufferized_hf_decode(%arg0: memref<1x2x1x4xf32>, %arg1: memref<1x2x1x4xf32>, %arg2: memref<1x2x1x4xf32>, %arg3: memref<1x2x16x4xf32>, %arg4: memref<1x2x16x4xf32>, %arg5: index) -> (memref<1x2x1x4xf32>, memref<1x2x16x4xf32>, memref<1x2x16x4xf32>) {
  %subview = memref.subview %arg3[0, 0, %arg5, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32> to memref<1x2x1x4xf32, strided<[128, 64, 4, 1], offset: ?>>
  memref.copy %arg1, %subview : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[128, 64, 4, 1], offset: ?>>
  %subview_0 = memref.subview %arg4[0, 0, %arg5, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32> to memref<1x2x1x4xf32, strided<[128, 64, 4, 1], offset: ?>>
  memref.copy %arg2, %subview_0 : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[128, 64, 4, 1], offset: ?>>
  %c1 = arith.constant 1 : index
  %0 = arith.addi %arg5, %c1 : index
  %subview_1 = memref.subview %arg3[0, 0, 0, 0] [1, 2, %0, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32> to memref<1x2x?x4xf32, strided<[128, 64, 4, 1]>>
  %subview_2 = memref.subview %arg4[0, 0, 0, 0] [1, 2, %0, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32> to memref<1x2x?x4xf32, strided<[128, 64, 4, 1]>>
  %alloc = memref.alloc(%0) {alignment = 64 : i64} : memref<1x2x4x?xf32>
  linalg.transpose ins(%subview_1 : memref<1x2x?x4xf32, strided<[128, 64, 4, 1]>>) outs(%alloc : memref<1x2x4x?xf32>) permutation = [0, 1, 3, 2] 
  %collapse_shape = memref.collapse_shape %arg0 [[0, 1], [2], [3]] : memref<1x2x1x4xf32> into memref<2x1x4xf32>
  %collapse_shape_3 = memref.collapse_shape %alloc [[0, 1], [2], [3]] : memref<1x2x4x?xf32> into memref<2x4x?xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %alloc_4 = memref.alloc(%0) {alignment = 64 : i64} : memref<2x1x?xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_4 : memref<2x1x?xf32>)
  linalg.batch_matmul ins(%collapse_shape, %collapse_shape_3 : memref<2x1x4xf32>, memref<2x4x?xf32>) outs(%alloc_4 : memref<2x1x?xf32>)
  %expand_shape = memref.expand_shape %alloc_4 [[0, 1], [2], [3]] output_shape [1, 2, 1, %0] : memref<2x1x?xf32> into memref<1x2x1x?xf32>
  %cst_5 = arith.constant 2.000000e+00 : f32
  %alloc_6 = memref.alloc(%0) {alignment = 64 : i64} : memref<1x2x1x?xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expand_shape : memref<1x2x1x?xf32>) outs(%alloc_6 : memref<1x2x1x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.divf %in, %cst_5 : f32
    linalg.yield %1 : f32
  }
  %alloc_7 = memref.alloc(%0) {alignment = 64 : i64} : memref<1x2x1x?xf32>
  linalg.softmax dimension(3) ins(%alloc_6 : memref<1x2x1x?xf32>) outs(%alloc_7 : memref<1x2x1x?xf32>)
  %collapse_shape_8 = memref.collapse_shape %alloc_7 [[0, 1], [2], [3]] : memref<1x2x1x?xf32> into memref<2x1x?xf32>
  %collapse_shape_9 = memref.collapse_shape %subview_2 [[0, 1], [2], [3]] : memref<1x2x?x4xf32, strided<[128, 64, 4, 1]>> into memref<2x?x4xf32, strided<[64, 4, 1]>>
  %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<2x1x4xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_10 : memref<2x1x4xf32>)
  linalg.batch_matmul ins(%collapse_shape_8, %collapse_shape_9 : memref<2x1x?xf32>, memref<2x?x4xf32, strided<[64, 4, 1]>>) outs(%alloc_10 : memref<2x1x4xf32>)
  %expand_shape_11 = memref.expand_shape %alloc_10 [[0, 1], [2], [3]] output_shape [1, 2, 1, 4] : memref<2x1x4xf32> into memref<1x2x1x4xf32>
  return %expand_shape_11, %arg3, %arg4 : memref<1x2x1x4xf32>, memref<1x2x16x4xf32>, memref<1x2x16x4xf32>
}

// -----

// The same step through one-shot-bufferize's default boundary type: every
// argument a memref with a fully dynamic layout.
// EQUIV: func=bufferized_default_layout caches=3,4 cache_results=1,2 pos=5 steps=3

// LLVM-LABEL: llvm.func @bufferized_default_layout(
// CHECK-LABEL: func.func @bufferized_default_layout(
// CHECK-SAME: memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>, %[[C:arg[0-9]+]]: !cache, %{{.*}}: index) -> memref<1x2x1x4xf32>
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]
// SAME: @bufferized_default_layout: 24 values over 3 steps agree

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @bufferized_default_layout(%arg0: memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>, %arg1: memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>, %arg2: memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>, %arg3: memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>, %arg4: memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>, %arg5: index) -> (memref<1x2x1x4xf32>, memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  %subview = memref.subview %arg3[0, 0, %arg5, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>> to memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  memref.copy %arg1, %subview : memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>> to memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  %subview_0 = memref.subview %arg4[0, 0, %arg5, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>> to memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  memref.copy %arg2, %subview_0 : memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>> to memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  %c1 = arith.constant 1 : index
  %0 = arith.addi %arg5, %c1 : index
  %subview_1 = memref.subview %arg3[0, 0, 0, 0] [1, 2, %0, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>> to memref<1x2x?x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  %subview_2 = memref.subview %arg4[0, 0, 0, 0] [1, 2, %0, 4] [1, 1, 1, 1] : memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>> to memref<1x2x?x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  %alloc = memref.alloc(%0) {alignment = 64 : i64} : memref<1x2x4x?xf32>
  linalg.transpose ins(%subview_1 : memref<1x2x?x4xf32, strided<[?, ?, ?, ?], offset: ?>>) outs(%alloc : memref<1x2x4x?xf32>) permutation = [0, 1, 3, 2] 
  %collapse_shape = memref.collapse_shape %arg0 [[0, 1], [2], [3]] : memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>> into memref<2x1x4xf32, strided<[?, ?, ?], offset: ?>>
  %collapse_shape_3 = memref.collapse_shape %alloc [[0, 1], [2], [3]] : memref<1x2x4x?xf32> into memref<2x4x?xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %alloc_4 = memref.alloc(%0) {alignment = 64 : i64} : memref<2x1x?xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_4 : memref<2x1x?xf32>)
  linalg.batch_matmul ins(%collapse_shape, %collapse_shape_3 : memref<2x1x4xf32, strided<[?, ?, ?], offset: ?>>, memref<2x4x?xf32>) outs(%alloc_4 : memref<2x1x?xf32>)
  %expand_shape = memref.expand_shape %alloc_4 [[0, 1], [2], [3]] output_shape [1, 2, 1, %0] : memref<2x1x?xf32> into memref<1x2x1x?xf32>
  %cst_5 = arith.constant 2.000000e+00 : f32
  %alloc_6 = memref.alloc(%0) {alignment = 64 : i64} : memref<1x2x1x?xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expand_shape : memref<1x2x1x?xf32>) outs(%alloc_6 : memref<1x2x1x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.divf %in, %cst_5 : f32
    linalg.yield %1 : f32
  }
  %alloc_7 = memref.alloc(%0) {alignment = 64 : i64} : memref<1x2x1x?xf32>
  linalg.softmax dimension(3) ins(%alloc_6 : memref<1x2x1x?xf32>) outs(%alloc_7 : memref<1x2x1x?xf32>)
  %collapse_shape_8 = memref.collapse_shape %alloc_7 [[0, 1], [2], [3]] : memref<1x2x1x?xf32> into memref<2x1x?xf32>
  %collapse_shape_9 = memref.collapse_shape %subview_2 [[0, 1], [2], [3]] : memref<1x2x?x4xf32, strided<[?, ?, ?, ?], offset: ?>> into memref<2x?x4xf32, strided<[?, ?, ?], offset: ?>>
  %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<2x1x4xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_10 : memref<2x1x4xf32>)
  linalg.batch_matmul ins(%collapse_shape_8, %collapse_shape_9 : memref<2x1x?xf32>, memref<2x?x4xf32, strided<[?, ?, ?], offset: ?>>) outs(%alloc_10 : memref<2x1x4xf32>)
  %expand_shape_11 = memref.expand_shape %alloc_10 [[0, 1], [2], [3]] output_shape [1, 2, 1, 4] : memref<2x1x4xf32> into memref<1x2x1x4xf32>
  %cast = memref.cast %expand_shape_11 : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[?, ?, ?, ?], offset: ?>>
  return %expand_shape_11, %arg3, %arg4 : memref<1x2x1x4xf32>, memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x2x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>
}

// -----

// A step computing on tensors between buffer arguments: each argument read
// by bufferization.to_tensor, the new caches and the output written into
// the caller's buffers by materialize_in_destination (MLIR's ops for a
// tensor body behind a buffer ABI).
// EQUIV: func=tensors_between_buffers caches=3,4 pos=6 outs=5 steps=4

// LLVM-LABEL: llvm.func @tensors_between_buffers(
// CHECK-LABEL: func.func @tensors_between_buffers(
// CHECK-SAME: %{{.*}}: memref<1x2x1x4xf32>, %{{.*}}: memref<1x2x1x4xf32>, %{{.*}}: memref<1x2x1x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[OUT:arg[0-9]+]]: memref<1x2x1x4xf32>, %{{.*}}: index) {
// CHECK-NOT: to_tensor %[[OUT]]
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]]
// CHECK-NEXT: return
// SAME: @tensors_between_buffers: 32 values over 4 steps agree

func.func @tensors_between_buffers(%qb: memref<1x2x1x4xf32>, %kb: memref<1x2x1x4xf32>, %vb: memref<1x2x1x4xf32>, %kcb: memref<1x2x16x4xf32>, %vcb: memref<1x2x16x4xf32>, %out: memref<1x2x1x4xf32>, %pos: index) {
  %q = bufferization.to_tensor %qb restrict : memref<1x2x1x4xf32> to tensor<1x2x1x4xf32>
  %k = bufferization.to_tensor %kb restrict : memref<1x2x1x4xf32> to tensor<1x2x1x4xf32>
  %v = bufferization.to_tensor %vb restrict : memref<1x2x1x4xf32> to tensor<1x2x1x4xf32>
  %kc = bufferization.to_tensor %kcb restrict writable : memref<1x2x16x4xf32> to tensor<1x2x16x4xf32>
  %vc = bufferization.to_tensor %vcb restrict writable : memref<1x2x16x4xf32> to tensor<1x2x16x4xf32>
  %kc1 = tensor.insert_slice %k into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x?x4xf32>
  %vr = tensor.extract_slice %vc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x?x4xf32>
  %e0 = tensor.empty(%len) : tensor<1x2x4x?xf32>
  %kt = linalg.transpose ins(%kr : tensor<1x2x?x4xf32>) outs(%e0 : tensor<1x2x4x?xf32>) permutation = [0, 1, 3, 2]
  %q3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x1x4xf32> into tensor<2x1x4xf32>
  %kt3 = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x4x?xf32> into tensor<2x4x?xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s3 = linalg.batch_matmul ins(%q3, %kt3 : tensor<2x1x4xf32>, tensor<2x4x?xf32>) outs(%f1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s4 = tensor.expand_shape %s3 [[0, 1], [2], [3]] output_shape [1, 2, 1, %len] : tensor<2x1x?xf32> into tensor<1x2x1x?xf32>
  %two = arith.constant 2.0 : f32
  %e2 = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4 : tensor<1x2x1x?xf32>) outs(%e2 : tensor<1x2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %two : f32
    linalg.yield %d : f32
  } -> tensor<1x2x1x?xf32>
  %e3 = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<1x2x1x?xf32>) outs(%e3 : tensor<1x2x1x?xf32>) -> tensor<1x2x1x?xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x1x?xf32> into tensor<2x1x?xf32>
  %v3 = tensor.collapse_shape %vr [[0, 1], [2], [3]] : tensor<1x2x?x4xf32> into tensor<2x?x4xf32>
  %e4 = tensor.empty() : tensor<2x1x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %o3 = linalg.batch_matmul ins(%p3, %v3 : tensor<2x1x?xf32>, tensor<2x?x4xf32>) outs(%f4 : tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %o = tensor.expand_shape %o3 [[0, 1], [2], [3]] output_shape [1, 2, 1, 4] : tensor<2x1x4xf32> into tensor<1x2x1x4xf32>
  bufferization.materialize_in_destination %kc1 in restrict writable %kcb : (tensor<1x2x16x4xf32>, memref<1x2x16x4xf32>) -> ()
  bufferization.materialize_in_destination %vc1 in restrict writable %vcb : (tensor<1x2x16x4xf32>, memref<1x2x16x4xf32>) -> ()
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<1x2x1x4xf32>, memref<1x2x1x4xf32>) -> ()
  return
}

// -----

// A llama2.c-style step written on buffers (run.c, forward(): s->key_cache
// and s->value_cache [n_layers, seq_len, kv_dim], here as [.., kv_heads,
// head_size], the same row-major memory). The layers are written out (run.c's
// loop over the layers is @llama2c_layer_loop below). As run.c does, the key and value projections
// write straight into the cache row at pos (s->k = s->key_cache + loff +
// pos * kv_dim, zeroed and accumulated by the matmul), the scores are
// divided by sqrt(head_size) in place, the softmax is linalg.softmax, the
// weighted sum goes to s->xb, the residual is added and the result copied
// into the output buffer.
// EQUIV: func=llama2c_step caches=4,5 pos=7 outs=6 steps=4

// LLVM-LABEL: llvm.func @llama2c_step(
// CHECK-LABEL: func.func @llama2c_step(
// CHECK-SAME: %[[X:arg[0-9]+]]: memref<8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %[[C:arg[0-9]+]]: !cache, %[[OUT:arg[0-9]+]]: memref<8xf32>, %{{.*}}: index) {
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]
// CHECK: kvq.cache_update %[[C]][1]
// CHECK: kvq.cache_attend %[[C]][1]
// CHECK-NOT: memref.copy
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]] : (tensor<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: return
// SAME: @llama2c_step: 32 values over 4 steps agree

#w = affine_map<(h, c, i) -> (h, c, i)>
#xi = affine_map<(h, c, i) -> (i)>
#hc = affine_map<(h, c, i) -> (h, c)>
#q = affine_map<(h, t, c) -> (h, c)>
#k = affine_map<(h, t, c) -> (t, h, c)>
#s = affine_map<(h, t, c) -> (h, t)>
#p = affine_map<(h, c, t) -> (h, t)>
#v = affine_map<(h, c, t) -> (t, h, c)>
#o = affine_map<(h, c, t) -> (h, c)>
#id1 = affine_map<(d) -> (d)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @llama2c_step(%x: memref<8xf32>, %wq: memref<2x2x4x8xf32>, %wk: memref<2x2x4x8xf32>, %wv: memref<2x2x4x8xf32>, %kc: memref<2x16x2x4xf32>, %vc: memref<2x16x2x4xf32>, %out: memref<8xf32>, %pos: index) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index

  // layer 0: loff = l * seq_len * kv_dim
  %wq0 = memref.subview %wq[0, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1]>>
  %wk0 = memref.subview %wk[0, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1]>>
  %wv0 = memref.subview %wv[0, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1]>>
  %q0 = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%zero : f32) outs(%q0 : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wq0, %x : memref<2x4x8xf32, strided<[32, 8, 1]>>, memref<8xf32>) outs(%q0 : memref<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // s->k = s->key_cache + loff + pos * kv_dim; matmul(s->k, s->xb, w->wk + l*dim*kv_dim, ...)
  %krow0 = memref.subview %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: ?>>
  linalg.fill ins(%zero : f32) outs(%krow0 : memref<2x4xf32, strided<[4, 1], offset: ?>>)
  linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wk0, %x : memref<2x4x8xf32, strided<[32, 8, 1]>>, memref<8xf32>) outs(%krow0 : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %vrow0 = memref.subview %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: ?>>
  linalg.fill ins(%zero : f32) outs(%vrow0 : memref<2x4xf32, strided<[4, 1], offset: ?>>)
  linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wv0, %x : memref<2x4x8xf32, strided<[32, 8, 1]>>, memref<8xf32>) outs(%vrow0 : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // k = s->key_cache + loff + t * kv_dim + h * head_size, for t <= pos
  %ks0 = memref.subview %kc[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1]>>
  %vs0 = memref.subview %vc[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1]>>
  %att0 = memref.alloc(%len) : memref<2x?xf32>
  linalg.fill ins(%zero : f32) outs(%att0 : memref<2x?xf32>)
  linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q0, %ks0 : memref<2x4xf32>, memref<?x2x4xf32, strided<[8, 4, 1]>>) outs(%att0 : memref<2x?xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // score /= sqrtf(head_size), in place
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%att0 : memref<2x?xf32>) {
  ^bb0(%o: f32):
    %d = arith.divf %o, %two : f32
    linalg.yield %d : f32
  }
  %p0 = memref.alloc(%len) : memref<2x?xf32>
  linalg.softmax dimension(1) ins(%att0 : memref<2x?xf32>) outs(%p0 : memref<2x?xf32>)
  // xb = sum over t of att[t] * v
  %xb0 = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%zero : f32) outs(%xb0 : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p0, %vs0 : memref<2x?xf32>, memref<?x2x4xf32, strided<[8, 4, 1]>>) outs(%xb0 : memref<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // x += xb (the residual)
  %xbf0 = memref.collapse_shape %xb0 [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  %x1 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%x, %xbf0 : memref<8xf32>, memref<8xf32>) outs(%x1 : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }

  // layer 1: loff = l * seq_len * kv_dim
  %wq1 = memref.subview %wq[1, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: 64>>
  %wk1 = memref.subview %wk[1, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: 64>>
  %wv1 = memref.subview %wv[1, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: 64>>
  %q1 = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%zero : f32) outs(%q1 : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wq1, %x1 : memref<2x4x8xf32, strided<[32, 8, 1], offset: 64>>, memref<8xf32>) outs(%q1 : memref<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // s->k = s->key_cache + loff + pos * kv_dim; matmul(s->k, s->xb, w->wk + l*dim*kv_dim, ...)
  %krow1 = memref.subview %kc[1, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: ?>>
  linalg.fill ins(%zero : f32) outs(%krow1 : memref<2x4xf32, strided<[4, 1], offset: ?>>)
  linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wk1, %x1 : memref<2x4x8xf32, strided<[32, 8, 1], offset: 64>>, memref<8xf32>) outs(%krow1 : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %vrow1 = memref.subview %vc[1, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: ?>>
  linalg.fill ins(%zero : f32) outs(%vrow1 : memref<2x4xf32, strided<[4, 1], offset: ?>>)
  linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wv1, %x1 : memref<2x4x8xf32, strided<[32, 8, 1], offset: 64>>, memref<8xf32>) outs(%vrow1 : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // k = s->key_cache + loff + t * kv_dim + h * head_size, for t <= pos
  %ks1 = memref.subview %kc[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1], offset: 128>>
  %vs1 = memref.subview %vc[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1], offset: 128>>
  %att1 = memref.alloc(%len) : memref<2x?xf32>
  linalg.fill ins(%zero : f32) outs(%att1 : memref<2x?xf32>)
  linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q1, %ks1 : memref<2x4xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: 128>>) outs(%att1 : memref<2x?xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // score /= sqrtf(head_size), in place
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%att1 : memref<2x?xf32>) {
  ^bb0(%o: f32):
    %d = arith.divf %o, %two : f32
    linalg.yield %d : f32
  }
  %p1 = memref.alloc(%len) : memref<2x?xf32>
  linalg.softmax dimension(1) ins(%att1 : memref<2x?xf32>) outs(%p1 : memref<2x?xf32>)
  // xb = sum over t of att[t] * v
  %xb1 = memref.alloc() : memref<2x4xf32>
  linalg.fill ins(%zero : f32) outs(%xb1 : memref<2x4xf32>)
  linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p1, %vs1 : memref<2x?xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: 128>>) outs(%xb1 : memref<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // x += xb (the residual)
  %xbf1 = memref.collapse_shape %xb1 [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  %x2 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%x1, %xbf1 : memref<8xf32>, memref<8xf32>) outs(%x2 : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }

  // memcpy(out, x): the step's output
  memref.copy %x2, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

// The same step with run.c's loop over the layers kept (for (l = 0; l <
// n_layers; l++)): the weights and the cache rows are subviews at the
// loop's index, the residual stream x lives in a scratch buffer (s->x) that
// the body reads and updates in place. On tensors each buffer the body
// writes (the two caches and x) is carried by the loop, which the pass then
// unrolls as it does a tensor loop over layers.
// EQUIV: func=llama2c_layer_loop caches=4,5 pos=7 outs=6 steps=4

// LLVM-LABEL: llvm.func @llama2c_layer_loop(
// CHECK-LABEL: func.func @llama2c_layer_loop(
// CHECK-SAME: %[[X:arg[0-9]+]]: memref<8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %[[C:arg[0-9]+]]: !cache, %[[OUT:arg[0-9]+]]: memref<8xf32>, %{{.*}}: index) {
// CHECK-NOT: scf.for
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]
// CHECK: kvq.cache_update %[[C]][1]
// CHECK: kvq.cache_attend %[[C]][1]
// CHECK-NOT: memref.copy
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]] : (tensor<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: return
// SAME: @llama2c_layer_loop: 32 values over 4 steps agree

#w = affine_map<(h, c, i) -> (h, c, i)>
#xi = affine_map<(h, c, i) -> (i)>
#hc = affine_map<(h, c, i) -> (h, c)>
#q = affine_map<(h, t, c) -> (h, c)>
#k = affine_map<(h, t, c) -> (t, h, c)>
#s = affine_map<(h, t, c) -> (h, t)>
#p = affine_map<(h, c, t) -> (h, t)>
#v = affine_map<(h, c, t) -> (t, h, c)>
#o = affine_map<(h, c, t) -> (h, c)>
#id1 = affine_map<(d) -> (d)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @llama2c_layer_loop(%x: memref<8xf32>, %wq: memref<2x2x4x8xf32>, %wk: memref<2x2x4x8xf32>, %wv: memref<2x2x4x8xf32>, %kc: memref<2x16x2x4xf32>, %vc: memref<2x16x2x4xf32>, %out: memref<8xf32>, %pos: index) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c1 : index
  // memcpy(s->x, content_row): the residual stream
  %xs = memref.alloc() : memref<8xf32>
  memref.copy %x, %xs : memref<8xf32> to memref<8xf32>
  scf.for %l = %c0 to %c2 step %c1 {
    %wql = memref.subview %wq[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %wkl = memref.subview %wk[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %wvl = memref.subview %wv[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %q = memref.alloc() : memref<2x4xf32>
    linalg.fill ins(%zero : f32) outs(%q : memref<2x4xf32>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wql, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%q : memref<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    // s->k = s->key_cache + loff + pos * kv_dim
    %krow = memref.subview %kc[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%krow : memref<2x4xf32, strided<[4, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wkl, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%krow : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    %vrow = memref.subview %vc[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%vrow : memref<2x4xf32, strided<[4, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wvl, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%vrow : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    %ks = memref.subview %kc[%l, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>
    %vs = memref.subview %vc[%l, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>
    %att = memref.alloc(%len) : memref<2x?xf32>
    linalg.fill ins(%zero : f32) outs(%att : memref<2x?xf32>)
    linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %ks : memref<2x4xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>) outs(%att : memref<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%att : memref<2x?xf32>) {
    ^bb0(%o: f32):
      %d = arith.divf %o, %two : f32
      linalg.yield %d : f32
    }
    %p = memref.alloc(%len) : memref<2x?xf32>
    linalg.softmax dimension(1) ins(%att : memref<2x?xf32>) outs(%p : memref<2x?xf32>)
    %xb = memref.alloc() : memref<2x4xf32>
    linalg.fill ins(%zero : f32) outs(%xb : memref<2x4xf32>)
    linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p, %vs : memref<2x?xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>) outs(%xb : memref<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    // x += xb, in place (the residual)
    %xbf = memref.collapse_shape %xb [[0, 1]] : memref<2x4xf32> into memref<8xf32>
    linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%xs, %xbf : memref<8xf32>, memref<8xf32>) outs(%xs : memref<8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  }
  memref.copy %xs, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

// run.c's own cache layout, [n_layers, seq_len, kv_dim] with the heads
// flattened into kv_dim: the row at pos and the prefix are subviews of the
// flat cache, split into [kv_heads, head_size] by memref.expand_shape (the
// pointer arithmetic key_cache + loff + t * kv_dim + h * head_size). With
// two layers the pass reads the cache as a K|V pair split in two halves;
// the halves are still the layers' caches, and the function's other buffers
// are written back in place as they were.
// EQUIV: func=llama2c_flat_cache caches=4,5 pos=7 outs=6 steps=4

// LLVM-LABEL: llvm.func @llama2c_flat_cache(
// CHECK-LABEL: func.func @llama2c_flat_cache(
// CHECK-SAME: %[[X:arg[0-9]+]]: memref<8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %{{.*}}: memref<2x2x4x8xf32>, %[[C:arg[0-9]+]]: !cache, %[[OUT:arg[0-9]+]]: memref<8xf32>, %{{.*}}: index) {
// CHECK-NOT: scf.for
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]
// CHECK: kvq.cache_update %[[C]][1]
// CHECK: kvq.cache_attend %[[C]][1]
// CHECK-NOT: memref.copy
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]] : (tensor<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: return
// SAME: @llama2c_flat_cache: 32 values over 4 steps agree

#w = affine_map<(h, c, i) -> (h, c, i)>
#xi = affine_map<(h, c, i) -> (i)>
#hc = affine_map<(h, c, i) -> (h, c)>
#q = affine_map<(h, t, c) -> (h, c)>
#k = affine_map<(h, t, c) -> (t, h, c)>
#s = affine_map<(h, t, c) -> (h, t)>
#p = affine_map<(h, c, t) -> (h, t)>
#v = affine_map<(h, c, t) -> (t, h, c)>
#o = affine_map<(h, c, t) -> (h, c)>
#id1 = affine_map<(d) -> (d)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @llama2c_flat_cache(%x: memref<8xf32>, %wq: memref<2x2x4x8xf32>, %wk: memref<2x2x4x8xf32>, %wv: memref<2x2x4x8xf32>, %kc: memref<2x16x8xf32>, %vc: memref<2x16x8xf32>, %out: memref<8xf32>, %pos: index) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c1 : index
  // memcpy(s->x, content_row): the residual stream
  %xs = memref.alloc() : memref<8xf32>
  memref.copy %x, %xs : memref<8xf32> to memref<8xf32>
  scf.for %l = %c0 to %c2 step %c1 {
    %wql = memref.subview %wq[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %wkl = memref.subview %wk[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %wvl = memref.subview %wv[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<2x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %q = memref.alloc() : memref<2x4xf32>
    linalg.fill ins(%zero : f32) outs(%q : memref<2x4xf32>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wql, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%q : memref<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    // s->k = s->key_cache + loff + pos * kv_dim
    %krowf = memref.subview %kc[%l, %pos, 0] [1, 1, 8] [1, 1, 1] : memref<2x16x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %krow = memref.expand_shape %krowf [[0, 1]] output_shape [2, 4] : memref<8xf32, strided<[1], offset: ?>> into memref<2x4xf32, strided<[4, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%krow : memref<2x4xf32, strided<[4, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wkl, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%krow : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    %vrowf = memref.subview %vc[%l, %pos, 0] [1, 1, 8] [1, 1, 1] : memref<2x16x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %vrow = memref.expand_shape %vrowf [[0, 1]] output_shape [2, 4] : memref<8xf32, strided<[1], offset: ?>> into memref<2x4xf32, strided<[4, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%vrow : memref<2x4xf32, strided<[4, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wvl, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%vrow : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    %ksf = memref.subview %kc[%l, 0, 0] [1, %len, 8] [1, 1, 1] : memref<2x16x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
    %ks = memref.expand_shape %ksf [[0], [1, 2]] output_shape [%len, 2, 4] : memref<?x8xf32, strided<[8, 1], offset: ?>> into memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>
    %vsf = memref.subview %vc[%l, 0, 0] [1, %len, 8] [1, 1, 1] : memref<2x16x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
    %vs = memref.expand_shape %vsf [[0], [1, 2]] output_shape [%len, 2, 4] : memref<?x8xf32, strided<[8, 1], offset: ?>> into memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>
    %att = memref.alloc(%len) : memref<2x?xf32>
    linalg.fill ins(%zero : f32) outs(%att : memref<2x?xf32>)
    linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %ks : memref<2x4xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>) outs(%att : memref<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%att : memref<2x?xf32>) {
    ^bb0(%o: f32):
      %d = arith.divf %o, %two : f32
      linalg.yield %d : f32
    }
    %p = memref.alloc(%len) : memref<2x?xf32>
    linalg.softmax dimension(1) ins(%att : memref<2x?xf32>) outs(%p : memref<2x?xf32>)
    %xb = memref.alloc() : memref<2x4xf32>
    linalg.fill ins(%zero : f32) outs(%xb : memref<2x4xf32>)
    linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p, %vs : memref<2x?xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>) outs(%xb : memref<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    // x += xb, in place (the residual)
    %xbf = memref.collapse_shape %xb [[0, 1]] : memref<2x4xf32> into memref<8xf32>
    linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%xs, %xbf : memref<8xf32>, memref<8xf32>) outs(%xs : memref<8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  }
  memref.copy %xs, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

// The flat cache of three layers: a first dimension of 2 could also be read
// as a K|V pair (the form above is adopted either way); here only the heads
// are split out of kv_dim.
// EQUIV: func=llama2c_flat_cache_3 caches=4,5 pos=7 outs=6 steps=4

// CHECK-LABEL: func.func @llama2c_flat_cache_3(
// CHECK-SAME: %[[C:arg[0-9]+]]: !cache, %[[OUT:arg[0-9]+]]: memref<8xf32>, %{{.*}}: index) {
// CHECK-NOT: scf.for
// CHECK: kvq.cache_attend %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][1]
// CHECK: kvq.cache_attend %[[C]][2]
// CHECK-NOT: memref.copy
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]] : (tensor<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: return
// SAME: @llama2c_flat_cache_3: 32 values over 4 steps agree

#w = affine_map<(h, c, i) -> (h, c, i)>
#xi = affine_map<(h, c, i) -> (i)>
#hc = affine_map<(h, c, i) -> (h, c)>
#q = affine_map<(h, t, c) -> (h, c)>
#k = affine_map<(h, t, c) -> (t, h, c)>
#s = affine_map<(h, t, c) -> (h, t)>
#p = affine_map<(h, c, t) -> (h, t)>
#v = affine_map<(h, c, t) -> (t, h, c)>
#o = affine_map<(h, c, t) -> (h, c)>
#id1 = affine_map<(d) -> (d)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @llama2c_flat_cache_3(%x: memref<8xf32>, %wq: memref<3x2x4x8xf32>, %wk: memref<3x2x4x8xf32>, %wv: memref<3x2x4x8xf32>, %kc: memref<3x16x8xf32>, %vc: memref<3x16x8xf32>, %out: memref<8xf32>, %pos: index) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %len = arith.addi %pos, %c1 : index
  // memcpy(s->x, content_row): the residual stream
  %xs = memref.alloc() : memref<8xf32>
  memref.copy %x, %xs : memref<8xf32> to memref<8xf32>
  scf.for %l = %c0 to %c3 step %c1 {
    %wql = memref.subview %wq[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<3x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %wkl = memref.subview %wk[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<3x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %wvl = memref.subview %wv[%l, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<3x2x4x8xf32> to memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>
    %q = memref.alloc() : memref<2x4xf32>
    linalg.fill ins(%zero : f32) outs(%q : memref<2x4xf32>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wql, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%q : memref<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    // s->k = s->key_cache + loff + pos * kv_dim
    %krowf = memref.subview %kc[%l, %pos, 0] [1, 1, 8] [1, 1, 1] : memref<3x16x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %krow = memref.expand_shape %krowf [[0, 1]] output_shape [2, 4] : memref<8xf32, strided<[1], offset: ?>> into memref<2x4xf32, strided<[4, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%krow : memref<2x4xf32, strided<[4, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wkl, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%krow : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    %vrowf = memref.subview %vc[%l, %pos, 0] [1, 1, 8] [1, 1, 1] : memref<3x16x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %vrow = memref.expand_shape %vrowf [[0, 1]] output_shape [2, 4] : memref<8xf32, strided<[1], offset: ?>> into memref<2x4xf32, strided<[4, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%vrow : memref<2x4xf32, strided<[4, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#w, #xi, #hc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wvl, %xs : memref<2x4x8xf32, strided<[32, 8, 1], offset: ?>>, memref<8xf32>) outs(%vrow : memref<2x4xf32, strided<[4, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    %ksf = memref.subview %kc[%l, 0, 0] [1, %len, 8] [1, 1, 1] : memref<3x16x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
    %ks = memref.expand_shape %ksf [[0], [1, 2]] output_shape [%len, 2, 4] : memref<?x8xf32, strided<[8, 1], offset: ?>> into memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>
    %vsf = memref.subview %vc[%l, 0, 0] [1, %len, 8] [1, 1, 1] : memref<3x16x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
    %vs = memref.expand_shape %vsf [[0], [1, 2]] output_shape [%len, 2, 4] : memref<?x8xf32, strided<[8, 1], offset: ?>> into memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>
    %att = memref.alloc(%len) : memref<2x?xf32>
    linalg.fill ins(%zero : f32) outs(%att : memref<2x?xf32>)
    linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %ks : memref<2x4xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>) outs(%att : memref<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%att : memref<2x?xf32>) {
    ^bb0(%o: f32):
      %d = arith.divf %o, %two : f32
      linalg.yield %d : f32
    }
    %p = memref.alloc(%len) : memref<2x?xf32>
    linalg.softmax dimension(1) ins(%att : memref<2x?xf32>) outs(%p : memref<2x?xf32>)
    %xb = memref.alloc() : memref<2x4xf32>
    linalg.fill ins(%zero : f32) outs(%xb : memref<2x4xf32>)
    linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p, %vs : memref<2x?xf32>, memref<?x2x4xf32, strided<[8, 4, 1], offset: ?>>) outs(%xb : memref<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    // x += xb, in place (the residual)
    %xbf = memref.collapse_shape %xb [[0, 1]] : memref<2x4xf32> into memref<8xf32>
    linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%xs, %xbf : memref<8xf32>, memref<8xf32>) outs(%xs : memref<8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  }
  memref.copy %xs, %out : memref<8xf32> to memref<8xf32>
  return
}
