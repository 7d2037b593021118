#===- cmake/MLIRSetup.cmake - find MLIR 22 and define kvq_use_mlir() ----===#
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# find_package runs once at the top level. kvq_use_mlir() pulls LLVM's build
# options into the calling directory only, so the runtime (which must build
# without MLIR) never inherits LLVM's global flags such as -Wl,-z,defs.
#
#===----------------------------------------------------------------------===#
# Without OLD, Ninja re-runs every tablegen step on each build.
cmake_policy(SET CMP0116 OLD)

if(NOT MLIR_DIR AND EXISTS /usr/lib/llvm-22/lib/cmake/mlir)
  set(MLIR_DIR /usr/lib/llvm-22/lib/cmake/mlir)
endif()
find_package(MLIR REQUIRED CONFIG)
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "kvq needs MLIR/LLVM 22, found ${LLVM_PACKAGE_VERSION} at ${MLIR_DIR}")
endif()
message(STATUS "kvq: MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")

set(LLVM_RUNTIME_OUTPUT_INTDIR ${PROJECT_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${PROJECT_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${PROJECT_BINARY_DIR})
# Link the shared libMLIR.so: static archives give an 80 MB kvq-opt and are
# not safe under sanitizers.
set(MLIR_LINK_MLIR_DYLIB ON)
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")

set(KVQ_LLVM_TOOLS_DIR "${LLVM_TOOLS_BINARY_DIR}")
if(NOT LLVM_EXTERNAL_LIT)
  # LLVM's default points at a bin/llvm-lit that Debian does not ship.
  set(LLVM_EXTERNAL_LIT "${LLVM_TOOLS_BINARY_DIR}/lit" CACHE FILEPATH "lit")
endif()

if(NOT TARGET mlir-doc)
  add_custom_target(mlir-doc)
endif()

macro(kvq_use_mlir)
  include(TableGen)
  include(AddLLVM)
  include(AddMLIR)
  include(HandleLLVMOptions)
  if(KVQ_SANITIZE)
    # -z defs rejects sanitized shared libraries (the runtime symbols come
    # from the executable).
    string(REPLACE "-Wl,-z,defs" "" CMAKE_SHARED_LINKER_FLAGS
                   "${CMAKE_SHARED_LINKER_FLAGS}")
    string(REPLACE "-Wl,-z,defs" "" CMAKE_MODULE_LINKER_FLAGS
                   "${CMAKE_MODULE_LINKER_FLAGS}")
  endif()
  include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  # Public headers as consumers see them ("kvq/dialect/...", generated .inc
  # files under <build>/include), the runtime's (kvq/config_limits.h: the
  # bounds the verifiers share), and the project root for private headers
  # ("passes/conversions/RuntimeABI.h").
  include_directories(${PROJECT_SOURCE_DIR}/include
                      ${PROJECT_BINARY_DIR}/include
                      ${PROJECT_SOURCE_DIR}/runtime/include
                      ${PROJECT_SOURCE_DIR})
  link_directories(${LLVM_BUILD_LIBRARY_DIR})
  add_definitions(${LLVM_DEFINITIONS})
endmacro()
