// Device arrays whose sizes are known together, in one allocation (the cold first
// analysis): the meshes' arrays and the per-sample arrays of an analysis are sized from the meshes
// before anything runs, so the first analysis makes one request to the caching allocator for them
// instead of one cudaMalloc per array (each grown array also paid a copy, a cudaFree that waits
// for the device, and a fill of its new elements). DeviceSpan is the view the kernels take.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/backend.hpp"

namespace apron {

// A device array owned elsewhere (a part of a DeviceArena, or a DeviceVector): where and how long.
template <class T>
class DeviceSpan {
 public:
  DeviceSpan() = default;
  DeviceSpan(T* data, std::size_t size) : data_(data), size_(size) {}
  // Read-only views of writable spans and of whole device vectors.
  template <class U>
  requires std::is_same_v<const U, T> DeviceSpan(DeviceSpan<U> s)
      : data_(s.data()), size_(s.size()) {}
  template <class U>
  requires std::is_same_v<const U, T> DeviceSpan(const DeviceVector<U>& v)
      : data_(raw(v)), size_(v.size()) {}

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  DeviceSpan first(std::size_t n) const {
    if (n > size_) throw std::out_of_range("DeviceSpan::first: past the end");
    return {data_, n};
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// The elements of a device span, copied to the host (waits for the device).
template <class T>
std::vector<std::remove_const_t<T>> copy_to_host(DeviceSpan<T> s) {
  std::vector<std::remove_const_t<T>> h(s.size());
  apron::copy_n(device_iterator(s.data()), s.size(), h.data());
  return h;
}

// One element of a device span, read from the host (a copy each, as read_element of a
// DeviceVector: for the odd value, never in a loop).
template <class T>
std::remove_const_t<T> read_element(DeviceSpan<T> s, std::size_t i) {
  std::remove_const_t<T> value;
  detail::copy_to_host(s.data() + i, 1, &value);
  return value;
}

// One block from the caching allocator, carved front to back into arrays that start on 256-byte
// boundaries (offsets from the block's start, so a host buffer laid out with the same offsets
// copies over in one transfer). Nothing is initialised. The block goes back to the caching
// allocator (not to the device) when the arena is destroyed or outgrown.
class DeviceArena {
 public:
  static constexpr std::size_t kAlign = 256;
  static constexpr std::size_t aligned(std::size_t bytes) {
    return (bytes + kAlign - 1) / kAlign * kAlign;
  }
  template <class T>
  static constexpr std::size_t bytes_for(std::size_t n) {
    return aligned(n * sizeof(T));
  }

  DeviceArena() = default;
  DeviceArena(DeviceArena&& other) noexcept
      : block_(std::exchange(other.block_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)),
        used_(std::exchange(other.used_, 0)) {}
  DeviceArena& operator=(DeviceArena&& other) noexcept {
    std::swap(block_, other.block_);
    std::swap(capacity_, other.capacity_);
    std::swap(used_, other.used_);
    return *this;
  }
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }

  // Starts carving from the front of a block of at least `bytes` (a new one only when the block
  // held is smaller; the arrays carved before are then gone).
  void reset(std::size_t bytes) {
    used_ = 0;
    if (bytes <= capacity_) return;
    release();
    // A failed allocation throws std::bad_alloc (the caching allocator, in every backend).
    block_ = reinterpret_cast<std::byte*>(
        scratch_allocator().allocate(static_cast<std::ptrdiff_t>(bytes)));
    capacity_ = bytes;
  }

  // The next `bytes` (rounded up to kAlign) of the block.
  std::byte* take_bytes(std::size_t bytes) {
    const std::size_t size = aligned(bytes);
    if (size > capacity_ - used_)
      throw std::logic_error("DeviceArena: " + std::to_string(bytes) + " bytes past the " +
                             std::to_string(capacity_) + " reserved");
    std::byte* at = block_ + used_;
    used_ += size;
    return at;
  }
  template <class T>
  DeviceSpan<T> take(std::size_t n) {
    static_assert(alignof(T) <= kAlign && std::is_trivially_copyable_v<T>);
    return {reinterpret_cast<T*>(take_bytes(n * sizeof(T))), n};
  }

  std::size_t capacity() const { return capacity_; }

 private:
  void release() {
    if (block_) scratch_allocator().deallocate(reinterpret_cast<char*>(block_), capacity_);
    block_ = nullptr;
    capacity_ = 0;
  }

  std::byte* block_ = nullptr;
  std::size_t capacity_ = 0, used_ = 0;
};

}  // namespace apron
