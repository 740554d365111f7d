// The device algorithms workload code calls: copies between host and device, fills, gathers,
// scatters, reductions over an index range, scans and selection (ARCHITECTURE.md: "never a raw
// thrust:: call in workload code"). Thrust implements them for the cuda and omp backends (this
// header), Kokkos for the kokkos backend (kernels/common/backend/kokkos_algorithms.hpp, the same
// functions with the same contracts), except that on Kokkos' Cuda space the reductions, scans and
// selection are Thrust's (CUB's) here too. The heavier primitives built on them (radix sort,
// compaction, run lengths, segmented reductions) are in kernels/common/primitives.hpp.
//
// Ranges are given as iterators of DeviceVector (begin() + k) or of host containers; copy() tells
// host from device by the iterator's type. Host ranges must be contiguous (std::vector, arrays).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"

#if !defined(APRON_BACKEND_KOKKOS)
#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/gather.h>
#include <thrust/scatter.h>
#include <thrust/sequence.h>
#endif
#if APRON_THRUST_ALGORITHMS
#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform_reduce.h>
#endif

namespace apron {

// Binary operations of transform_reduce() and the scans.
struct Plus {
  template <class T>
  APRON_HD T operator()(const T& a, const T& b) const {
    return static_cast<T>(a + b);
  }
};
struct Maximum {
  template <class T>
  APRON_HD T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};
struct Minimum {
  template <class T>
  APRON_HD T operator()(const T& a, const T& b) const {
    return b < a ? b : a;
  }
};

}  // namespace apron

#if defined(APRON_BACKEND_KOKKOS)
#include "kernels/common/backend/kokkos_algorithms.hpp"
#else
namespace apron {

// A device pointer as an iterator that copy(), gather() and scatter() take for device memory
// (arrays that are not a DeviceVector: views, byte buffers).
template <class T>
auto device_iterator(T* p) {
  return thrust::device_pointer_cast(p);
}

// [first, last) to out, between any two of host and device (a transfer when they differ); on
// return the data is at out (a device-to-host copy waits for the device).
template <class In, class Out>
Out copy(In first, In last, Out out) {
  return thrust::copy(first, last, out);
}
template <class In, class Out>
Out copy_n(In first, std::size_t n, Out out) {
  return thrust::copy_n(first, n, out);
}

// Device ranges: value in every element; start, start + 1, ...; out[i] = src[map[i]]; out[map[i]] =
// in[i].
template <class It, class T>
void fill(It first, It last, const T& value) {
  thrust::fill(policy(), first, last, value);
}
template <class It, class T = int>
void sequence(It first, It last, T start = 0) {
  thrust::sequence(policy(), first, last, start);
}
template <class MapIt, class SrcIt, class OutIt>
void gather(MapIt map_first, MapIt map_last, SrcIt src, OutIt out) {
  thrust::gather(policy(), map_first, map_last, src, out);
}
template <class InIt, class MapIt, class OutIt>
void scatter(InIt first, InIt last, MapIt map, OutIt out) {
  thrust::scatter(policy(), first, last, map, out);
}

}  // namespace apron
#endif  // APRON_BACKEND_KOKKOS

// Reductions, scans and selection: Thrust (CUB on the GPU) wherever Thrust runs, which includes
// the kokkos backend on Kokkos' Cuda space. There CUB's single-pass scans and selection beat
// Kokkos' parallel_scan (bench/NOTES.md, "Kokkos on the Cuda space"); they run on CUDA's legacy
// default stream, which is ordered with Kokkos' own (blocking) stream.
#if APRON_THRUST_ALGORITHMS
namespace apron {

namespace detail {
struct NonZero {
  APRON_HD bool operator()(std::uint8_t f) const { return f != 0; }
};
}  // namespace detail

// op over f(0), ..., f(n-1), where init is op's identity (the empty range's result): sums and
// extremes of per-element values without writing them to memory. Waits for the device.
template <class T, class F, class Op>
T transform_reduce(std::size_t n, F f, T init, Op op) {
  const thrust::counting_iterator<std::size_t> first(0);
  return thrust::transform_reduce(policy(), first, first + static_cast<std::ptrdiff_t>(n), f, init,
                                  op);
}

// out[i] = init + f(0) + ... + f(i-1) (exclusive) or f(0) op ... op f(i) (inclusive, op Plus by
// default), i < n, in T: offsets from counts. f(i) may read out[i] (in-place scans).
template <class T, class F>
void exclusive_scan(std::size_t n, F f, T* out, T init = T{}) {
  const auto values = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0), f);
  thrust::exclusive_scan(policy(), values, values + static_cast<std::ptrdiff_t>(n),
                         thrust::device_pointer_cast(out), init);
}
template <class T, class F, class Op = Plus>
void inclusive_scan(std::size_t n, F f, T* out, Op op = {}) {
  const auto values = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0), f);
  thrust::inclusive_scan(policy(), values, values + static_cast<std::ptrdiff_t>(n),
                         thrust::device_pointer_cast(out), op);
}

// The indices i < n with pred(i) true, in increasing order, written from out on; returns their
// count (waits for the device). pred takes a std::uint32_t.
template <class Pred>
std::size_t copy_indices_if(std::size_t n, std::uint32_t* out, Pred pred) {
  const auto first = thrust::counting_iterator<std::uint32_t>(0);
  const auto end = thrust::copy_if(policy(), first, first + static_cast<std::ptrdiff_t>(n),
                                   thrust::device_pointer_cast(out), pred);
  return static_cast<std::size_t>(end - thrust::device_pointer_cast(out));
}

// The values[i], i < n, with flags[i] != 0, in order, written from out on; returns their count
// (waits for the device).
template <class T>
std::size_t copy_flagged(const T* values, const std::uint8_t* flags, std::size_t n, T* out) {
  const auto first = thrust::device_pointer_cast(values);
  const auto end = thrust::copy_if(policy(), first, first + static_cast<std::ptrdiff_t>(n),
                                   thrust::device_pointer_cast(flags),
                                   thrust::device_pointer_cast(out), detail::NonZero{});
  return static_cast<std::size_t>(end - thrust::device_pointer_cast(out));
}

}  // namespace apron
#endif
