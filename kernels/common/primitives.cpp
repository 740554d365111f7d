#include "kernels/common/primitives.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>

#if defined(__CUDACC__)
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#else
#include <omp.h>
#endif

namespace apron {
namespace {

void check_bits(int bits, int key_bits_max) {
  if (bits < 0 || bits > key_bits_max)
    throw std::invalid_argument("sort_pairs: bit limit " + std::to_string(bits) + " outside 0.." +
                                std::to_string(key_bits_max));
}

#if defined(__CUDACC__)
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

int checked_int(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error(std::string(what) + ": more than 2^31 items in one call");
  return static_cast<int>(n);
}

// CUB's radix sort over double buffers; returns whether the sorted pairs ended in the alternates.
template <class K>
std::pair<bool, bool> radix_sort(K* keys, std::uint32_t* values, K* keys_alt,
                                 std::uint32_t* values_alt, std::size_t count, int bits) {
  const int n = checked_int(count, "sort_pairs");
  cub::DoubleBuffer<K> k(keys, keys_alt);
  cub::DoubleBuffer<std::uint32_t> v(values, values_alt);
  std::size_t temp_bytes = 0;
  cudaError_t status = cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k, v, n, 0, bits);
  auto& scratch = scratch_allocator();
  char* temp = scratch.allocate(static_cast<std::ptrdiff_t>(temp_bytes));
  if (status == cudaSuccess)
    status = cub::DeviceRadixSort::SortPairs(temp, temp_bytes, k, v, n, 0, bits);
  scratch.deallocate(temp, temp_bytes);
  check_cuda(status, "sort_pairs (radix sort)");
  return {k.Current() != keys, v.Current() != values};
}
#else
// LSD radix sort with OpenMP, 8 bits per pass: each thread counts the digits of its contiguous
// share, one thread turns the counts into per-thread output offsets, each thread scatters its
// share in order (so the sort is stable). A pass whose digit is the same for every key is
// skipped. Returns whether the sorted pairs ended in the alternates.
template <class K>
std::pair<bool, bool> radix_sort(K* keys, std::uint32_t* values, K* keys_alt,
                                 std::uint32_t* values_alt, std::size_t n, int bits) {
  constexpr int kDigits = 256;
  const int max_threads = n < (std::size_t{1} << 16) ? 1 : omp_get_max_threads();
  std::vector<std::size_t> offsets(static_cast<std::size_t>(max_threads) * kDigits);
  K* src_k = keys;
  K* dst_k = keys_alt;
  std::uint32_t* src_v = values;
  std::uint32_t* dst_v = values_alt;
  for (int shift = 0; shift < bits; shift += 8) {
    const K mask = static_cast<K>(bits - shift >= 8 ? 0xff : (1u << (bits - shift)) - 1);
    bool skip = false;
#pragma omp parallel num_threads(max_threads)
    {
      const int threads = omp_get_num_threads(), t = omp_get_thread_num();
      const std::size_t first = n * t / threads, last = n * (t + 1) / threads;
      std::size_t* mine = offsets.data() + static_cast<std::size_t>(t) * kDigits;
      std::fill(mine, mine + kDigits, std::size_t{0});
      for (std::size_t i = first; i < last; ++i) ++mine[(src_k[i] >> shift) & mask];
#pragma omp barrier
#pragma omp single
      {
        std::size_t at = 0;
        for (int d = 0; d < kDigits; ++d) {
          const std::size_t before = at;
          for (int u = 0; u < threads; ++u) {
            std::size_t& o = offsets[static_cast<std::size_t>(u) * kDigits + d];
            const std::size_t c = o;
            o = at;
            at += c;
          }
          if (at - before == n) skip = true;  // every key has digit d: the order stays
        }
      }
      if (!skip)
        for (std::size_t i = first; i < last; ++i) {
          const std::size_t to = mine[(src_k[i] >> shift) & mask]++;
          dst_k[to] = src_k[i];
          dst_v[to] = src_v[i];
        }
    }
    if (skip) continue;
    std::swap(src_k, dst_k);
    std::swap(src_v, dst_v);
  }
  return {src_k != keys, src_v != values};
}
#endif

template <class K>
void sort_pairs_buffered(DeviceVector<K>& keys, DeviceVector<std::uint32_t>& values, std::size_t n,
                         int bits, DeviceVector<K>& keys_alt,
                         DeviceVector<std::uint32_t>& values_alt) {
  check_bits(bits, static_cast<int>(8 * sizeof(K)));
  if (n > keys.size() || n > values.size())
    throw std::invalid_argument("sort_pairs: n exceeds the arrays");
  if (n < 2 || bits == 0) return;
  resize_per_particle(keys_alt, keys.size());
  resize_per_particle(values_alt, values.size());
  const auto [keys_moved, values_moved] =
      radix_sort(raw(keys), raw(values), raw(keys_alt), raw(values_alt), n, bits);
  if (keys_moved) keys.swap(keys_alt);
  if (values_moved) values.swap(values_alt);
}

template <class T>
void copy_to(T* to, const T* from, std::size_t n) {
#if defined(__CUDACC__)
  check_cuda(cudaMemcpyAsync(to, from, n * sizeof(T), cudaMemcpyDeviceToDevice), "sort_pairs copy");
#else
  std::copy(from, from + n, to);
#endif
}

template <class K>
void sort_pairs_scratch(DeviceVector<K>& keys, DeviceVector<std::uint32_t>& values, std::size_t n,
                        int bits) {
  check_bits(bits, static_cast<int>(8 * sizeof(K)));
  if (n > keys.size() || n > values.size())
    throw std::invalid_argument("sort_pairs: n exceeds the arrays");
  if (n < 2 || bits == 0) return;
  auto& scratch = scratch_allocator();
  const std::size_t key_bytes = n * sizeof(K), value_bytes = n * sizeof(std::uint32_t);
  char* block = scratch.allocate(static_cast<std::ptrdiff_t>(key_bytes + value_bytes));
  K* keys_alt = reinterpret_cast<K*>(block);  // K first: aligned for both
  auto* values_alt = reinterpret_cast<std::uint32_t*>(block + key_bytes);
  try {
    const auto [keys_moved, values_moved] =
        radix_sort(raw(keys), raw(values), keys_alt, values_alt, n, bits);
    if (keys_moved) copy_to(raw(keys), keys_alt, n);
    if (values_moved) copy_to(raw(values), values_alt, n);
  } catch (...) {
    scratch.deallocate(block, key_bytes + value_bytes);
    throw;
  }
  // Freed while the GPU may still sort: the block's next user is queued behind it on the same
  // stream.
  scratch.deallocate(block, key_bytes + value_bytes);
}

struct Widen {
  APRON_HD std::uint64_t operator()(std::uint32_t x) const { return x; }
};

struct NonZero {
  APRON_HD bool operator()(std::uint8_t f) const { return f != 0; }
};

template <class T>
std::size_t compact_values(const DeviceVector<T>& values, const DeviceVector<std::uint8_t>& flags,
                           std::size_t n, DeviceVector<T>& out) {
  out.resize(n);
  const auto end =
      thrust::copy_if(policy(), values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n),
                      flags.begin(), out.begin(), NonZero{});
  const auto count = static_cast<std::size_t>(end - out.begin());
  out.resize(count);
  return count;
}

