#===- test/lit.cmake - the lit/FileCheck suites, in check-kvq and ctest -===#
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
kvq_use_mlir()
find_package(Python3 REQUIRED COMPONENTS Interpreter)

# lib/ of an arm64 cross build of the runtime (cmake/aarch64-linux-gnu.cmake):
# enables the test that runs lowered modules on arm64 under qemu.
set(KVQ_ARM64_RUNTIME_DIR "" CACHE PATH
    "lib/ directory of the arm64 runtime build, for cross-arch execution tests")

configure_lit_site_cfg(
  ${CMAKE_CURRENT_SOURCE_DIR}/lit.site.cfg.py.in
  ${CMAKE_CURRENT_BINARY_DIR}/lit.site.cfg.py
  MAIN_CONFIG ${CMAKE_CURRENT_SOURCE_DIR}/lit.cfg.py)

set(KVQ_TEST_DEPENDS kvq-opt kvq-import kvq-lsp-server kvq-capi-test KvqPlugin
  kvq_runtime_cpu)
if(TARGET kvq_runtime_metal_emu)
  list(APPEND KVQ_TEST_DEPENDS kvq_runtime_metal_emu)
endif()
add_lit_testsuite(check-kvq "Running the kvq lit suites"
  ${CMAKE_CURRENT_BINARY_DIR}
  DEPENDS ${KVQ_TEST_DEPENDS})

# One ctest entry per lit run keeps `ctest` the single runner; lit prints
# each file's result and its own summary inside it.
add_test(NAME lit-kvq
  COMMAND ${LLVM_EXTERNAL_LIT} -v ${CMAKE_CURRENT_BINARY_DIR})
