// RUN: kvq-opt %s --convert-kvq-to-runtime | FileCheck %s
// RUN: kvq-opt %s --convert-kvq-to-runtime="target=metal" | FileCheck %s --check-prefix=METAL

// A pre-RoPE key cache: the configuration's RoPE reaches the flat
// constructor as its last two scalars, rope_style (kvq_rope_style: half =
// 2) and rope_theta, after the backend (cpu.mlir checks the other
// arguments; a cache without `rope` passes style 0).

!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kvquant, key_bits = 3, value_bits = 3,
              rope = <theta = 500000.0, style = half>>>

// CHECK-LABEL: func.func @create
// CHECK: %[[THETA:.*]] = arith.constant 5.000000e+05 : f32
// CHECK: call @kvq_cache_create_flat({{.*}}, %c0_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %[[THETA]], %{{.*}}) :
// METAL-LABEL: func.func @create
// METAL: %[[THETA:.*]] = arith.constant 5.000000e+05 : f32
// METAL: call @kvq_metal_cache_create_flat({{.*}}, %c1_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %[[THETA]], %{{.*}}) :
func.func @create() -> !cache {
  %c = kvq.cache_create : !cache
  return %c : !cache
}
