//===- device_array.h - A growable device buffer ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Metal buffers cannot grow, so cache state lives in DeviceArrays that are
// reallocated geometrically (the old contents copied over), keeping one
// decode-step append amortised O(1) at any cache length.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_DEVICE_ARRAY_H
#define KVQ_RUNTIME_METAL_HOST_DEVICE_ARRAY_H

#include "device.h"

#include <cstring>

namespace kvq::metal {

class DeviceArray {
public:
  explicit DeviceArray(Device &device) : device_(device) {}
  ~DeviceArray() { device_.release(buffer_); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  /// Make room for `bytes` bytes, keeping the contents. False when the
  /// device is out of memory (the array is then unchanged).
  bool reserve(size_t bytes) {
    if (bytes <= capacity_ && buffer_.data)
      return true;
    size_t grown = capacity_ * 2 > bytes ? capacity_ * 2 : bytes;
    grown = grown < 256 ? 256 : grown;
    Buffer fresh;
    if (!device_.allocate(grown, fresh))
      return false;
    if (buffer_.data)
      std::memcpy(fresh.data, buffer_.data, capacity_);
    device_.release(buffer_);
    buffer_ = fresh;
    capacity_ = grown;
    return true;
  }
  /// Become a copy of `o` (its capacity and contents). False when the
  /// device is out of memory (the array is then unchanged).
  bool copyFrom(const DeviceArray &o) {
    if (!o.buffer_.data)
      return true;
    Buffer fresh;
    if (!device_.allocate(o.capacity_, fresh))
      return false;
    std::memcpy(fresh.data, o.buffer_.data, o.capacity_);
    device_.release(buffer_);
    buffer_ = fresh;
    capacity_ = o.capacity_;
    return true;
  }
  uint8_t *bytes() { return static_cast<uint8_t *>(buffer_.data); }
  const uint8_t *bytes() const {
    return static_cast<const uint8_t *>(buffer_.data);
  }
  const Buffer &buffer() const { return buffer_; }
  size_t capacity() const { return capacity_; }

private:
  Device &device_;
  Buffer buffer_;
  size_t capacity_ = 0;
};

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_DEVICE_ARRAY_H
