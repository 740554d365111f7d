// The one place that knows which device backend is compiled in (ARCHITECTURE.md, "One source,
// three backends"). Kernels are APRON_HD functors launched through for_each_index(); containers
// are DeviceVector; temporaries of device algorithms come from the caching allocator. The cuda
// and omp backends are Thrust's device_vector and for_each (below), the kokkos backend is
// kernels/common/backend/kokkos.hpp. Device algorithms are in kernels/common/algorithms.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/hd.hpp"

namespace apron {
// Threads per block of for_each_index's GPU kernels (their launch bounds, in every backend) and
// of the hand-tuned CUDA kernels.
inline constexpr int kBlockThreads = 256;
}  // namespace apron

#if defined(APRON_BACKEND_KOKKOS)
#include "kernels/common/backend/kokkos.hpp"
#else
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#endif
// Thrust's algorithms run on the cuda and omp backends, and on the kokkos backend on Kokkos' Cuda
// space for what CUB does best (kernels/common/algorithms.hpp says which).
#if !defined(APRON_BACKEND_KOKKOS) || defined(APRON_DEVICE_CUDA)
#define APRON_THRUST_ALGORITHMS 1
#include <thrust/execution_policy.h>
#else
#define APRON_THRUST_ALGORITHMS 0
#endif

