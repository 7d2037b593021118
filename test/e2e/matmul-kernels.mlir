// RUN: kvq-opt %s --kvq-to-llvm | FileCheck %s --check-prefix=KERNELS
// RUN: kvq-opt %s --kvq-to-llvm="matmul-kernels=false" | FileCheck %s --check-prefix=LOOPS
// RUN: kvq-opt %s --kvq-to-llvm | mlir-translate --mlir-to-llvmir -o %t.kernels.ll
// RUN: %host_cc %t.kernels.ll %S/Inputs/print_memref_driver.c %kvq_host_link -o %t.kernels
// RUN: kvq-opt %s --kvq-to-llvm="matmul-kernels=false" | mlir-translate --mlir-to-llvmir -o %t.loops.ll
// RUN: %host_cc %t.loops.ll %S/Inputs/print_memref_driver.c %kvq_host_link -o %t.loops
// RUN: %t.kernels > %t.kernels.out
// RUN: %t.loops > %t.loops.out
// RUN: diff %t.kernels.out %t.loops.out
// RUN: FileCheck %s < %t.kernels.out

// Dense layers through kvq_matmul give what upstream's loops give: a
// projection from a slice of a flat weight buffer (5 x 13 outputs over 37
// inputs: odd sizes, a partial 32-element chunk), a matrix-vector product
// (linalg.matvec), and f16 weights widened in the body. The inputs are
// small integers, so every sum is exact in any order and the two lowerings
// must agree bit for bit.

// KERNELS-COUNT-3: llvm.call @kvq_matmul(
// KERNELS-NOT: llvm.call @kvq_matmul(
// LOOPS-NOT: kvq_matmul

// CHECK: elements: 88
// CHECK-COUNT-88: {{^-?0x[0-9a-f.]+p[-+][0-9]+$}}
// CHECK: pending status: 0

#id2 = affine_map<(i, j) -> (i, j)>
#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (n, k)>
#y = affine_map<(m, n, k) -> (m, n)>

func.func @run() -> tensor<88xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  // x [5, 37] and a flat weight buffer of 600 holding w [13, 37] at 100:
  // x[i][k] = (7i + 3k) mod 11 - 5, flat[i] = i mod 7 - 3.
  %xe = tensor.empty() : tensor<5x37xf32>
  %x = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%xe : tensor<5x37xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %k = linalg.index 1 : index
    %c3 = arith.constant 3 : index
    %c5 = arith.constant 5 : index
    %c7 = arith.constant 7 : index
    %c11 = arith.constant 11 : index
    %a = arith.muli %i, %c7 : index
    %b = arith.muli %k, %c3 : index
    %s = arith.addi %a, %b : index
    %m = arith.remui %s, %c11 : index
    %v = arith.subi %m, %c5 : index
    %vi = arith.index_cast %v : index to i64
    %f = arith.sitofp %vi : i64 to f32
    linalg.yield %f : f32
  } -> tensor<5x37xf32>
  %fe = tensor.empty() : tensor<600xf32>
  %flat = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]} outs(%fe : tensor<600xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c3 = arith.constant 3 : index
    %c7 = arith.constant 7 : index
    %m = arith.remui %i, %c7 : index
    %v = arith.subi %m, %c3 : index
    %vi = arith.index_cast %v : index to i64
    %f = arith.sitofp %vi : i64 to f32
    linalg.yield %f : f32
  } -> tensor<600xf32>
  %ws = tensor.extract_slice %flat[100] [481] [1] : tensor<600xf32> to tensor<481xf32>
  %w = tensor.expand_shape %ws [[0, 1]] output_shape [13, 37] : tensor<481xf32> into tensor<13x37xf32>

  %ye = tensor.empty() : tensor<5x13xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<5x13xf32>) -> tensor<5x13xf32>
  %y = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x37xf32>, tensor<13x37xf32>) outs(%yz : tensor<5x13xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<5x13xf32>

  // y2 = w . x[2] (linalg.matvec), 13 outputs.
  %x2 = tensor.extract_slice %x[2, 0] [1, 37] [1, 1] : tensor<5x37xf32> to tensor<37xf32>
  %ve = tensor.empty() : tensor<13xf32>
  %vz = linalg.fill ins(%zero : f32) outs(%ve : tensor<13xf32>) -> tensor<13xf32>
  %v = linalg.matvec ins(%w, %x2 : tensor<13x37xf32>, tensor<37xf32>) outs(%vz : tensor<13xf32>) -> tensor<13xf32>

  // The same w as f16 (small integers are exact), widened in the body.
  %he = tensor.empty() : tensor<13x37xf16>
  %h = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<13x37xf32>) outs(%he : tensor<13x37xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<13x37xf16>
  %x01 = tensor.extract_slice %x[0, 0] [1, 37] [1, 1] : tensor<5x37xf32> to tensor<1x37xf32>
  %ge = tensor.empty() : tensor<1x13xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<1x13xf32>) -> tensor<1x13xf32>
  %g = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x01, %h : tensor<1x37xf32>, tensor<13x37xf16>) outs(%gz : tensor<1x13xf32>) {
  ^bb0(%a: f32, %b: f16, %acc: f32):
    %e = arith.extf %b : f16 to f32
    %p = arith.mulf %a, %e : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<1x13xf32>

  // The outputs concatenated: y (65), v (13) and the first 10 of g.
  %yf = tensor.collapse_shape %y [[0, 1]] : tensor<5x13xf32> into tensor<65xf32>
  %gf = tensor.collapse_shape %g [[0, 1]] : tensor<1x13xf32> into tensor<13xf32>
  %g10 = tensor.extract_slice %gf[0] [10] [1] : tensor<13xf32> to tensor<10xf32>
  %oe = tensor.empty() : tensor<88xf32>
  %o1 = tensor.insert_slice %yf into %oe[0] [65] [1] : tensor<65xf32> into tensor<88xf32>
  %o2 = tensor.insert_slice %v into %o1[65] [13] [1] : tensor<13xf32> into tensor<88xf32>
  %o3 = tensor.insert_slice %g10 into %o2[78] [10] [1] : tensor<10xf32> into tensor<88xf32>
  return %o3 : tensor<88xf32>
}
