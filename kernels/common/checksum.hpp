// Checkpoint checksums of device arrays (kernels/common/element_hash.hpp says what is summed),
// computed where the data lives so that a checkpoint costs no host pass over it.
#pragma once

#include "kernels/common/algorithms.hpp"
#include "kernels/common/element_hash.hpp"

namespace apron {

namespace detail {
template <class T>
struct RowHash {
  const T* data;
  std::uint64_t first;
  APRON_HD std::uint64_t operator()(std::size_t i) const {
    return row_hash(reinterpret_cast<const unsigned char*>(data + i), sizeof(T), first + i);
  }
};
}  // namespace detail

// The checksum of v[0, n) as rows first, first + 1, ... of a global array.
template <class T>
std::uint64_t device_checksum(const DeviceVector<T>& v, std::size_t n, std::uint64_t first) {
  return transform_reduce(n, detail::RowHash<T>{raw(v), first}, std::uint64_t{0}, Plus{});
}

}  // namespace apron
