// The kokkos backend's containers and kernel launch (included by kernels/common/backend.hpp):
// DeviceVector over Kokkos' default memory space, raw(), for_each_index() through
// Kokkos::parallel_for on the default execution space, host <-> device copies through
// Kokkos::deep_copy. The same names and contracts as the Thrust backends, so that workload code
// compiles unchanged.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "kernels/common/hd.hpp"

namespace apron {

using DeviceMemorySpace = Kokkos::DefaultExecutionSpace::memory_space;
// Whether the host can read device memory directly (the OpenMP and Serial spaces).
inline constexpr bool kDeviceMemoryIsHost =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, DeviceMemorySpace>::accessible;

// Starts Kokkos (once per process) on the first device allocation or launch; the runtime
// finalises it before MPI_Finalize (stop_device_runtime), else it is finalised at exit.
void ensure_kokkos();

namespace detail {
void* device_malloc(std::size_t bytes);
void device_free(void* p);

template <class T>
using DeviceView = Kokkos::View<T*, DeviceMemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using HostView = Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Contiguous copies between host and device memory, done on return. As bytes, so that any
// trivially copyable element type goes.
template <class T>
void copy_to_device(const T* host, std::size_t n, T* device) {
  if (n == 0) return;
  Kokkos::deep_copy(DeviceView<char>(reinterpret_cast<char*>(device), n * sizeof(T)),
                    HostView<const char>(reinterpret_cast<const char*>(host), n * sizeof(T)));
}
template <class T>
void copy_to_host(const T* device, std::size_t n, T* host) {
  if (n == 0) return;
  Kokkos::deep_copy(HostView<char>(reinterpret_cast<char*>(host), n * sizeof(T)),
                    DeviceView<const char>(reinterpret_cast<const char*>(device), n * sizeof(T)));
}
template <class T>
void copy_on_device(const T* from, std::size_t n, T* to) {
  if (n == 0 || from == to) return;
  Kokkos::deep_copy(DeviceView<char>(reinterpret_cast<char*>(to), n * sizeof(T)),
                    DeviceView<const char>(reinterpret_cast<const char*>(from), n * sizeof(T)));
}
}  // namespace detail

// Runs f(i) for i in [0, n) on the default execution space. On a GPU in blocks of at most
// BlockThreads with at least MinBlocks resident per SM (0: no floor), the launch bounds the cuda
// backend's kernels have: the hand-tuned neighbour loops were tuned for the registers those
// bounds allow.
template <int BlockThreads = kBlockThreads, int MinBlocks = 0, class F>
void for_each_index(std::size_t n, F f) {
  if (n == 0) return;
  ensure_kokkos();
  using Policy = Kokkos::RangePolicy<Kokkos::IndexType<std::size_t>,
                                     Kokkos::LaunchBounds<BlockThreads, MinBlocks>>;
  Kokkos::parallel_for("apron::for_each_index", Policy(0, n), f);
}

// An iterator over device memory: what DeviceVector's begin() returns and what the algorithms
// (kernels/common/algorithms.hpp) take to know a range lives on the device. Dereferencing it on
// the host compiles only where device memory is host memory.
template <class T>
class DevicePointer {
 public:
  using iterator_category = std::random_access_iterator_tag;
  using value_type = std::remove_cv_t<T>;
  using difference_type = std::ptrdiff_t;
  using pointer = T*;
  using reference = T&;

  DevicePointer() = default;
  explicit DevicePointer(T* p) : p_(p) {}
  template <class U, class = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  DevicePointer(DevicePointer<U> other) : p_(other.get()) {}  // non-const to const

  T* get() const { return p_; }
  reference operator*() const {
    // Dependent on T, so that it fires where a host read is instantiated, not in every file.
    static_assert(kDeviceMemoryIsHost || sizeof(T) == 0,
                  "device memory read from the host: use apron::copy");
    return *p_;
  }
  reference operator[](difference_type k) const { return *(*this + k); }
  DevicePointer& operator++() { return ++p_, *this; }
  DevicePointer& operator--() { return --p_, *this; }
  DevicePointer operator++(int) { return DevicePointer(p_++); }
  DevicePointer operator--(int) { return DevicePointer(p_--); }
  DevicePointer& operator+=(difference_type k) { return p_ += k, *this; }
  DevicePointer& operator-=(difference_type k) { return p_ -= k, *this; }
  friend DevicePointer operator+(DevicePointer a, difference_type k) { return a += k; }
  friend DevicePointer operator+(difference_type k, DevicePointer a) { return a += k; }
  friend DevicePointer operator-(DevicePointer a, difference_type k) { return a -= k; }
  friend difference_type operator-(DevicePointer a, DevicePointer b) { return a.p_ - b.p_; }
  friend auto operator<=>(DevicePointer a, DevicePointer b) = default;

