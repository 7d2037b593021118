#===- cmake/aarch64-linux-gnu.cmake - arm64 cross build, run under qemu --===#
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# The runtime, kvq-eval and their unit tests for arm64 (NEON), built with
# Debian's cross gcc and run through qemu-user by ctest:
#   cmake -G Ninja -S . -B build-arm64 -DKVQ_RUNTIME_ONLY=ON \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
#===----------------------------------------------------------------------===#
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(KVQ_AARCH64_SYSROOT /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH ${KVQ_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# No binfmt here: every arm64 binary runs through qemu explicitly.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L ${KVQ_AARCH64_SYSROOT})
