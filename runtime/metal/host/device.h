//===- device.h -------------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The device interface under the Metal entry points.
//
// The kvq_metal_* entry points are written once, in portable C++, against
// this small interface: shared-memory buffers and synchronous kernel
// dispatch. On Apple platforms apple/metal_device.mm implements it with
// Metal.framework; on Linux emu/emu_device.cpp runs the same MSL kernels,
// compiled through the shim, on the CPU. So everything above this line
// (argument checks, staging, the cache logic) is executed in Linux tests.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_DEVICE_H
#define KVQ_RUNTIME_METAL_HOST_DEVICE_H

#include "kvq/runtime.h"

#include <cstddef>
#include <cstdint>

namespace kvq::metal {

/// A device buffer in memory the host can read and write (Metal: shared
/// storage, which is the GPU's own memory on Apple silicon).
struct Buffer {
  void *data = nullptr;   ///< host view of the contents
  size_t size = 0;        ///< bytes requested
  void *handle = nullptr; ///< backend object (id<MTLBuffer> on Apple)
};

/// One kernel argument: a buffer (plus byte offset) or a small constant
/// block copied at dispatch (setBytes). Argument i is [[buffer(i)]].
struct Arg {
  const Buffer *buffer = nullptr;
  size_t offset = 0;
  const void *bytes = nullptr;
  size_t size = 0;

  static Arg buf(const Buffer &b, size_t offset = 0) {
    Arg a;
    a.buffer = &b;
    a.offset = offset;
    return a;
  }
  template <class T> static Arg val(const T &value) {
    Arg a;
    a.bytes = &value;
    a.size = sizeof(T);
    return a;
  }
};

/// Threads per threadgroup of the kvq kernels that take no collective
/// (any size works; 64 keeps small grids in one group).
constexpr uint32_t kPlainThreadgroup = 64;
/// Cooperative kernels (simdgroup reductions) use one simdgroup.
constexpr uint32_t kSimdgroup = 32;

/// A compute device.
class Device {
public:
  virtual ~Device() = default;
  /// "metal: <GPU name>" or "emulated (CPU shim)".
  virtual const char *name() const = 0;
  /// size bytes, zero-filled, host-visible. Returns false on failure.
  virtual bool allocate(size_t size, Buffer &out) = 0;
  /// Free a buffer from allocate (null buffers are ignored).
  virtual void release(Buffer &buffer) = 0;
  /// Run `kernel` on `threads` threads (dispatchThreads, threadgroups of
  /// `threadgroup`) and wait until it completes. Non-OK when the kernel is
  /// unknown or the device reports an error (kvq_last_error says which).
  virtual kvq_status run(const char *kernel, const Arg *args, size_t nargs,
                         uint32_t threads, uint32_t threadgroup) = 0;
};

/// The process-wide device, created on first use; null when the platform
/// has none (kvq_last_error says why).
Device *defaultDevice();

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_DEVICE_H