 private:
  T* p_ = nullptr;
};

template <class T>
struct FillWith {
  T* data;
  T value;
  APRON_HD void operator()(std::size_t i) const { data[i] = value; }
};

// A resizable array in device memory with the parts of std::vector's interface apron uses
// (Thrust's device_vector has the same). New elements are value-initialised, as there.
template <class T>
class DeviceVector {
  static_assert(std::is_trivially_copyable_v<T>, "device arrays hold trivially copyable values");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = DevicePointer<T>;
  using const_iterator = DevicePointer<const T>;

  DeviceVector() = default;
  explicit DeviceVector(std::size_t n) { resize(n); }
  DeviceVector(std::size_t n, const T& value) { resize(n, value); }
  DeviceVector(const std::vector<T>& host) { *this = host; }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  DeviceVector(It first, It last) {
    const std::vector<T> host(first, last);
    *this = host;
  }
  DeviceVector(const DeviceVector& other) { *this = other; }
  DeviceVector(DeviceVector&& other) noexcept { swap(other); }
  DeviceVector& operator=(const DeviceVector& other) {
    if (this == &other) return *this;
    resize_uninitialised(other.size_);
    detail::copy_on_device(other.data_, size_, data_);
    return *this;
  }
  DeviceVector& operator=(DeviceVector&& other) noexcept {
    swap(other);
    return *this;
  }
  DeviceVector& operator=(const std::vector<T>& host) {
    resize_uninitialised(host.size());
    detail::copy_to_device(host.data(), size_, data_);
    return *this;
  }
  ~DeviceVector() { release(); }

  // The contents of a host range, or n copies of value.
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  void assign(It first, It last) {
    *this = std::vector<T>(first, last);
  }
  void assign(std::size_t n, const T& value) {
    clear();
    resize(n, value);
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return capacity_; }
  T* raw_data() const { return data_; }
  iterator data() { return iterator(data_); }
  const_iterator data() const { return const_iterator(data_); }
  iterator begin() { return iterator(data_); }
  iterator end() { return iterator(data_ + size_); }
  const_iterator begin() const { return const_iterator(data_); }
  const_iterator end() const { return const_iterator(data_ + size_); }
  T& operator[](std::size_t i) { return *(begin() + static_cast<std::ptrdiff_t>(i)); }
  const T& operator[](std::size_t i) const { return *(begin() + static_cast<std::ptrdiff_t>(i)); }

  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    T* grown = static_cast<T*>(detail::device_malloc(n * sizeof(T)));
    detail::copy_on_device(data_, size_, grown);
    detail::device_free(data_);
    data_ = grown;
    capacity_ = n;
  }
  void resize(std::size_t n) { resize(n, T{}); }
  void resize(std::size_t n, const T& value) {
    const std::size_t old = size_;
    resize_uninitialised(n);
    if (n > old) for_each_index(n - old, FillWith<T>{data_ + old, value});
  }
  void clear() { size_ = 0; }
  void shrink_to_fit() {
    if (capacity_ == size_) return;
    DeviceVector copy(*this);
    swap(copy);
  }
  void swap(DeviceVector& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  // Growing keeps the elements (Thrust's doubling past the capacity).
  void resize_uninitialised(std::size_t n) {
    if (n > capacity_) reserve(std::max(n, 2 * capacity_));
    size_ = n;
  }
  void release() {
    detail::device_free(data_);
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

template <class T>
T* raw(DeviceVector<T>& v) {
  return v.raw_data();
}
template <class T>
const T* raw(const DeviceVector<T>& v) {
  return v.raw_data();
}

}  // namespace apron
