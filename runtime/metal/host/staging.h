//===- staging.h - Scoped device buffers for one entry point ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The stateless kernels receive host pointers; their data is staged through
// device buffers that live for one call. Staging owns them and releases
// them on every return path.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_STAGING_H
#define KVQ_RUNTIME_METAL_HOST_STAGING_H

#include "device.h"

#include <cstring>
#include <memory>
#include <vector>

namespace kvq::metal {

class Staging {
public:
  explicit Staging(Device &device) : device_(device) {}
  ~Staging() {
    for (auto &b : buffers_)
      device_.release(*b);
  }
  Staging(const Staging &) = delete;
  Staging &operator=(const Staging &) = delete;

  /// A zero-filled buffer of `size` bytes (at least 16, since Metal has no
  /// empty buffers), holding a copy of src when src is non-null. Null when
  /// the device is out of memory (then failed() is true).
  const Buffer *make(size_t size, const void *src = nullptr) {
    auto b = std::make_unique<Buffer>();
    if (!device_.allocate(size < 16 ? 16 : size, *b)) {
      failed_ = true;
      return nullptr;
    }
    if (src && size)
      std::memcpy(b->data, src, size);
    buffers_.push_back(std::move(b));
    return buffers_.back().get();
  }
  bool failed() const { return failed_; }
  Device &device() { return device_; }

private:
  Device &device_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  bool failed_ = false;
};

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_STAGING_H
