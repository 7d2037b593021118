# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#===- cmake/KvqInstall.cmake - cmake --install and find_package(kvq) -----===#
#
# Installs, under the prefix:
#   include/kvq/runtime.h, runtime_metal.h       the runtime's C ABI
#   include/kvq/dialect/*.h, *.h.inc, *.td       the dialect (full builds)
#   include/kvq/passes/*.h, *.h.inc, *.td         passes and the entry point
#   lib/libkvq_runtime_cpu.so*, libMLIRKvq.a, libKvqPasses.a
#   bin/kvq-opt, kvq-lsp-server, kvq-import, kvq-run, kvq-eval, kvq-bench (KVQ_BUILD_TOOLS)
#   lib/cmake/kvq/kvqConfig.cmake, kvqConfigVersion.cmake, kvqTargets*.cmake
#   include/kvq-c/Dialect.h, lib/libKvqCAPI.so*     the MLIR C API of kvq
#   lib/KvqPlugin.so                              plugin for a stock mlir-opt
#   share/doc/kvq/KvqDialect.md, KvqOps.md, KvqPasses.md   generated reference
# exporting kvq::runtime, kvq::MLIRKvq, kvq::KvqPasses and kvq::CAPI.
#
# The source tree keeps the same layout (include/kvq/dialect,
# include/kvq/passes, runtime/include/kvq), so every header is included as
# "kvq/..." in kvq's own sources, in consumers and after install.
#
#===----------------------------------------------------------------------===#
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVQ_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvq)
set(kvq_export_targets kvq_runtime_cpu)

# The runtime (C ABI, no MLIR).
set_target_properties(kvq_runtime_cpu PROPERTIES EXPORT_NAME runtime)
target_include_directories(kvq_runtime_cpu
  INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# Only what an embedder includes: the C ABI and the config fields it
# names. The rules, limits and entry-point list beside them are shared by
# kvq's own runtime, dialect and lowering, not an interface.
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/kvq/runtime.h
              ${PROJECT_SOURCE_DIR}/runtime/include/kvq/runtime_metal.h
              ${PROJECT_SOURCE_DIR}/runtime/include/kvq/config_fields.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvq COMPONENT kvq-headers)
if(TARGET kvq_runtime_metal)
  set_target_properties(kvq_runtime_metal PROPERTIES EXPORT_NAME runtime_metal)
  target_include_directories(kvq_runtime_metal
    INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  list(APPEND kvq_export_targets kvq_runtime_metal)
endif()

# The dialect and the passes (full builds).
if(NOT KVQ_RUNTIME_ONLY)
  foreach(lib MLIRKvq KvqPasses)
    set_target_properties(${lib} PROPERTIES EXPORT_NAME ${lib})
    target_include_directories(${lib} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    # MLIR's targets carry no include directories: a project using these
    # targets from the build tree (add_subdirectory) gets MLIR's and LLVM's
    # here; an installed kvqConfig.cmake adds them after find_dependency.
    foreach(dir ${MLIR_INCLUDE_DIRS} ${LLVM_INCLUDE_DIRS})
      target_include_directories(${lib} SYSTEM PUBLIC $<BUILD_INTERFACE:${dir}>)
    endforeach()
    target_compile_features(${lib} INTERFACE cxx_std_17)
    list(APPEND kvq_export_targets ${lib})
  endforeach()
  # The C API (libKvqCAPI.so: kvq-c/Dialect.h and MLIR's core C API).
  set_target_properties(KvqCAPI PROPERTIES EXPORT_NAME CAPI)
  list(APPEND kvq_export_targets KvqCAPI)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kvq-c
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT kvq-headers)
  # The plugin for a stock mlir-opt (dlopen'ed by path, not a link target).
  install(TARGETS KvqPlugin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT kvq-libraries)
  # include/kvq/{dialect,passes}: the headers and .td files as they are in
  # the source tree, with the generated .inc files beside them.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kvq ${PROJECT_BINARY_DIR}/include/kvq
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT kvq-headers
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td" PATTERN "*.h.inc"
    PATTERN "CMakeFiles" EXCLUDE)
endif()

install(TARGETS ${kvq_export_targets} EXPORT kvqTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT kvq-libraries
          NAMELINK_COMPONENT kvq-headers
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT kvq-libraries
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kvq-libraries)
install(EXPORT kvqTargets NAMESPACE kvq::
  DESTINATION ${KVQ_INSTALL_CMAKEDIR} COMPONENT kvq-headers)

# Installed binaries find kvq's libraries next to them ($ORIGIN/../lib) and
# MLIR's where kvq was built against it (LLVM_LIBRARY_DIR,
# /usr/lib/llvm-22/lib on Debian): libMLIR.so and libLLVM.so are not on the
# loader's default path. The build tree's RUNPATH is not what gets
# installed, so this is set for every installed tool and shared library.
set(kvq_install_rpath "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
if(NOT KVQ_RUNTIME_ONLY AND LLVM_LIBRARY_DIR)
  list(APPEND kvq_install_rpath "${LLVM_LIBRARY_DIR}")
endif()
foreach(target KvqCAPI KvqPlugin)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "${kvq_install_rpath}")
  endif()
endforeach()
if(KVQ_BUILD_TOOLS)
  set(kvq_install_tools)
  foreach(tool kvq-opt kvq-lsp-server kvq-import kvq-run kvq-eval kvq-bench)
    if(TARGET ${tool})
      list(APPEND kvq_install_tools ${tool})
      set_target_properties(${tool} PROPERTIES INSTALL_RPATH "${kvq_install_rpath}")
    endif()
  endforeach()
  install(TARGETS ${kvq_install_tools}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kvq-tools)
endif()

# The dialect's, the ops' and the passes' reference (the mlir-doc target's
# Markdown: KvqDialect.md, KvqOps.md, KvqPasses.md), built with the project.
if(NOT KVQ_RUNTIME_ONLY)
  add_custom_target(kvq-doc ALL)
  add_dependencies(kvq-doc mlir-doc)
  install(DIRECTORY ${PROJECT_BINARY_DIR}/docs/Kvq/
    DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT kvq-docs
    FILES_MATCHING PATTERN "*.md")
endif()

if(KVQ_RUNTIME_ONLY)
  set(KVQ_CONFIG_NEEDS_MLIR OFF)
else()
  set(KVQ_CONFIG_NEEDS_MLIR ON)
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/kvqConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/kvqConfig.cmake
  INSTALL_DESTINATION ${KVQ_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the ABI (CHANGELOG.md).
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/kvqConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/kvqConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/kvqConfigVersion.cmake
  DESTINATION ${KVQ_INSTALL_CMAKEDIR} COMPONENT kvq-headers)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT kvq-headers)
