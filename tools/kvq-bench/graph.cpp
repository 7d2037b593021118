//===- graph.cpp - The generated model graph for the compile benchmark ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Writes the graph to a file and times the kvq-opt process on it (process
// start included: that is what a build system pays).
//
//===----------------------------------------------------------------------===//
#include "graph.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

std::string kvqbench::decoderGraph(int layers) {
  std::ostringstream o;
  o << "!cache = !kvq.cache<layers = " << layers
    << ", kv_heads = 8, head_dim = 128, element_type = f16,\n"
       "    config = <method = kivi, key_bits = 2, value_bits = 2>>\n\n"
       "func.func @decode_step(%c: !cache, %x0: tensor<1x1024xf32>)\n"
       "    -> tensor<1x1024xf32> attributes {llvm.emit_c_interface} {\n"
       "  %zero = arith.constant 0.0 : f32\n";
  const char *cast =
      "linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, "
      "affine_map<(i, j) -> (i, j)>], iterator_types = [\"parallel\", "
      "\"parallel\"]}";
  for (int l = 0; l < layers; ++l) {
    const std::string L = std::to_string(l), x = "%x" + L,
                      next = "%x" + std::to_string(l + 1);
    // "_" keeps layer numbers apart from name suffixes (%q3_0 vs %q_30).
    auto name = [&](const char *s) { return std::string("%") + s + "_" + L; };
    o << "  " << name("wq")
      << " = arith.constant dense<1.0e-3> : tensor<1024x4096xf32>\n"
      << "  " << name("wk")
      << " = arith.constant dense<2.0e-3> : tensor<1024x1024xf32>\n"
      << "  " << name("wv")
      << " = arith.constant dense<3.0e-3> : tensor<1024x1024xf32>\n"
      << "  " << name("wo")
      << " = arith.constant dense<4.0e-3> : tensor<4096x1024xf32>\n"
      << "  " << name("eq") << " = tensor.empty() : tensor<1x4096xf32>\n"
      << "  " << name("fq") << " = linalg.fill ins(%zero : f32) outs("
      << name("eq") << " : tensor<1x4096xf32>) -> tensor<1x4096xf32>\n"
      << "  " << name("q") << " = linalg.matmul ins(" << x << ", " << name("wq")
      << " : tensor<1x1024xf32>, tensor<1024x4096xf32>) outs(" << name("fq")
      << " : tensor<1x4096xf32>) -> tensor<1x4096xf32>\n"
      << "  " << name("ek") << " = tensor.empty() : tensor<1x1024xf32>\n"
      << "  " << name("fk") << " = linalg.fill ins(%zero : f32) outs("
      << name("ek") << " : tensor<1x1024xf32>) -> tensor<1x1024xf32>\n";
    for (const char *kv : {"k", "v"}) {
      const std::string w = name(kv[0] == 'k' ? "wk" : "wv");
      const std::string p = name(kv), h = p + "h", r = p + "r", e = p + "e";
      o << "  " << p << " = linalg.matmul ins(" << x << ", " << w
        << " : tensor<1x1024xf32>, tensor<1024x1024xf32>) outs(" << name("fk")
        << " : tensor<1x1024xf32>) -> tensor<1x1024xf32>\n"
        << "  " << e << " = tensor.empty() : tensor<1x1024xf16>\n"
        << "  " << h << " = " << cast << " ins(" << p
        << " : tensor<1x1024xf32>) outs(" << e << " : tensor<1x1024xf16>) {\n"
        << "  ^bb0(%a: f32, %b: f16):\n"
        << "    %t = arith.truncf %a : f32 to f16\n"
        << "    linalg.yield %t : f16\n"
        << "  } -> tensor<1x1024xf16>\n"
        << "  " << r << " = tensor.expand_shape " << h
        << " [[0], [1, 2]] output_shape [1, 8, 128] : tensor<1x1024xf16> into "
           "tensor<1x8x128xf16>\n";
    }
    o << "  kvq.cache_update %c[" << l << "], " << name("k") << "r, "
      << name("v") << "r : !cache, tensor<1x8x128xf16>, tensor<1x8x128xf16>\n"
      << "  " << name("q3") << " = tensor.expand_shape " << name("q")
      << " [[0], [1, 2]] output_shape [1, 32, 128] : tensor<1x4096xf32> into "
         "tensor<1x32x128xf32>\n"
      << "  " << name("a3") << " = kvq.cache_attend %c[" << l << "], "
      << name("q3")
      << " : !cache, tensor<1x32x128xf32> -> tensor<1x32x128xf32>\n"
      << "  " << name("a") << " = tensor.collapse_shape " << name("a3")
      << " [[0], [1, 2]] : tensor<1x32x128xf32> into tensor<1x4096xf32>\n"
      << "  " << name("o") << " = linalg.matmul ins(" << name("a") << ", "
      << name("wo") << " : tensor<1x4096xf32>, tensor<4096x1024xf32>) outs("
      << name("fk") << " : tensor<1x1024xf32>) -> tensor<1x1024xf32>\n"
      << "  " << name("eo") << " = tensor.empty() : tensor<1x1024xf32>\n"
      << "  " << next << " = linalg.add ins(" << x << ", " << name("o")
      << " : tensor<1x1024xf32>, tensor<1x1024xf32>) outs(" << name("eo")
      << " : tensor<1x1024xf32>) -> tensor<1x1024xf32>\n";
  }
  o << "  return %x" << layers << " : tensor<1x1024xf32>\n}\n";
  return o.str();
}

double kvqbench::timeCompile(const std::string &kvqOpt,
                             const std::string &graph,
                             const std::string &scratchDir, int reps) {
  // Per-process names: two kvq-bench runs on a shared machine must not
  // write (and remove) each other's graph.
  const std::string stem =
      scratchDir + "/kvq-bench-graph-" + std::to_string(getpid());
  const std::string in = stem + ".mlir";
  const std::string out = stem + ".ll.mlir";
  {
    std::ofstream f(in);
    f << graph;
    if (!f)
      return -1;
  }
  const std::string cmd = "\"" + kvqOpt + "\" --kvq-to-llvm \"" + in +
                          "\" -o \"" + out + "\" 2>/dev/null";
  std::vector<double> times;
  for (int i = 0; i < reps + 1; ++i) { // the first run warms the page cache
    auto t0 = std::chrono::steady_clock::now();
    if (std::system(cmd.c_str()) != 0) {
      std::remove(in.c_str());
      std::remove(out.c_str());
      return -1;
    }
    double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (i > 0)
      times.push_back(dt);
  }
  std::sort(times.begin(), times.end());
  std::remove(in.c_str());
  std::remove(out.c_str());
  return times[times.size() / 2];
}