namespace apron {

#if !defined(APRON_BACKEND_KOKKOS)
template <class T>
using DeviceVector = thrust::device_vector<T>;

template <class T>
T* raw(DeviceVector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}
template <class T>
const T* raw(const DeviceVector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

namespace detail {
// Contiguous copies between host and device memory, done on return.
template <class T>
void copy_to_device(const T* host, std::size_t n, T* device) {
  thrust::copy_n(host, n, thrust::device_pointer_cast(device));
}
template <class T>
void copy_to_host(const T* device, std::size_t n, T* host) {
  thrust::copy_n(thrust::device_pointer_cast(device), n, host);
}
}  // namespace detail
#endif  // !APRON_BACKEND_KOKKOS

// Free-list allocator for Thrust's scratch memory: after the first steps, sorts, scans and
// reductions reuse blocks instead of calling cudaMalloc in the step loop.
class CachingAllocator {
 public:
  using value_type = char;
  char* allocate(std::ptrdiff_t bytes);
  void deallocate(char* ptr, std::size_t bytes);
  void release_all();  // frees cached blocks (at shutdown, before the runtime goes)
  std::size_t bytes_cached() const;
};

CachingAllocator& scratch_allocator();

// v.resize(n), except that growing an allocated array past its capacity reserves n + n/16
// instead of Thrust's doubling: per-particle arrays stay within ~6% of their use (device memory
// per particle limits the problem size), and the few percent by which a rank's count moves from
// step to step (ghosts, migration) fits without reallocating. A first allocation is exact: a
// count that never moves (one rank) wastes nothing.
template <class T>
void resize_per_particle(DeviceVector<T>& v, std::size_t n) {
  if (n > v.capacity()) v.reserve(v.capacity() == 0 ? n : n + n / 16);
  v.resize(n);
}

// dst = src (a host array), in dst's allocation when it is large enough: tables rebuilt every
// step (brick topology) would otherwise cudaMalloc and cudaFree (which synchronises) each time.
template <class T>
void upload(DeviceVector<T>& dst, const std::vector<T>& src) {
  resize_per_particle(dst, src.size());
  detail::copy_to_device(src.data(), src.size(), raw(dst));
}

#if APRON_THRUST_ALGORITHMS
// Execution policy for Thrust algorithms: the device system with the caching allocator. On the
// GPU without a stream synchronisation after each algorithm: all work goes to the default stream
// in order, and the algorithms that return a value to the host (reductions, copy_if's count)
// still wait for it. A sync after each of the step's ~60 small algorithms cost ~10 us apiece.
inline auto policy() {
#if defined(__CUDACC__)
  return thrust::cuda::par_nosync(scratch_allocator());
#else
  return thrust::device(scratch_allocator());
#endif
}
#endif  // APRON_THRUST_ALGORITHMS

// The first n values of a device array (all of them by default), copied to the host.
template <class T>
std::vector<T> to_host(const DeviceVector<T>& v, std::size_t n) {
  std::vector<T> h(n);
  detail::copy_to_host(raw(v), n, h.data());
  return h;
}
template <class T>
std::vector<T> to_host(const DeviceVector<T>& v) {
  return to_host(v, v.size());
}

// A host array copied into a device array, which takes its size.
template <class T>
void to_device(const std::vector<T>& host, DeviceVector<T>& out) {
  out.resize(host.size());
  if (!host.empty()) detail::copy_to_device(host.data(), host.size(), raw(out));
}

// One element of a device array, read or written from the host: a copy each, for the odd value
// (a count, a sentinel), never in a loop. Indexing a DeviceVector on the host compiles only where
// device memory is host memory (the kokkos backend on a host space).
template <class T>
T read_element(const DeviceVector<T>& v, std::size_t i) {
  T value;
  detail::copy_to_host(raw(v) + i, 1, &value);
  return value;
}
template <class T>
void write_element(DeviceVector<T>& v, std::size_t i, const T& value) {
  detail::copy_to_device(&value, 1, raw(v) + i);
}

#if defined(__CUDACC__)
template <int BlockThreads, int MinBlocks, class F>
__global__ void __launch_bounds__(BlockThreads, MinBlocks)
    for_each_index_kernel(std::size_t n, F f) {
  const std::size_t i = blockIdx.x * std::size_t{BlockThreads} + threadIdx.x;
  if (i < n) f(i);
}
void check_launch(const char* what);  // throws std::runtime_error on a launch error
#endif

#if !defined(APRON_BACKEND_KOKKOS)
// Runs f(i) for i in [0, n) on the device: the portable kernel launch. On the GPU one thread per
// index in blocks of BlockThreads, on the default stream (the one Thrust's policy() uses). A
// register-heavy functor runs faster in smaller blocks: the SM's register file then holds more
// of them (the cloth gradient, bench/NOTES.md). MinBlocks > 0 is a floor on the blocks resident
// per SM: the compiler caps each thread's registers so that they fit, spilling if it must, for a
// functor whose registers, not its memory traffic, limit how many warps hide its load latency
// (0: no floor). On the CPU both only name the kernel's shape.
template <int BlockThreads = kBlockThreads, int MinBlocks = 0, class F>
void for_each_index(std::size_t n, F f) {
  if (n == 0) return;
#if defined(__CUDACC__)
  const auto blocks = static_cast<unsigned>((n + BlockThreads - 1) / BlockThreads);
  for_each_index_kernel<BlockThreads, MinBlocks><<<blocks, BlockThreads>>>(n, f);
  check_launch("for_each_index");
#else
  thrust::for_each_n(policy(), thrust::counting_iterator<std::size_t>(0), n, f);
#endif
}

#endif  // !APRON_BACKEND_KOKKOS

// Scratch arrays indexed by explicit counts: grown, never shrunk, so that the later, smaller uses
// (levels, rounds, repeated analyses) reuse them without a launch to value-initialise the
// elements each regrowth would add.
template <class T>
void grow_to(DeviceVector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// Host memory the device copies to and from at full speed (page-locked under CUDA, plain memory
// otherwise), for staging: halo messages, checkpoint rows. Grows, never shrinks.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        registered_(std::exchange(other.registered_, false)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(registered_, other.registered_);
    return *this;
  }
  ~PinnedBuffer();
  void reserve(std::size_t bytes);
  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void release();
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool registered_ =
      false;  // huge pages page-locked in place (large buffers), not cudaMallocHost's
};

// Index of the lowest set bit of a non-zero mask.
APRON_HD inline int lowest_set_bit(std::uint32_t mask) {
#if defined(__CUDA_ARCH__)
  return __ffs(static_cast<int>(mask)) - 1;
#else
  return __builtin_ctz(mask);
#endif
}

// Ends the device runtime before MPI_Finalize: frees the scratch cache, then finalises Kokkos
// (kokkos backend), which starts on first use, after MPI_Init. Not before: a process that never
// touches the device keeps no OpenMP threads, so `inspect`'s forked child can use OpenMP (libgomp
// does not survive a fork with live threads). Device arrays freed after the stop are left to the
// process' end.
void stop_device_runtime();

// Waits until queued device work is done (timing phases, before host reads).
void device_synchronize();

const char* backend_name();
// The backend's library lines of `apron info` (Thrust's version; Kokkos' version, execution and
// memory spaces), each ending in a newline.
std::string backend_libraries();

}  // namespace apron
