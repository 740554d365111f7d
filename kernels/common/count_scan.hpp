// Scans of counts: offsets from integer counts f(0), f(1), ... Integer sums are exact in any
// order, so every algorithm gives the same bits; on the GPU a short scan (at most
// kCountScanOneLaunch values: a level's nodes, a small level's points) is one launch of one
// block, without the general scan's second kernel, its scratch memory and its host-side dispatch,
// which cost more than the sums there. Elsewhere (longer scans, the CPU, the kokkos backend,
// whose launches go through Kokkos) the general scans (kernels/common/algorithms.hpp). As those,
// f(i) may read out[i]: every value is read before any is written. On the GPU a longer scan of
// at most kCountScanStoredLimit values first stores every f(i) in out (a thread each), then scans
// out: the general scan evaluated its threads' ~15 values one after another, each f a chain of
// dependent loads (a node's key through its point's index), ~20 us however few the values.
#pragma once

#include <cstddef>
#include <type_traits>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/backend.hpp"

#if defined(__CUDACC__) && !defined(APRON_BACKEND_KOKKOS)
#include <cub/block/block_scan.cuh>
#endif

namespace apron {

inline constexpr int kCountScanThreads = 1024;
inline constexpr int kCountScanItems = 16;  // per thread, consecutive
inline constexpr std::size_t kCountScanOneLaunch = std::size_t{kCountScanThreads} * kCountScanItems;
// Beyond this the general scan's blocks fill the GPU and hide their loads' latency themselves.
inline constexpr std::size_t kCountScanStoredLimit = std::size_t{1} << 22;

#if defined(__CUDACC__) && !defined(APRON_BACKEND_KOKKOS)
namespace detail {
// One block: each thread sums its run of consecutive values, a block scan of the runs' sums,
// then each thread writes its run's offsets (after a barrier: all values are read first).
template <bool Inclusive, class T, class F>
__global__ void __launch_bounds__(kCountScanThreads)
    count_scan_kernel(std::size_t n, F f, T* out, T init) {
  using Scan = cub::BlockScan<T, kCountScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  const std::size_t per = (n + kCountScanThreads - 1) / kCountScanThreads;
  const std::size_t begin = threadIdx.x * per;
  T v[kCountScanItems];
  T run = 0;
#pragma unroll
  for (int k = 0; k < kCountScanItems; ++k) {
    const std::size_t i = begin + static_cast<std::size_t>(k);
    v[k] = static_cast<std::size_t>(k) < per && i < n ? static_cast<T>(f(i)) : T{0};
    run = static_cast<T>(run + v[k]);
  }
  T before;
  Scan(temp).ExclusiveSum(run, before);
  __syncthreads();
  T offset = static_cast<T>(init + before);
#pragma unroll
  for (int k = 0; k < kCountScanItems; ++k) {
    const std::size_t i = begin + static_cast<std::size_t>(k);
    if (static_cast<std::size_t>(k) >= per || i >= n) break;
    if constexpr (Inclusive) {
      offset = static_cast<T>(offset + v[k]);
      out[i] = offset;
    } else {
      out[i] = offset;
      offset = static_cast<T>(offset + v[k]);
    }
  }
}

// out[i] = f(i), then the scans read out.
template <class T, class F>
struct StoreCount {
  F f;
  T* out;
  APRON_HD void operator()(std::size_t i) const { out[i] = static_cast<T>(f(i)); }
};
template <class T>
struct StoredCount {
  const T* out;
  APRON_HD T operator()(std::size_t i) const { return out[i]; }
};
}  // namespace detail
#endif

// out[i] = init + f(0) + ... + f(i-1), i < n.
template <class T, class F>
void exclusive_count_scan(std::size_t n, F f, T* out, T init = T{}) {
  static_assert(std::is_integral_v<T>, "count scans are of integers (exact in any order)");
#if defined(__CUDACC__) && !defined(APRON_BACKEND_KOKKOS)
  if (n <= kCountScanOneLaunch) {
    if (n == 0) return;
    detail::count_scan_kernel<false><<<1, kCountScanThreads>>>(n, f, out, init);
    check_launch("exclusive_count_scan");
    return;
  }
  if (n <= kCountScanStoredLimit) {
    for_each_index(n, detail::StoreCount<T, F>{f, out});
    exclusive_scan(n, detail::StoredCount<T>{out}, out, init);
    return;
  }
#endif
  exclusive_scan(n, f, out, init);
}

// out[i] = f(0) + ... + f(i), i < n.
template <class T, class F>
void inclusive_count_scan(std::size_t n, F f, T* out) {
  static_assert(std::is_integral_v<T>, "count scans are of integers (exact in any order)");
#if defined(__CUDACC__) && !defined(APRON_BACKEND_KOKKOS)
  if (n <= kCountScanOneLaunch) {
    if (n == 0) return;
    detail::count_scan_kernel<true><<<1, kCountScanThreads>>>(n, f, out, T{0});
    check_launch("inclusive_count_scan");
    return;
  }
  if (n <= kCountScanStoredLimit) {
    for_each_index(n, detail::StoreCount<T, F>{f, out});
    inclusive_scan(n, detail::StoredCount<T>{out}, out);
    return;
  }
#endif
  inclusive_scan(n, f, out);
}

}  // namespace apron
