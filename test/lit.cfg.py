# -*- Python -*-
# lit configuration of the kvq test suites (test/**/*.mlir).
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "KVQ"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kvq_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%kvq_src_root", config.kvq_src_root))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# Our tools first, then LLVM's (FileCheck, not, split-file).
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kvq_tools_dir, append_path=False)
llvm_config.add_tool_substitutions(["kvq-opt"], [config.kvq_tools_dir])
llvm_config.add_tool_substitutions(
    ["not", "split-file", "mlir-runner", "mlir-translate", "llc"],
    [config.llvm_tools_dir])

if config.host_arch in ("aarch64", "arm64"):
    config.available_features.add("aarch64")
if config.kvq_sanitize:
    config.available_features.add("sanitizer")