#if !defined(__CUDACC__)
// One segment per index, summed in order.
template <class T>
struct ReduceSegment {
  const T* values;
  const std::uint32_t* offsets;
  Reduction op;
  T* out;
  void operator()(std::size_t s) const {
    const std::uint32_t first = offsets[s], last = offsets[s + 1];
    T acc = op == Reduction::sum   ? T(0)
            : op == Reduction::min ? std::numeric_limits<T>::max()
                                   : std::numeric_limits<T>::lowest();
    for (std::uint32_t i = first; i < last; ++i) {
      const T v = values[i];
      if (op == Reduction::sum)
        acc += v;
      else if (op == Reduction::min)
        acc = v < acc ? v : acc;
      else
        acc = v > acc ? v : acc;
    }
    out[s] = acc;
  }
};
#endif

template <class T>
void segmented_reduce_impl(const DeviceVector<T>& values,
                           const DeviceVector<std::uint32_t>& offsets, std::size_t segments,
                           Reduction op, DeviceVector<T>& out) {
  out.resize(segments);
  if (segments == 0) return;
  if (offsets.size() < segments + 1)
    throw std::invalid_argument("segmented_reduce: offsets needs segments + 1 entries");
#if defined(__CUDACC__)
  const int count = checked_int(segments, "segmented_reduce");
  const std::uint32_t* begin = raw(offsets);
  const std::uint32_t* end = begin + 1;
  auto run = [&](void* temp, std::size_t& bytes) {
    switch (op) {
      case Reduction::sum:
        return cub::DeviceSegmentedReduce::Sum(temp, bytes, raw(values), raw(out), count, begin,
                                               end);
      case Reduction::min:
        return cub::DeviceSegmentedReduce::Min(temp, bytes, raw(values), raw(out), count, begin,
                                               end);
      default:
        return cub::DeviceSegmentedReduce::Max(temp, bytes, raw(values), raw(out), count, begin,
                                               end);
    }
  };
  std::size_t temp_bytes = 0;
  cudaError_t status = run(nullptr, temp_bytes);
  auto& scratch = scratch_allocator();
  char* temp = scratch.allocate(static_cast<std::ptrdiff_t>(temp_bytes));
  if (status == cudaSuccess) status = run(temp, temp_bytes);
  scratch.deallocate(temp, temp_bytes);
  check_cuda(status, "segmented_reduce");
#else
  for_each_index(segments, ReduceSegment<T>{raw(values), raw(offsets), op, raw(out)});
#endif
}

