# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest driver of the consumer projects (test/CMakeLists.txt):
#   cmake -DMODE=install -DBUILD_DIR=<kvq build> -DPREFIX=<dir> -P RunConsumer.cmake
#     a fresh `cmake --install` of the build into PREFIX
#   cmake -DMODE=consumer -DSOURCE=<project> -DBINARY=<dir> -DPREFIX=<dir>
#         -DGENERATOR=.. -DC_COMPILER=.. -DCXX_COMPILER=..
#         -DRUN=<cmd|args> [-DEXPECT=<regex>] [-DREFERENCE=<cmd|args>]
#         -P RunConsumer.cmake
#     configure and build the project against PREFIX (find_package(kvq)),
#     run RUN (relative to BINARY) and check its output matches EXPECT and,
#     when given, equals the output of REFERENCE. Optional: ARGS (more
#     configure arguments), TARGETS (build only these), INSTALLED=ON (kvq
#     must be found in PREFIX only: no package registry, and the kvq_DIR
#     the project configured with must lie under PREFIX).
#   cmake -DMODE=configure -DSOURCE=<kvq> -DBINARY=<dir> -DARGS=<a|b|..> -P ..
#     configure only.
cmake_minimum_required(VERSION 3.20)
# List arguments arrive with | between their items.
foreach(var RUN REFERENCE ARGS TARGETS)
  if(DEFINED ${var})
    string(REPLACE "|" ";" ${var} "${${var}}")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
  message(STATUS "installed into ${PREFIX}")
elseif(MODE STREQUAL "configure")
  file(REMOVE_RECURSE ${BINARY})
  run(${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} ${ARGS})
  message(STATUS "configured ${BINARY}")
elseif(MODE STREQUAL "consumer")
  file(REMOVE_RECURSE ${BINARY})
  if(INSTALLED)
    list(APPEND ARGS -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                     -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
  endif()
  run(${CMAKE_COMMAND} -G ${GENERATOR} -S ${SOURCE} -B ${BINARY}
      -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
      ${ARGS})
  if(INSTALLED)
    file(STRINGS ${BINARY}/CMakeCache.txt kvq_dir REGEX "^kvq_DIR:")
    string(REGEX REPLACE "^kvq_DIR:[A-Z]+=" "" kvq_dir "${kvq_dir}")
    file(REAL_PATH "${kvq_dir}" kvq_dir)
    file(REAL_PATH "${PREFIX}" prefix_real)
    string(FIND "${kvq_dir}/" "${prefix_real}/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "find_package(kvq) found '${kvq_dir}', not the "
                          "installed tree ${prefix_real}")
    endif()
    message(STATUS "kvq found in the installed tree: ${kvq_dir}")
  endif()
  if(DEFINED TARGETS)
    run(${CMAKE_COMMAND} --build ${BINARY} --target ${TARGETS})
  else()
    run(${CMAKE_COMMAND} --build ${BINARY})
  endif()
  list(POP_FRONT RUN exe)
  run(${BINARY}/${exe} ${RUN})
  set(got "${out}")
  message(STATUS "${got}")
  if(DEFINED EXPECT AND NOT got MATCHES "${EXPECT}")
    message(FATAL_ERROR "output does not match '${EXPECT}'")
  endif()
  if(DEFINED REFERENCE)
    run(${REFERENCE})
    if(NOT got STREQUAL out)
      file(WRITE ${BINARY}/got.txt "${got}")
      file(WRITE ${BINARY}/reference.txt "${out}")
      message(FATAL_ERROR "output differs from the reference: "
                          "${BINARY}/got.txt vs ${BINARY}/reference.txt")
    endif()
    message(STATUS "same output as: ${REFERENCE}")
  endif()
else()
  message(FATAL_ERROR "MODE must be install, configure or consumer")
endif()
