// Device primitives: the one place workload code gets sort, scan, compaction, segmented
// reductions and run-length encoding from (ARCHITECTURE.md: "device algorithms go through
// kernels/common's primitives, never a raw thrust:: call in workload code"). CUB on CUDA, the
// portable algorithms of kernels/common/algorithms.hpp otherwise; scratch memory from the
// caching allocator.
//
// Conventions: the first n elements of each input are used; outputs are resized to the count
// they hold. Functions that return a count (compaction, run-length) wait for the device to know
// it; the others only queue work on the default stream (no host synchronisation).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/backend.hpp"
#include "kernels/common/vec.hpp"

namespace apron {

// ---- Radix sort -----------------------------------------------------------------------------

// Stable sort of the pairs (keys[i], values[i]), i < n, by the low `bits` bits of the keys (0 to
// 32 or 64; bits above them are ignored and kept). Radix passes cover 8 bits each, so sorting
// only the bits a key can use saves passes: 4M grid cells (22 bits) take 3 instead of 4. Uses
// keys_alt/values_alt as double buffers (resized to keys/values' sizes and kept for reuse):
// the sorted pairs may end in either, and the vectors are swapped (O(1)) so that they are in
// keys/values on return (elements from n on are then the alternates' old ones).
void sort_pairs(DeviceVector<std::uint32_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits, DeviceVector<std::uint32_t>& keys_alt,
                DeviceVector<std::uint32_t>& values_alt);
void sort_pairs(DeviceVector<std::uint64_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits, DeviceVector<std::uint64_t>& keys_alt,
                DeviceVector<std::uint32_t>& values_alt);
// The same with the double buffers taken from the caching allocator for the call (one extra
// device copy of the pairs when they end in the scratch buffers). For sorts that are not repeated
// every step.
void sort_pairs(DeviceVector<std::uint32_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits = 32);
void sort_pairs(DeviceVector<std::uint64_t>& keys, DeviceVector<std::uint32_t>& values,
                std::size_t n, int bits = 64);

// Bits that keys in [0, count) need (at least 1): the `bits` of a sort by cell index.
int key_bits(std::uint64_t count);

// ---- Scans ----------------------------------------------------------------------------------

// out[i] = in[0] + ... + in[i-1] (exclusive) or + in[i] (inclusive), i < n: offsets from counts.
// in and out may be the same vector. The uint32 -> uint64 forms sum in 64 bits, for totals that
// may pass 2^32.
void exclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint32_t>& out);
void exclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint64_t>& out);
void inclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint32_t>& out);
void inclusive_scan(const DeviceVector<std::uint32_t>& in, std::size_t n,
                    DeviceVector<std::uint64_t>& out);

// in[0] + ... + in[n-1] in 64 bits (waits for the device): the total of the counts that a scan
// turns into offsets, to size the output and to check that 32-bit offsets do not wrap.
std::uint64_t reduce_sum(const DeviceVector<std::uint32_t>& in, std::size_t n);

// ---- Compaction -----------------------------------------------------------------------------

// The indices i < n with flags[i] != 0, in increasing order, in `indices`; returns their count.
// Which particles leave, which bricks are active.
std::size_t select_indices(const DeviceVector<std::uint8_t>& flags, std::size_t n,
                           DeviceVector<std::uint32_t>& indices);

// The same with a predicate instead of a flag array: pred(i) (an APRON_HD functor taking a
// std::uint32_t index) decides, so no flag array is written.
template <class Pred>
std::size_t select_indices_if(std::size_t n, Pred pred, DeviceVector<std::uint32_t>& indices) {
  indices.resize(n);
  const std::size_t count = copy_indices_if(n, raw(indices), pred);
  indices.resize(count);
  return count;
}

// The indices i < n with flags[i] != 0, in increasing order, written from out on (room for n);
// returns their count. For an output kept at its largest size between calls, which
// select_indices would shrink to the count (and a later grow value-initialise again).
template <class Flag>
struct FlagIsSet {
  const Flag* flags;
  APRON_HD bool operator()(std::uint32_t i) const { return flags[i] != 0; }
};
template <class Flag>
std::size_t copy_flagged_indices(const Flag* flags, std::size_t n, std::uint32_t* out) {
  return copy_indices_if(n, out, FlagIsSet<Flag>{flags});
}

// The values[i], i < n, with flags[i] != 0, in order, in `out`; returns their count.
std::size_t compact(const DeviceVector<std::uint32_t>& values,
                    const DeviceVector<std::uint8_t>& flags, std::size_t n,
                    DeviceVector<std::uint32_t>& out);
std::size_t compact(const DeviceVector<std::uint64_t>& values,
                    const DeviceVector<std::uint8_t>& flags, std::size_t n,
                    DeviceVector<std::uint64_t>& out);
std::size_t compact(const DeviceVector<float>& values, const DeviceVector<std::uint8_t>& flags,
                    std::size_t n, DeviceVector<float>& out);
std::size_t compact(const DeviceVector<double>& values, const DeviceVector<std::uint8_t>& flags,
                    std::size_t n, DeviceVector<double>& out);
std::size_t compact(const DeviceVector<Vec4>& values, const DeviceVector<std::uint8_t>& flags,
                    std::size_t n, DeviceVector<Vec4>& out);

// ---- Segmented reductions -------------------------------------------------------------------

enum class Reduction { sum, min, max };

// out[s] = op over values[offsets[s] .. offsets[s+1]), s < segments (offsets holds segments + 1
// entries): per-cell or per-brick sums and bounds. An empty segment gives op's identity: 0,
// std::numeric_limits<T>::max() for min, lowest() for max. Float sums are accumulated in T, in an
// order that depends on the backend (round-off differs; integer results do not).
void segmented_reduce(const DeviceVector<float>& values, const DeviceVector<std::uint32_t>& offsets,
                      std::size_t segments, Reduction op, DeviceVector<float>& out);
void segmented_reduce(const DeviceVector<double>& values,
                      const DeviceVector<std::uint32_t>& offsets, std::size_t segments,
                      Reduction op, DeviceVector<double>& out);
void segmented_reduce(const DeviceVector<std::uint32_t>& values,
                      const DeviceVector<std::uint32_t>& offsets, std::size_t segments,
                      Reduction op, DeviceVector<std::uint32_t>& out);

// ---- Run-length encoding --------------------------------------------------------------------

// From keys sorted so that equal keys are adjacent (the first n): each run's key in `unique`, its
// length in `counts` and its first index in `starts`; returns the number of runs. The occupied
// cells or bricks of a sorted key array, with their ranges.
std::size_t run_length_encode(const DeviceVector<std::uint32_t>& sorted_keys, std::size_t n,
                              DeviceVector<std::uint32_t>& unique,
                              DeviceVector<std::uint32_t>& counts,
                              DeviceVector<std::uint32_t>& starts);
std::size_t run_length_encode(const DeviceVector<std::uint64_t>& sorted_keys, std::size_t n,
                              DeviceVector<std::uint64_t>& unique,
                              DeviceVector<std::uint32_t>& counts,
                              DeviceVector<std::uint32_t>& starts);

// ---- Group starts ---------------------------------------------------------------------------

// bounds[k] = the first index i < n with sorted[i] >= k (n where there is none), k < count: where
// each key's group begins in a sorted key column, empty groups included (a binary search per
// key). bounds is resized to count. Which slots go to each rank; which entries belong to each row.
void lower_bounds(const DeviceVector<std::uint32_t>& sorted, std::size_t n, std::size_t count,
                  DeviceVector<std::uint32_t>& bounds);

}  // namespace apron
