// RUN: kvq-opt %s --convert-linalg-to-kvq-matmul --split-input-file | FileCheck %s
// RUN: kvq-opt %s --convert-linalg-to-kvq-matmul="on-error=report" --split-input-file | FileCheck %s --check-prefix=REPORT

// Which linalg ops on buffers become kvq_matmul calls, and with which
// pointers, strides and sizes; the ops the pass must leave alone stay.

#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (n, k)>
#y = affine_map<(m, n, k) -> (m, n)>

// A dense layer as kvq-import writes it: y[m][n] += x[m][k] * w[n][k], the
// weights a slice of one flat buffer (static offset 100).
// CHECK-LABEL: func.func @projection
// CHECK-SAME: (%[[FLAT:.*]]: memref<1000xf32>, %[[X:.*]]: memref<3x37xf32>)
// CHECK: %[[Y:.*]] = memref.alloc() : memref<3x13xf32>
// CHECK: linalg.fill
// CHECK: memref.extract_strided_metadata %[[X]]
// CHECK: %[[WBASE:.*]], %[[WOFF:.*]], %{{.*}}:2, %[[WSTR:.*]]:2 = memref.extract_strided_metadata %{{.*}} : memref<13x37xf32, strided<[37, 1], offset: 100>>
// CHECK: memref.extract_aligned_pointer_as_index %[[WBASE]]
// CHECK: arith.muli %{{.*}}, %c4_i64
// CHECK: memref.extract_strided_metadata %[[Y]]
// CHECK: %[[STATUS:.*]] = call @kvq_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i64, !llvm.ptr, i32, i64, !llvm.ptr, i64, i64, i64, i64) -> i32
// CHECK: %[[CHECKED:.*]] = call @kvq_check_status(%[[STATUS]], %{{.*}})
// CHECK: cf.assert
// CHECK-NOT: {{^ *}}linalg.generic
// CHECK: return %[[Y]]
// REPORT-LABEL: func.func @projection
// REPORT: call @kvq_matmul
// REPORT: call @kvq_check_status
// REPORT-NOT: cf.assert
func.func @projection(%flat: memref<1000xf32>, %x: memref<3x37xf32>) -> memref<3x13xf32> {
  %zero = arith.constant 0.0 : f32
  %s = memref.subview %flat[100] [481] [1] : memref<1000xf32> to memref<481xf32, strided<[1], offset: 100>>
  %w = memref.expand_shape %s [[0, 1]] output_shape [13, 37] : memref<481xf32, strided<[1], offset: 100>> into memref<13x37xf32, strided<[37, 1], offset: 100>>
  %y = memref.alloc() : memref<3x13xf32>
  linalg.fill ins(%zero : f32) outs(%y : memref<3x13xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<3x37xf32>, memref<13x37xf32, strided<[37, 1], offset: 100>>)
      outs(%y : memref<3x13xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return %y : memref<3x13xf32>
}

// -----

// f16 and bf16 weights widened in the body: weight types 1 and 2; the
// product's operands and the sum's in either order; dynamic sizes and a
// dynamic row stride.
// CHECK-LABEL: func.func @widened
// CHECK: call @kvq_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %c1_i32,
// CHECK: call @kvq_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %c2_i32,
// CHECK-NOT: {{^ *}}linalg.generic
func.func @widened(%x: memref<?x?xf32>, %wh: memref<?x?xf16, strided<[?, 1], offset: ?>>,
                   %wb: memref<?x?xbf16>, %n: index, %m: index) {
  %y = memref.alloc(%m, %n) : memref<?x?xf32>
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wh : memref<?x?xf32>, memref<?x?xf16, strided<[?, 1], offset: ?>>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32, %b: f16, %acc: f32):
    %e = arith.extf %b : f16 to f32
    %p = arith.mulf %e, %a : f32
    %r = arith.addf %p, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wb : memref<?x?xf32>, memref<?x?xbf16>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32, %b: bf16, %acc: f32):
    %e = arith.extf %b : bf16 to f32
    %p = arith.mulf %a, %e : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  memref.dealloc %y : memref<?x?xf32>
  return
}

// -----

// Named ops: linalg.matvec (the weights are its first operand: m = 1, the
// vector's length is its stride) and linalg.matmul with B transposed.
// CHECK-LABEL: func.func @named
// CHECK: call @kvq_matmul(%{{.*}}, %[[K:[0-9]+]], %{{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %[[N:[0-9]+]], %c1_i64, %[[N]], %[[K]])
// CHECK: call @kvq_matmul(
// CHECK-NOT: {{^ *}}linalg.matvec
// CHECK-NOT: {{^ *}}linalg.matmul
func.func @named(%a: memref<10x24xf32>, %v: memref<24xf32>, %x: memref<4x24xf32>) {
  %y = memref.alloc() : memref<10xf32>
  linalg.matvec ins(%a, %v : memref<10x24xf32>, memref<24xf32>) outs(%y : memref<10xf32>)
  %z = memref.alloca() : memref<4x10xf32>
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %a : memref<4x24xf32>, memref<10x24xf32>) outs(%z : memref<4x10xf32>)
  memref.dealloc %y : memref<10xf32>
  return
}

// -----

// Left alone: B stored [k][n] (the reduction is not innermost in the
// weights), x read down a column, a result buffer the caller passed (it
// could overlap the inputs), a result that views an input, a body that is
// not exactly acc + x * w, f64, and a batch dimension.
// CHECK-LABEL: func.func @refused
// CHECK-NOT: call @kvq_matmul
// CHECK-COUNT-7: linalg.{{generic|matmul|batch_matmul}}
// CHECK-NOT: call @kvq_matmul
func.func @refused(%x: memref<4x24xf32>, %b: memref<24x10xf32>, %w: memref<10x24xf32>,
                   %xt: memref<24x4xf32>, %out: memref<4x10xf32>,
                   %xd: memref<4x24xf64>, %wd: memref<10x24xf64>,
                   %bx: memref<2x4x24xf32>, %bw: memref<2x10x24xf32>) {
  %y = memref.alloc() : memref<4x10xf32>
  linalg.matmul ins(%x, %b : memref<4x24xf32>, memref<24x10xf32>) outs(%y : memref<4x10xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%xt, %w : memref<24x4xf32>, memref<10x24xf32>) outs(%y : memref<4x10xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<4x24xf32>, memref<10x24xf32>) outs(%out : memref<4x10xf32>)
  %big = memref.alloc() : memref<10x24xf32>
  %view = memref.subview %big[0, 0] [4, 10] [1, 1] : memref<10x24xf32> to memref<4x10xf32, strided<[24, 1]>>
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %big : memref<4x24xf32>, memref<10x24xf32>) outs(%view : memref<4x10xf32, strided<[24, 1]>>)
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x24xf32>, memref<10x24xf32>) outs(%y : memref<4x10xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %q = arith.mulf %p, %p : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  }
  %yd = memref.alloc() : memref<4x10xf64>
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%xd, %wd : memref<4x24xf64>, memref<10x24xf64>) outs(%yd : memref<4x10xf64>)
  %yb = memref.alloc() : memref<2x4x10xf32>
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>]
      ins(%bx, %bw : memref<2x4x24xf32>, memref<2x10x24xf32>) outs(%yb : memref<2x4x10xf32>)
  return
}
