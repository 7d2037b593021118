// RUN: kvq-opt %s --split-input-file --verify-diagnostics \
// RUN:   --kvq-quantize-kv-cache="method=kivi pre-rope=true" | FileCheck %s
// RUN: kvq-opt %s --split-input-file --kvq-quantize-kv-cache="method=kivi" \
// RUN:   | FileCheck %s --check-prefix=OFF

// kvq-quantize-kv-cache="pre-rope=true" on small graphs (one layer, decode,
// context 16, 2 KV heads, head_dim 4) whose key goes through a rotation
// before the cache write. Hugging Face's form: x * cos + rotate_half(x) *
// sin with cos/sin read from constant tables at row %pos (theta 100: pair
// frequencies 1 and 0.1). Adopted: the cache stores %k0 (the key before
// the rotation) and records the RoPE; without the option the rotated key
// is stored and the configuration has no rope.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4, rope = <theta = 1.000000e+02, style = half>>>
// CHECK-LABEL: func.func @half_from_tables(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x2x4xf32>, %[[K0:[a-z0-9]+]]: tensor<1x2x4xf32>
// CHECK-NOT: linalg.generic
// CHECK: kvq.cache_update %{{.*}}[0], %[[K0]], %{{.*}} :
// OFF: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#tc3 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @half_from_tables(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc0: tensor<16x2x4xf32>, %vc0: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %cos = arith.constant dense<[[1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00], [5.40302306e-01, 9.95004165e-01, 5.40302306e-01, 9.95004165e-01], [-4.16146837e-01, 9.80066578e-01, -4.16146837e-01, 9.80066578e-01], [-9.89992497e-01, 9.55336489e-01, -9.89992497e-01, 9.55336489e-01], [-6.53643621e-01, 9.21060994e-01, -6.53643621e-01, 9.21060994e-01], [2.83662185e-01, 8.77582562e-01, 2.83662185e-01, 8.77582562e-01], [9.60170287e-01, 8.25335615e-01, 9.60170287e-01, 8.25335615e-01], [7.53902254e-01, 7.64842187e-01, 7.53902254e-01, 7.64842187e-01], [-1.45500034e-01, 6.96706709e-01, -1.45500034e-01, 6.96706709e-01], [-9.11130262e-01, 6.21609968e-01, -9.11130262e-01, 6.21609968e-01], [-8.39071529e-01, 5.40302306e-01, -8.39071529e-01, 5.40302306e-01], [4.42569799e-03, 4.53596121e-01, 4.42569799e-03, 4.53596121e-01], [8.43853959e-01, 3.62357754e-01, 8.43853959e-01, 3.62357754e-01], [9.07446781e-01, 2.67498829e-01, 9.07446781e-01, 2.67498829e-01], [1.36737218e-01, 1.69967143e-01, 1.36737218e-01, 1.69967143e-01], [-7.59687913e-01, 7.07372017e-02, -7.59687913e-01, 7.07372017e-02]]> : tensor<16x4xf32>
  %sin = arith.constant dense<[[0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00], [8.41470985e-01, 9.98334166e-02, 8.41470985e-01, 9.98334166e-02], [9.09297427e-01, 1.98669331e-01, 9.09297427e-01, 1.98669331e-01], [1.41120008e-01, 2.95520207e-01, 1.41120008e-01, 2.95520207e-01], [-7.56802495e-01, 3.89418342e-01, -7.56802495e-01, 3.89418342e-01], [-9.58924275e-01, 4.79425539e-01, -9.58924275e-01, 4.79425539e-01], [-2.79415498e-01, 5.64642473e-01, -2.79415498e-01, 5.64642473e-01], [6.56986599e-01, 6.44217687e-01, 6.56986599e-01, 6.44217687e-01], [9.89358247e-01, 7.17356091e-01, 9.89358247e-01, 7.17356091e-01], [4.12118485e-01, 7.83326910e-01, 4.12118485e-01, 7.83326910e-01], [-5.44021111e-01, 8.41470985e-01, -5.44021111e-01, 8.41470985e-01], [-9.99990207e-01, 8.91207360e-01, -9.99990207e-01, 8.91207360e-01], [-5.36572918e-01, 9.32039086e-01, -5.36572918e-01, 9.32039086e-01], [4.20167037e-01, 9.63558185e-01, 4.20167037e-01, 9.63558185e-01], [9.90607356e-01, 9.85449730e-01, 9.90607356e-01, 9.85449730e-01], [6.50287840e-01, 9.97494987e-01, 6.50287840e-01, 9.97494987e-01]]> : tensor<16x4xf32>
  %cs = tensor.extract_slice %cos[%pos, 0] [1, 4] [1, 1] : tensor<16x4xf32> to tensor<1x4xf32>
  %sn = tensor.extract_slice %sin[%pos, 0] [1, 4] [1, 1] : tensor<16x4xf32> to tensor<1x4xf32>
  %re = tensor.empty() : tensor<1x2x4xf32>
  %kr = linalg.generic {indexing_maps = [#id3, #tc3, #tc3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k0, %cs, %sn : tensor<1x2x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) outs(%re : tensor<1x2x4xf32>) {
    ^bb0(%x: f32, %c: f32, %s: f32, %out: f32):
      %t = linalg.index 0 : index
      %h = linalg.index 1 : index
      %ch = linalg.index 2 : index
      %c2 = arith.constant 2 : index
      %lo = arith.cmpi ult, %ch, %c2 : index
      %up = arith.addi %ch, %c2 : index
      %dn = arith.subi %ch, %c2 : index
      %pc = arith.select %lo, %up, %dn : index
      %y = tensor.extract %k0[%t, %h, %pc] : tensor<1x2x4xf32>
      %ny = arith.negf %y : f32
      %rh = arith.select %lo, %ny, %y : f32
      %xc = arith.mulf %x, %c : f32
      %rs = arith.mulf %rh, %s : f32
      %r = arith.addf %xc, %rs : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4xf32>
  %kw0 = tensor.insert_slice %kr into %kc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// The rotation the other way (x * cos - rotate_half(x) * sin) is not a
// RoPE: the keys stay post-RoPE, the remark says why.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// CHECK-LABEL: func.func @turns_backwards(
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#tc3 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @turns_backwards(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc0: tensor<16x2x4xf32>, %vc0: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %cos = arith.constant dense<[[1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00], [5.40302306e-01, 9.95004165e-01, 5.40302306e-01, 9.95004165e-01], [-4.16146837e-01, 9.80066578e-01, -4.16146837e-01, 9.80066578e-01], [-9.89992497e-01, 9.55336489e-01, -9.89992497e-01, 9.55336489e-01], [-6.53643621e-01, 9.21060994e-01, -6.53643621e-01, 9.21060994e-01], [2.83662185e-01, 8.77582562e-01, 2.83662185e-01, 8.77582562e-01], [9.60170287e-01, 8.25335615e-01, 9.60170287e-01, 8.25335615e-01], [7.53902254e-01, 7.64842187e-01, 7.53902254e-01, 7.64842187e-01], [-1.45500034e-01, 6.96706709e-01, -1.45500034e-01, 6.96706709e-01], [-9.11130262e-01, 6.21609968e-01, -9.11130262e-01, 6.21609968e-01], [-8.39071529e-01, 5.40302306e-01, -8.39071529e-01, 5.40302306e-01], [4.42569799e-03, 4.53596121e-01, 4.42569799e-03, 4.53596121e-01], [8.43853959e-01, 3.62357754e-01, 8.43853959e-01, 3.62357754e-01], [9.07446781e-01, 2.67498829e-01, 9.07446781e-01, 2.67498829e-01], [1.36737218e-01, 1.69967143e-01, 1.36737218e-01, 1.69967143e-01], [-7.59687913e-01, 7.07372017e-02, -7.59687913e-01, 7.07372017e-02]]> : tensor<16x4xf32>
  %sin = arith.constant dense<[[0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00], [8.41470985e-01, 9.98334166e-02, 8.41470985e-01, 9.98334166e-02], [9.09297427e-01, 1.98669331e-01, 9.09297427e-01, 1.98669331e-01], [1.41120008e-01, 2.95520207e-01, 1.41120008e-01, 2.95520207e-01], [-7.56802495e-01, 3.89418342e-01, -7.56802495e-01, 3.89418342e-01], [-9.58924275e-01, 4.79425539e-01, -9.58924275e-01, 4.79425539e-01], [-2.79415498e-01, 5.64642473e-01, -2.79415498e-01, 5.64642473e-01], [6.56986599e-01, 6.44217687e-01, 6.56986599e-01, 6.44217687e-01], [9.89358247e-01, 7.17356091e-01, 9.89358247e-01, 7.17356091e-01], [4.12118485e-01, 7.83326910e-01, 4.12118485e-01, 7.83326910e-01], [-5.44021111e-01, 8.41470985e-01, -5.44021111e-01, 8.41470985e-01], [-9.99990207e-01, 8.91207360e-01, -9.99990207e-01, 8.91207360e-01], [-5.36572918e-01, 9.32039086e-01, -5.36572918e-01, 9.32039086e-01], [4.20167037e-01, 9.63558185e-01, 4.20167037e-01, 9.63558185e-01], [9.90607356e-01, 9.85449730e-01, 9.90607356e-01, 9.85449730e-01], [6.50287840e-01, 9.97494987e-01, 6.50287840e-01, 9.97494987e-01]]> : tensor<16x4xf32>
  %cs = tensor.extract_slice %cos[%pos, 0] [1, 4] [1, 1] : tensor<16x4xf32> to tensor<1x4xf32>
  %sn = tensor.extract_slice %sin[%pos, 0] [1, 4] [1, 1] : tensor<16x4xf32> to tensor<1x4xf32>
  %re = tensor.empty() : tensor<1x2x4xf32>
  // expected-remark@+1 {{kvq-quantize-kv-cache: @turns_backwards: layer 0: keys stay post-RoPE: the key is not a rotation of channel pairs of any candidate pre-rotation value}}
  %kr = linalg.generic {indexing_maps = [#id3, #tc3, #tc3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k0, %cs, %sn : tensor<1x2x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) outs(%re : tensor<1x2x4xf32>) {
    ^bb0(%x: f32, %c: f32, %s: f32, %out: f32):
      %t = linalg.index 0 : index
      %h = linalg.index 1 : index
      %ch = linalg.index 2 : index
      %c2 = arith.constant 2 : index
      %lo = arith.cmpi ult, %ch, %c2 : index
      %up = arith.addi %ch, %c2 : index
      %dn = arith.subi %ch, %c2 : index
      %pc = arith.select %lo, %up, %dn : index
      %y = tensor.extract %k0[%t, %h, %pc] : tensor<1x2x4xf32>
      %ny = arith.negf %y : f32
      %rh = arith.select %lo, %ny, %y : f32
      %xc = arith.mulf %x, %c : f32
      %rs = arith.mulf %rh, %s : f32
      %r = arith.subf %xc, %rs : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4xf32>
  %kw0 = tensor.insert_slice %kr into %kc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// A sine scaled by a function argument: the rotation depends on more than
// the write position, so it cannot be proven a RoPE.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// CHECK-LABEL: func.func @scaled_by_an_argument(
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#tc3 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @scaled_by_an_argument(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc0: tensor<16x2x4xf32>, %vc0: tensor<16x2x4xf32>, %pos: index, %g: f32)
    -> (tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %cos = arith.constant dense<[[1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00], [5.40302306e-01, 9.95004165e-01, 5.40302306e-01, 9.95004165e-01], [-4.16146837e-01, 9.80066578e-01, -4.16146837e-01, 9.80066578e-01], [-9.89992497e-01, 9.55336489e-01, -9.89992497e-01, 9.55336489e-01], [-6.53643621e-01, 9.21060994e-01, -6.53643621e-01, 9.21060994e-01], [2.83662185e-01, 8.77582562e-01, 2.83662185e-01, 8.77582562e-01], [9.60170287e-01, 8.25335615e-01, 9.60170287e-01, 8.25335615e-01], [7.53902254e-01, 7.64842187e-01, 7.53902254e-01, 7.64842187e-01], [-1.45500034e-01, 6.96706709e-01, -1.45500034e-01, 6.96706709e-01], [-9.11130262e-01, 6.21609968e-01, -9.11130262e-01, 6.21609968e-01], [-8.39071529e-01, 5.40302306e-01, -8.39071529e-01, 5.40302306e-01], [4.42569799e-03, 4.53596121e-01, 4.42569799e-03, 4.53596121e-01], [8.43853959e-01, 3.62357754e-01, 8.43853959e-01, 3.62357754e-01], [9.07446781e-01, 2.67498829e-01, 9.07446781e-01, 2.67498829e-01], [1.36737218e-01, 1.69967143e-01, 1.36737218e-01, 1.69967143e-01], [-7.59687913e-01, 7.07372017e-02, -7.59687913e-01, 7.07372017e-02]]> : tensor<16x4xf32>
  %sin = arith.constant dense<[[0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00], [8.41470985e-01, 9.98334166e-02, 8.41470985e-01, 9.98334166e-02], [9.09297427e-01, 1.98669331e-01, 9.09297427e-01, 1.98669331e-01], [1.41120008e-01, 2.95520207e-01, 1.41120008e-01, 2.95520207e-01], [-7.56802495e-01, 3.89418342e-01, -7.56802495e-01, 3.89418342e-01], [-9.58924275e-01, 4.79425539e-01, -9.58924275e-01, 4.79425539e-01], [-2.79415498e-01, 5.64642473e-01, -2.79415498e-01, 5.64642473e-01], [6.56986599e-01, 6.44217687e-01, 6.56986599e-01, 6.44217687e-01], [9.89358247e-01, 7.17356091e-01, 9.89358247e-01, 7.17356091e-01], [4.12118485e-01, 7.83326910e-01, 4.12118485e-01, 7.83326910e-01], [-5.44021111e-01, 8.41470985e-01, -5.44021111e-01, 8.41470985e-01], [-9.99990207e-01, 8.91207360e-01, -9.99990207e-01, 8.91207360e-01], [-5.36572918e-01, 9.32039086e-01, -5.36572918e-01, 9.32039086e-01], [4.20167037e-01, 9.63558185e-01, 4.20167037e-01, 9.63558185e-01], [9.90607356e-01, 9.85449730e-01, 9.90607356e-01, 9.85449730e-01], [6.50287840e-01, 9.97494987e-01, 6.50287840e-01, 9.97494987e-01]]> : tensor<16x4xf32>
  %cs = tensor.extract_slice %cos[%pos, 0] [1, 4] [1, 1] : tensor<16x4xf32> to tensor<1x4xf32>
  %sn = tensor.extract_slice %sin[%pos, 0] [1, 4] [1, 1] : tensor<16x4xf32> to tensor<1x4xf32>
  %re = tensor.empty() : tensor<1x2x4xf32>
  %kr = linalg.generic {indexing_maps = [#id3, #tc3, #tc3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k0, %cs, %sn : tensor<1x2x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) outs(%re : tensor<1x2x4xf32>) {
    ^bb0(%x: f32, %c: f32, %s: f32, %out: f32):
      %t = linalg.index 0 : index
      %h = linalg.index 1 : index
      %ch = linalg.index 2 : index
      %c2 = arith.constant 2 : index
      %lo = arith.cmpi ult, %ch, %c2 : index
      %up = arith.addi %ch, %c2 : index
      %dn = arith.subi %ch, %c2 : index
      %pc = arith.select %lo, %up, %dn : index
      %y = tensor.extract %k0[%t, %h, %pc] : tensor<1x2x4xf32>
      %ny = arith.negf %y : f32
      %rh = arith.select %lo, %ny, %y : f32
      %xc = arith.mulf %x, %c : f32
      // expected-remark@+1 {{kvq-quantize-kv-cache: @scaled_by_an_argument: layer 0: keys stay post-RoPE: the rotation depends on a function argument other than the write position}}
      %sg = arith.mulf %s, %g : f32
      %rs = arith.mulf %rh, %sg : f32
      %r = arith.addf %xc, %rs : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4xf32>
  %kw0 = tensor.insert_slice %kr into %kc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// No rotation in front of the key at all.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// CHECK-LABEL: func.func @no_rotation(
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#tc3 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @no_rotation(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc0: tensor<16x2x4xf32>, %vc0: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // expected-remark@+1 {{kvq-quantize-kv-cache: @no_rotation: layer 0: keys stay post-RoPE: no rotation found in front of the key}}
  %kw0 = tensor.insert_slice %k0 into %kc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}
