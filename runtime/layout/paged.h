//===- paged.h --------------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Append-only table that never moves its elements.
//
// The stores keep one small record per token (which payload blocks hold
// its K and V). In a std::vector, the append that crosses the capacity
// copies every record: at 64K cached tokens that is megabytes of copying
// and fresh page faults inside one kvq_cache_update, so appending a token
// at 64K cost measurably more than at 1K (kvq-bench's append ratio).
// PagedVector grows in fixed pages instead: an append allocates at most one
// page, existing records never move, and indexing costs one extra load.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_PAGED_H
#define KVQ_RUNTIME_LAYOUT_PAGED_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvq {

/// A resizable array of default-constructible T in pages of 2^PageBits
/// elements. reserve() is the only call that allocates; resize() within
/// the reserved capacity never fails (the stores' commit phase relies on
/// that, as it did with std::vector::reserve).
template <class T, int PageBits = 9> class PagedVector {
public:
  static constexpr size_t kPage = size_t{1} << PageBits;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return pages_.size() * kPage; }

  T &operator[](size_t i) { return pages_[i >> PageBits][i & (kPage - 1)]; }
  const T &operator[](size_t i) const {
    return pages_[i >> PageBits][i & (kPage - 1)];
  }

  /// Room for n elements: allocates the missing pages (may throw
  /// std::bad_alloc; pages allocated before the throw stay, unused).
  void reserve(size_t n) {
    if (n <= capacity())
      return;
    pages_.reserve((n + kPage - 1) / kPage);
    while (capacity() < n)
      pages_.push_back(std::unique_ptr<T[]>(new T[kPage]()));
  }

  /// Grow (new elements are default values) or shrink (dropped elements
  /// are reset, so a later growth sees default values again).
  void resize(size_t n) {
    reserve(n);
    for (size_t i = n; i < size_; ++i)
      (*this)[i] = T();
    size_ = n;
  }

  /// Drop every element and page.
  void clear() {
    pages_.clear();
    size_ = 0;
  }

  /// Forward iteration by index (range-for over the stores' tables).
  template <class V, class Ref> class Iter {
  public:
    Iter(V *v, size_t i) : v_(v), i_(i) {}
    Ref operator*() const { return (*v_)[i_]; }
    Iter &operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iter &o) const { return i_ != o.i_; }

  private:
    V *v_;
    size_t i_;
  };
  using iterator = Iter<PagedVector, T &>;
  using const_iterator = Iter<const PagedVector, const T &>;
  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

private:
  std::vector<std::unique_ptr<T[]>> pages_;
  size_t size_ = 0;
};

/// store.h's reserveGeometric for a paged table: growing never copies, so
/// reserving exactly what is needed keeps every append O(1) without the
/// doubling (which would allocate and construct up to `size` more
/// elements in one call).
template <class T, int PageBits>
void reserveGeometric(PagedVector<T, PageBits> &v, size_t size) {
  v.reserve(size);
}

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_PAGED_H
