#include "kernels/common/primitives.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/algorithms.hpp"

#if defined(__CUDACC__)
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_reduce.cuh>
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
// The portable LSD radix sort, 8 bits per pass, over tiles of consecutive pairs: each tile counts
// its digits (counts[digit * tiles + tile]), an exclusive scan turns the counts into each tile's
// first output slot per digit, and each tile scatters its pairs in order, so the sort is stable.
// One thread per tile: a host backend runs a few tiles per thread, which is what it wants; a
// device backend other than CUDA (which takes CUB's sort above) gets a correct, slower sort.
template <class K>
struct CountDigits {
  const K* keys;
  std::size_t n, tile, tiles;
  int shift;
  K mask;
  std::uint64_t* counts;
  APRON_HD void operator()(std::size_t t) const {
    for (std::size_t d = 0; d <= mask; ++d) counts[d * tiles + t] = 0;
    const std::size_t last = (t + 1) * tile < n ? (t + 1) * tile : n;
    for (std::size_t i = t * tile; i < last; ++i) ++counts[((keys[i] >> shift) & mask) * tiles + t];
  }
};

template <class K>
struct ScatterDigits {
  const K* keys;
  const std::uint32_t* values;
  std::size_t n, tile, tiles;
  int shift;
  K mask;
  std::uint64_t* offsets;
  K* keys_out;
  std::uint32_t* values_out;
  APRON_HD void operator()(std::size_t t) const {
    const std::size_t last = (t + 1) * tile < n ? (t + 1) * tile : n;
    for (std::size_t i = t * tile; i < last; ++i) {
      const std::uint64_t to = offsets[((keys[i] >> shift) & mask) * tiles + t]++;
      keys_out[to] = keys[i];
      values_out[to] = values[i];
    }
  }
};

struct ReadCount {
  const std::uint64_t* counts;
  APRON_HD std::uint64_t operator()(std::size_t i) const { return counts[i]; }
};

template <class K>
std::pair<bool, bool> radix_sort(K* keys, std::uint32_t* values, K* keys_alt,
                                 std::uint32_t* values_alt, std::size_t n, int bits) {
  constexpr std::size_t kDigits = 256, kMinTile = 2048, kMaxTiles = 1024;
  const std::size_t tiles = std::clamp<std::size_t>(n / kMinTile, 1, kMaxTiles);
  const std::size_t tile = (n + tiles - 1) / tiles;
  const std::size_t count_bytes = kDigits * tiles * sizeof(std::uint64_t);
  auto& scratch = scratch_allocator();
  auto* counts = reinterpret_cast<std::uint64_t*>(scratch.allocate(count_bytes));
  K* src_k = keys;
  K* dst_k = keys_alt;
  std::uint32_t* src_v = values;
  std::uint32_t* dst_v = values_alt;
  for (int shift = 0; shift < bits; shift += 8) {
    const K mask = static_cast<K>(bits - shift >= 8 ? 0xff : (1u << (bits - shift)) - 1);
    const std::size_t entries = (static_cast<std::size_t>(mask) + 1) * tiles;
    for_each_index(tiles, CountDigits<K>{src_k, n, tile, tiles, shift, mask, counts});
    exclusive_scan<std::uint64_t>(entries, ReadCount{counts}, counts);
    for_each_index(
        tiles, ScatterDigits<K>{src_k, src_v, n, tile, tiles, shift, mask, counts, dst_k, dst_v});
    std::swap(src_k, dst_k);
    std::swap(src_v, dst_v);
  }
  scratch.deallocate(reinterpret_cast<char*>(counts), count_bytes);
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
  apron::copy_n(device_iterator(from), n, device_iterator(to));
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

template <class T>
struct Read {
  const T* in;
  APRON_HD T operator()(std::size_t i) const { return in[i]; }
};

struct Widen {
  const std::uint32_t* in;
  APRON_HD std::uint64_t operator()(std::size_t i) const { return in[i]; }
};

template <class T>
std::size_t compact_values(const DeviceVector<T>& values, const DeviceVector<std::uint8_t>& flags,
                           std::size_t n, DeviceVector<T>& out) {
  out.resize(n);
  const std::size_t count = copy_flagged(raw(values), raw(flags), n, raw(out));
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

// Slot i starts a run when its key differs from the one before.
template <class K>
struct RunHead {
  const K* keys;
  APRON_HD bool operator()(std::uint32_t i) const { return i == 0 || keys[i] != keys[i - 1]; }
};

template <class K>
struct DescribeRun {
  const K* keys;
  const std::uint32_t* starts;
  std::size_t runs, n;
  K* unique;
  std::uint32_t* counts;
  APRON_HD void operator()(std::size_t r) const {
    const std::size_t end = r + 1 < runs ? starts[r + 1] : n;
    unique[r] = keys[starts[r]];
    counts[r] = static_cast<std::uint32_t>(end - starts[r]);
  }
};

template <class K>
std::size_t run_length_impl(const DeviceVector<K>& sorted_keys, std::size_t n,
                            DeviceVector<K>& unique, DeviceVector<std::uint32_t>& counts,
                            DeviceVector<std::uint32_t>& starts) {
  starts.resize(n);
  const std::size_t runs = copy_indices_if(n, raw(starts), RunHead<K>{raw(sorted_keys)});
  starts.resize(runs);
  unique.resize(runs);
  counts.resize(runs);
  for_each_index(runs,
                 DescribeRun<K>{raw(sorted_keys), raw(starts), runs, n, raw(unique), raw(counts)});
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
  apron::exclusive_scan<std::uint32_t>(n, Read<std::uint32_t>{raw(in)}, raw(out));
}
void exclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint64_t>& out) {
  out.resize(n);
  apron::exclusive_scan<std::uint64_t>(n, Widen{raw(in)}, raw(out));
}
void inclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint32_t>& out) {
  out.resize(n);
  apron::inclusive_scan<std::uint32_t>(n, Read<std::uint32_t>{raw(in)}, raw(out));
}
void inclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint64_t>& out) {
  out.resize(n);
  apron::inclusive_scan<std::uint64_t>(n, Widen{raw(in)}, raw(out));
}

std::uint64_t reduce_sum(const DeviceVector<std::uint32_t>& in, std::size_t n) {
  return transform_reduce(n, Widen{raw(in)}, std::uint64_t{0}, Plus{});
}

std::size_t select_indices(const DeviceVector<std::uint8_t>& flags, std::size_t n,
                           DeviceVector<std::uint32_t>& indices) {
  indices.resize(n);
  const std::size_t count = copy_flagged_indices(raw(flags), n, raw(indices));
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

namespace {
struct LowerBound {
  const std::uint32_t* sorted;
  std::size_t n;
  std::uint32_t* bound;
  APRON_HD void operator()(std::size_t k) const {
    std::size_t lo = 0, hi = n;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (sorted[mid] < k)
        lo = mid + 1;
      else
        hi = mid;
    }
    bound[k] = static_cast<std::uint32_t>(lo);
  }
};
}  // namespace

void lower_bounds(const DeviceVector<std::uint32_t>& sorted, std::size_t n, std::size_t count,
                  DeviceVector<std::uint32_t>& bounds) {
  bounds.resize(count);
  for_each_index(count, LowerBound{raw(sorted), n, raw(bounds)});
}

}  // namespace apron
