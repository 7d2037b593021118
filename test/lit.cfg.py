# -*- Python -*-
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# lit configuration of the kvq test suites (test/**/*.mlir).
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "KVQ"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "lit.local.cfg", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kvq_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%kvq_src_root", config.kvq_src_root))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP", "PATH"])
llvm_config.use_default_substitutions()

# Our tools first, then LLVM's (FileCheck, not, split-file).
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kvq_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["kvq-opt", "kvq-import"], [config.kvq_tools_dir])
# The checkpoints under models/ (stories260K.bin for kvq-import tests).
config.substitutions.append(("%models", os.path.join(config.kvq_src_root, "models")))
llvm_config.add_tool_substitutions(
    ["not", "split-file", "mlir-runner", "mlir-translate", "llc"],
    [config.llvm_tools_dir])

# kvq as plugins of the stock mlir-opt. Not in the sanitizer build: an
# instrumented module cannot be loaded into the uninstrumented mlir-opt.
kvq_plugin = os.path.join(config.kvq_lib_dir, "KvqPlugin.so")
config.substitutions.append(
    ("%mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
config.substitutions.append((
    "%kvq_plugin_args",
    "--load-dialect-plugin=%s --load-pass-plugin=%s" % (kvq_plugin, kvq_plugin)))
if not config.kvq_sanitize:
    config.available_features.add("plugins")
llvm_config.add_tool_substitutions(["kvq-lsp-server", "kvq-capi-test"],
                                   [config.kvq_tools_dir])
# The release from CMake's project(VERSION) and the MLIR it builds against,
# for the --version checks (independent of what the tools print).
config.substitutions.append(("%kvq_release", config.kvq_release))
config.substitutions.append(("%llvm_release", config.llvm_release))

if config.host_arch in ("aarch64", "arm64"):
    config.available_features.add("aarch64")
if config.kvq_sanitize:
    config.available_features.add("sanitizer")

# Execution through mlir-runner: the JIT loads the kvq runtime and MLIR's
# runner utils (shipped for x86_64 only).
runtime_lib = os.path.join(config.kvq_lib_dir, "libkvq_runtime_cpu.so")
# The Metal backend with its kernels run on the CPU through the MSL shim
# (built with clang on Linux; see docs/METAL.md).
metal_emu_lib = os.path.join(config.kvq_lib_dir, "libkvq_runtime_metal_emu.so")
if os.path.exists(metal_emu_lib):
    config.available_features.add("metal-emu")
runner_libs = [
    os.path.join(config.llvm_lib_dir, name)
    for name in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so")
]
runner = os.path.join(config.llvm_tools_dir, "mlir-runner")
if all(os.path.exists(p) for p in [runner] + runner_libs):
    config.available_features.add("mlir-runner")
runner_env = ""
if config.kvq_sanitize:
    # mlir-runner is not instrumented: the sanitized runtime it loads needs
    # the sanitizer runtime preloaded. MLIR's own JIT allocations are not
    # ours to leak-check.
    asan_rt = subprocess.run(
        [config.cxx_compiler, "-print-file-name=libclang_rt.asan-x86_64.so"],
        capture_output=True, text=True).stdout.strip()
    runner_env = "env LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0 " % asan_rt
config.substitutions.append((
    "%kvq_run_metal",
    runner_env + runner + " -e main -entry-point-result=void -shared-libs="
    + ",".join([metal_emu_lib] + runner_libs)))
config.substitutions.append((
    "%kvq_run",
    runner_env + runner + " -e main -entry-point-result=void -shared-libs="
    + ",".join([runtime_lib] + runner_libs)))

# Native link of a lowered module with the runtime of this build (which is
# sanitized in the sanitizer build, so the executable is too).
sanitize_flags = " -fsanitize=address,undefined" if config.kvq_sanitize else ""
config.substitutions.append(("%host_cc", config.c_compiler + " -Wno-override-module"))
config.substitutions.append((
    "%kvq_host_link",
    "-I%s -L%s -lkvq_runtime_cpu -Wl,-rpath,%s%s" % (
        config.kvq_include_dir, config.kvq_lib_dir, config.kvq_lib_dir,
        sanitize_flags)))

# arm64: the same module through llc for aarch64, linked with the runtime of
# the cross build (KVQ_ARM64_RUNTIME_DIR) and run under qemu-user.
arm64_dir = config.arm64_runtime_dir
arm64_tools = ["/usr/bin/aarch64-linux-gnu-gcc", "/usr/bin/qemu-aarch64-static"]
if arm64_dir and os.path.exists(os.path.join(arm64_dir, "libkvq_runtime_cpu.so")) \
        and all(os.path.exists(t) for t in arm64_tools):
    config.available_features.add("arm64")
config.substitutions.append(("%arm64_cc", "aarch64-linux-gnu-gcc"))
config.substitutions.append((
    "%kvq_arm64_link",
    "-I%s -L%s -lkvq_runtime_cpu -lm" % (config.kvq_include_dir, arm64_dir)))
config.substitutions.append((
    "%arm64_run",
    "qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=%s" % arm64_dir))