template <class K>
std::size_t run_length_impl(const DeviceVector<K>& sorted_keys, std::size_t n,
                            DeviceVector<K>& unique, DeviceVector<std::uint32_t>& counts,
                            DeviceVector<std::uint32_t>& starts) {
  unique.resize(n);
  counts.resize(n);
  const auto ends = thrust::reduce_by_key(
      policy(), sorted_keys.begin(), sorted_keys.begin() + static_cast<std::ptrdiff_t>(n),
      thrust::constant_iterator<std::uint32_t>(1), unique.begin(), counts.begin());
  const auto runs = static_cast<std::size_t>(ends.first - unique.begin());
  unique.resize(runs);
  counts.resize(runs);
  exclusive_scan(counts, runs, starts);
  return runs;
}

}  // namespace

void sort_pairs(DeviceVector<std::uint32_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits, DeviceVector<std::uint32_t>& keys_alt,
                DeviceVector<std::uint32_t>& values_alt) {
  sort_pairs_buffered(keys, values, n, bits, keys_alt, values_alt);
}
void sort_pairs(DeviceVector<std::uint64_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits, DeviceVector<std::uint64_t>& keys_alt,
                DeviceVector<std::uint32_t>& values_alt) {
  sort_pairs_buffered(keys, values, n, bits, keys_alt, values_alt);
}
void sort_pairs(DeviceVector<std::uint32_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits) {
  sort_pairs_scratch(keys, values, n, bits);
}
void sort_pairs(DeviceVector<std::uint64_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits) {
  sort_pairs_scratch(keys, values, n, bits);
}

int key_bits(std::uint64_t count) {
  return count <= 1 ? 1 : static_cast<int>(std::bit_width(count - 1));
}

void exclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint32_t>& out) {
  out.resize(n);
  thrust::exclusive_scan(policy(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n),
                         out.begin(), std::uint32_t{0});
}
void exclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint64_t>& out) {
  out.resize(n);
  const auto wide = thrust::make_transform_iterator(in.begin(), Widen{});
  thrust::exclusive_scan(policy(), wide, wide + static_cast<std::ptrdiff_t>(n), out.begin(),
                         std::uint64_t{0});
}
void inclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint32_t>& out) {
  out.resize(n);
  thrust::inclusive_scan(policy(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n),
                         out.begin());
}
void inclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint64_t>& out) {
  out.resize(n);
  const auto wide = thrust::make_transform_iterator(in.begin(), Widen{});
  thrust::inclusive_scan(policy(), wide, wide + static_cast<std::ptrdiff_t>(n), out.begin());
}

std::uint64_t reduce_sum(const DeviceVector<std::uint32_t>& in, std::size_t n) {
  const auto wide = thrust::make_transform_iterator(in.begin(), Widen{});
  return thrust::reduce(policy(), wide, wide + static_cast<std::ptrdiff_t>(n), std::uint64_t{0});
}

std::size_t select_indices(const DeviceVector<std::uint8_t>& flags, std::size_t n,
                           DeviceVector<std::uint32_t>& indices) {
  indices.resize(n);
  const auto first = thrust::counting_iterator<std::uint32_t>(0);
  const auto end = thrust::copy_if(policy(), first, first + static_cast<std::ptrdiff_t>(n),
                                   flags.begin(), indices.begin(), NonZero{});
  const auto count = static_cast<std::size_t>(end - indices.begin());
  indices.resize(count);
  return count;
}

std::size_t compact(const DeviceVector<std::uint32_t>& values,
                    const DeviceVector<std::uint8_t>& flags, std::size_t n,
                    DeviceVector<std::uint32_t>& out) {
  return compact_values(values, flags, n, out);
}
std::size_t compact(const DeviceVector<std::uint64_t>& values,
                    const DeviceVector<std::uint8_t>& flags, std::size_t n,
                    DeviceVector<std::uint64_t>& out) {
  return compact_values(values, flags, n, out);
}
std::size_t compact(const DeviceVector<float>& values, const DeviceVector<std::uint8_t>& flags,
                    std::size_t n, DeviceVector<float>& out) {
  return compact_values(values, flags, n, out);
}
std::size_t compact(const DeviceVector<double>& values, const DeviceVector<std::uint8_t>& flags,
                    std::size_t n, DeviceVector<double>& out) {
  return compact_values(values, flags, n, out);
}
std::size_t compact(const DeviceVector<Vec4>& values, const DeviceVector<std::uint8_t>& flags,
                    std::size_t n, DeviceVector<Vec4>& out) {
  return compact_values(values, flags, n, out);
}

void segmented_reduce(const DeviceVector<float>& values, const DeviceVector<std::uint32_t>& offsets,
                      std::size_t segments, Reduction op, DeviceVector<float>& out) {
  segmented_reduce_impl(values, offsets, segments, op, out);
}
void segmented_reduce(const DeviceVector<double>& values,
                      const DeviceVector<std::uint32_t>& offsets, std::size_t segments,
                      Reduction op, DeviceVector<double>& out) {
  segmented_reduce_impl(values, offsets, segments, op, out);
}
void segmented_reduce(const DeviceVector<std::uint32_t>& values,
                      const DeviceVector<std::uint32_t>& offsets, std::size_t segments,
                      Reduction op, DeviceVector<std::uint32_t>& out) {
  segmented_reduce_impl(values, offsets, segments, op, out);
}

std::size_t run_length_encode(const DeviceVector<std::uint32_t>& sorted_keys, std::size_t n,
                              DeviceVector<std::uint32_t>& unique,
                              DeviceVector<std::uint32_t>& counts,
                              DeviceVector<std::uint32_t>& starts) {
  return run_length_impl(sorted_keys, n, unique, counts, starts);
}
std::size_t run_length_encode(const DeviceVector<std::uint64_t>& sorted_keys, std::size_t n,
                              DeviceVector<std::uint64_t>& unique,
                              DeviceVector<std::uint32_t>& counts,
                              DeviceVector<std::uint32_t>& starts) {
  return run_length_impl(sorted_keys, n, unique, counts, starts);
}

}  // namespace apron
