// Device primitives and the uniform grid (kernels/common) against sequential std:: references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/box.hpp"
#include "kernels/common/cell_list.hpp"
#include "kernels/common/primitives.hpp"
#include "kernels/common/uniform_grid.hpp"

namespace apron {
namespace {

const std::size_t kSizes[] = {0, 1, 17, 1000, 100003};

template <class T>
DeviceVector<T> to_device(const std::vector<T>& h) {
  return DeviceVector<T>(h.begin(), h.end());
}

template <class K>
std::vector<K> random_keys(std::size_t n, std::mt19937_64& rng) {
  std::vector<K> keys(n);
  for (auto& k : keys) k = static_cast<K>(rng());
  return keys;
}

// The reference: std::stable_sort of the indices by the low `bits` bits of the keys.
template <class K>
void expect_sorted_like_reference(const std::vector<K>& keys_in, const std::vector<K>& keys_out,
                                  const std::vector<std::uint32_t>& values_out, int bits) {
  const K mask = bits == 8 * int(sizeof(K)) ? ~K(0) : (K(1) << bits) - 1;
  std::vector<std::uint32_t> expected(keys_in.size());
  std::iota(expected.begin(), expected.end(), 0u);
  std::stable_sort(expected.begin(), expected.end(), [&](std::uint32_t a, std::uint32_t b) {
    return (keys_in[a] & mask) < (keys_in[b] & mask);
  });
  ASSERT_EQ(values_out.size(), expected.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    // Stable: the values (original indices) come out in exactly the reference order, and each
    // key travels with its value, its bits above the limit kept.
    if (values_out[i] != expected[i] || keys_out[i] != keys_in[expected[i]]) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << "n " << keys_in.size() << ", bits " << bits;
}

template <class K>
void check_sort(const std::vector<int>& bit_limits) {
  std::mt19937_64 rng(7);
  for (std::size_t n : kSizes)
    for (int bits : bit_limits) {
      const std::vector<K> keys = random_keys<K>(n, rng);
      std::vector<std::uint32_t> values(n);
      std::iota(values.begin(), values.end(), 0u);
      {  // with double buffers, twice (the second sort reuses the swapped buffers)
        DeviceVector<K> k = to_device(keys), k_alt;
        DeviceVector<std::uint32_t> v = to_device(values), v_alt;
        sort_pairs(k, v, n, bits, k_alt, v_alt);
        expect_sorted_like_reference(keys, to_host(k), to_host(v), bits);
        apron::copy(keys.begin(), keys.end(), k.begin());
        apron::copy(values.begin(), values.end(), v.begin());
        sort_pairs(k, v, n, bits, k_alt, v_alt);
        expect_sorted_like_reference(keys, to_host(k), to_host(v), bits);
      }
      {  // with scratch buffers
        DeviceVector<K> k = to_device(keys);
        DeviceVector<std::uint32_t> v = to_device(values);
        sort_pairs(k, v, n, bits);
        expect_sorted_like_reference(keys, to_host(k), to_host(v), bits);
      }
    }
}

TEST(SortPairs, Uint32KeysAgainstStableSort) {
  check_sort<std::uint32_t>({1, 7, 8, 16, 22, 31, 32});
}

TEST(SortPairs, Uint64KeysAgainstStableSort) {
  check_sort<std::uint64_t>({1, 7, 16, 31, 32, 33, 48, 63, 64});
}

TEST(SortPairs, FewDistinctKeysAndConstantDigits) {
  // Many equal keys (stability), and keys whose upper digits are all equal (passes with one
  // digit for every key change nothing).
  std::mt19937_64 rng(3);
  for (std::size_t n : {std::size_t{1000}, std::size_t{100003}}) {
    std::vector<std::uint32_t> keys(n);
    for (auto& k : keys) k = 0x12340000u | static_cast<std::uint32_t>(rng() % 5);
    std::vector<std::uint32_t> values(n);
    std::iota(values.begin(), values.end(), 0u);
    for (int bits : {3, 16, 32}) {
      DeviceVector<std::uint32_t> k = to_device(keys), v = to_device(values), k_alt, v_alt;
      sort_pairs(k, v, n, bits, k_alt, v_alt);
      expect_sorted_like_reference(keys, to_host(k), to_host(v), bits);
    }
  }
}

TEST(SortPairs, OnlyTheFirstNAreSortedByTheScratchForm) {
  std::vector<std::uint32_t> keys = {5, 3, 9, 1, 0, 2}, values = {0, 1, 2, 3, 4, 5};
  DeviceVector<std::uint32_t> k = to_device(keys), v = to_device(values);
  sort_pairs(k, v, 4, 32);
  EXPECT_EQ(to_host(k), (std::vector<std::uint32_t>{1, 3, 5, 9, 0, 2}));
  EXPECT_EQ(to_host(v), (std::vector<std::uint32_t>{3, 1, 0, 2, 4, 5}));
}

TEST(SortPairs, RejectsBadArguments) {
  DeviceVector<std::uint32_t> k(4), v(4);
  EXPECT_THROW(sort_pairs(k, v, 4, 33), std::invalid_argument);
  EXPECT_THROW(sort_pairs(k, v, 5, 32), std::invalid_argument);
}

TEST(KeyBits, BitsOfTheLargestKey) {
  EXPECT_EQ(key_bits(0), 1);
  EXPECT_EQ(key_bits(1), 1);
  EXPECT_EQ(key_bits(2), 1);
  EXPECT_EQ(key_bits(3), 2);
  EXPECT_EQ(key_bits(256), 8);
  EXPECT_EQ(key_bits(257), 9);
  EXPECT_EQ(key_bits(std::uint64_t{1} << 32), 32);
  EXPECT_EQ(key_bits((std::uint64_t{1} << 32) + 1), 33);
}

TEST(Scan, ExclusiveAndInclusiveAgainstStd) {
  std::mt19937_64 rng(11);
  for (std::size_t n : kSizes) {
    std::vector<std::uint32_t> in(n);
    // Up to 2^31 each: the 64-bit sums pass 2^32, the 32-bit ones wrap as std's do.
    for (auto& x : in) x = static_cast<std::uint32_t>(rng() >> 33);
    std::vector<std::uint32_t> ex32(n), in32(n);
    std::vector<std::uint64_t> ex64(n), in64(n), wide(in.begin(), in.end());
    std::exclusive_scan(in.begin(), in.end(), ex32.begin(), std::uint32_t{0});
    std::inclusive_scan(in.begin(), in.end(), in32.begin());
    std::exclusive_scan(wide.begin(), wide.end(), ex64.begin(), std::uint64_t{0});
    std::inclusive_scan(wide.begin(), wide.end(), in64.begin());
    const DeviceVector<std::uint32_t> d = to_device(in);
    DeviceVector<std::uint32_t> o32;
    DeviceVector<std::uint64_t> o64;
    exclusive_scan(d, n, o32);
    EXPECT_EQ(to_host(o32), ex32) << n;
    inclusive_scan(d, n, o32);
    EXPECT_EQ(to_host(o32), in32) << n;
    exclusive_scan(d, n, o64);
    EXPECT_EQ(to_host(o64), ex64) << n;
    inclusive_scan(d, n, o64);
    EXPECT_EQ(to_host(o64), in64) << n;
    DeviceVector<std::uint32_t> in_place = to_device(in);
    exclusive_scan(in_place, n, in_place);
    EXPECT_EQ(to_host(in_place), ex32) << n;
    EXPECT_EQ(reduce_sum(d, n), n == 0 ? 0 : in64.back()) << n;
    if (n > 1000) {
      EXPECT_GT(in64.back(), std::uint64_t{1} << 32);  // 64-bit sums tested past 2^32
    }
  }
}

TEST(Scan, SixtyFourBitSumPassesTwoToThe32) {
  const std::vector<std::uint32_t> in(5, 0xffffffffu);
  const DeviceVector<std::uint32_t> d = to_device(in);
  DeviceVector<std::uint64_t> out;
  inclusive_scan(d, in.size(), out);
  EXPECT_EQ(to_host(out).back(), 5 * std::uint64_t{0xffffffffu});
  EXPECT_EQ(reduce_sum(d, in.size()), 5 * std::uint64_t{0xffffffffu});
}

std::vector<std::uint8_t> random_flags(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::uint8_t> flags(n);
  const std::uint8_t set[] = {1, 2, 255};
  for (auto& f : flags) f = rng() % 10 < 3 ? set[rng() % 3] : 0;
  return flags;
}

struct MultipleOfThree {
  APRON_HD bool operator()(std::uint32_t i) const { return i % 3 == 0; }
};

TEST(Compaction, SelectIndicesAndCompactAgainstLoops) {
  std::mt19937_64 rng(5);
  for (std::size_t n : kSizes) {
    const std::vector<std::uint8_t> flags = random_flags(n, rng);
    std::vector<std::uint32_t> expected_idx, every_third;
    for (std::size_t i = 0; i < n; ++i) {
      if (flags[i]) expected_idx.push_back(static_cast<std::uint32_t>(i));
      if (i % 3 == 0) every_third.push_back(static_cast<std::uint32_t>(i));
    }
    const DeviceVector<std::uint8_t> d_flags = to_device(flags);
    DeviceVector<std::uint32_t> idx;
    EXPECT_EQ(select_indices(d_flags, n, idx), expected_idx.size());
    EXPECT_EQ(to_host(idx), expected_idx);
    EXPECT_EQ(select_indices_if(n, MultipleOfThree{}, idx), every_third.size());
    EXPECT_EQ(to_host(idx), every_third);

    std::vector<std::uint64_t> u64(n);
    std::vector<float> f32(n);
    std::vector<double> f64(n);
    std::vector<Vec4> v4(n);
    for (std::size_t i = 0; i < n; ++i) {
      u64[i] = rng();
      f32[i] = static_cast<float>(i) * 0.5f;
      f64[i] = static_cast<double>(rng() % 1000) - 500.5;
      v4[i] = {float(i), float(2 * i), float(3 * i), float(rng() % 7)};
    }
    const auto check = [&](const auto& values) {
      using T = typename std::decay_t<decltype(values)>::value_type;
      std::vector<T> expected;
      for (std::size_t i = 0; i < n; ++i)
        if (flags[i]) expected.push_back(values[i]);
      DeviceVector<T> out;
      EXPECT_EQ(compact(to_device(values), d_flags, n, out), expected.size());
      const std::vector<T> got = to_host(out);
      ASSERT_EQ(got.size(), expected.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::memcmp(&got[i], &expected[i], sizeof(T)), 0) << "n " << n << " at " << i;
    };
    std::vector<std::uint32_t> u32(n);
    for (auto& x : u32) x = static_cast<std::uint32_t>(rng());
    check(u32);
    check(u64);
    check(f32);
    check(f64);
    check(v4);
  }
}

// Random offsets over [0, n] for `segments` segments (some empty).
std::vector<std::uint32_t> random_offsets(std::size_t n, std::size_t segments,
                                          std::mt19937_64& rng) {
  std::vector<std::uint32_t> offsets(segments + 1);
  for (auto& o : offsets) o = static_cast<std::uint32_t>(n == 0 ? 0 : rng() % (n + 1));
  std::sort(offsets.begin(), offsets.end());
  offsets.front() = 0;
  offsets.back() = static_cast<std::uint32_t>(n);
  return offsets;
}

template <class T>
void check_segmented(const std::vector<T>& values, const std::vector<std::uint32_t>& offsets,
                     double relative_sum_tolerance) {
  const std::size_t segments = offsets.size() - 1;
  const DeviceVector<T> d_values = to_device(values);
  const DeviceVector<std::uint32_t> d_offsets = to_device(offsets);
  DeviceVector<T> out;
  segmented_reduce(d_values, d_offsets, segments, Reduction::sum, out);
  const std::vector<T> sums = to_host(out);
  segmented_reduce(d_values, d_offsets, segments, Reduction::min, out);
  const std::vector<T> mins = to_host(out);
  segmented_reduce(d_values, d_offsets, segments, Reduction::max, out);
  const std::vector<T> maxs = to_host(out);
  ASSERT_EQ(sums.size(), segments);
  ASSERT_EQ(mins.size(), segments);
  ASSERT_EQ(maxs.size(), segments);
  for (std::size_t s = 0; s < segments; ++s) {
    double sum = 0, sum_abs = 0;
    T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::lowest();
    for (std::uint32_t i = offsets[s]; i < offsets[s + 1]; ++i) {
      sum += static_cast<double>(values[i]);
      sum_abs += std::abs(static_cast<double>(values[i]));
      lo = std::min(lo, values[i]);
      hi = std::max(hi, values[i]);
    }
    const double length = offsets[s + 1] - offsets[s];
    // Any summation order of `length` terms is within length * eps * sum|v| of the exact sum.
    EXPECT_LE(std::abs(static_cast<double>(sums[s]) - sum),
              relative_sum_tolerance * length * sum_abs)
        << "segment " << s << " of " << segments;
    EXPECT_EQ(mins[s], lo) << "segment " << s;
    EXPECT_EQ(maxs[s], hi) << "segment " << s;
  }
}

TEST(SegmentedReduce, SumMinMaxAgainstLoops) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (std::size_t n : kSizes)
    for (std::size_t segments : {std::size_t{1}, std::size_t{3}, n / 7 + 2, n + 5}) {
      const std::vector<std::uint32_t> offsets = random_offsets(n, segments, rng);
      std::vector<float> f32(n);
      std::vector<double> f64(n);
      std::vector<std::uint32_t> u32(n);
      for (std::size_t i = 0; i < n; ++i) {
        f32[i] = static_cast<float>(unit(rng));
        f64[i] = unit(rng) * 1e6;
        u32[i] = static_cast<std::uint32_t>(rng() % 1000);  // sums fit in 32 bits: exact
      }
      check_segmented(f32, offsets, 2 * FLT_EPSILON);
      check_segmented(f64, offsets, 2 * DBL_EPSILON);
      check_segmented(u32, offsets, 0);
    }
}

TEST(SegmentedReduce, EmptySegmentsGiveTheIdentity) {
  const DeviceVector<float> values(4, 1.0f);
  const DeviceVector<std::uint32_t> offsets = to_device(std::vector<std::uint32_t>{0, 0, 4, 4});
  DeviceVector<float> out;
  segmented_reduce(values, offsets, 3, Reduction::sum, out);
  EXPECT_EQ(to_host(out), (std::vector<float>{0, 4, 0}));
  segmented_reduce(values, offsets, 3, Reduction::min, out);
  EXPECT_EQ(to_host(out)[0], std::numeric_limits<float>::max());
  segmented_reduce(values, offsets, 3, Reduction::max, out);
  EXPECT_EQ(to_host(out)[2], std::numeric_limits<float>::lowest());
  segmented_reduce(values, offsets, 0, Reduction::sum, out);
  EXPECT_TRUE(out.empty());
}

template <class K>
void check_run_length(K high_bits) {
  std::mt19937_64 rng(13);
  for (std::size_t n : kSizes) {
    std::vector<K> keys(n);
    for (auto& k : keys) k = high_bits | static_cast<K>(rng() % (n / 3 + 1));
    std::sort(keys.begin(), keys.end());
    std::vector<K> unique;
    std::vector<std::uint32_t> counts, starts;
    for (std::size_t i = 0; i < n; ++i) {
      if (i == 0 || keys[i] != keys[i - 1]) {
        unique.push_back(keys[i]);
        counts.push_back(0);
        starts.push_back(static_cast<std::uint32_t>(i));
      }
      ++counts.back();
    }
    DeviceVector<K> d_unique;
    DeviceVector<std::uint32_t> d_counts, d_starts;
    EXPECT_EQ(run_length_encode(to_device(keys), n, d_unique, d_counts, d_starts), unique.size());
    EXPECT_EQ(to_host(d_unique), unique) << n;
    EXPECT_EQ(to_host(d_counts), counts) << n;
    EXPECT_EQ(to_host(d_starts), starts) << n;
  }
}

TEST(RunLengthEncode, UniqueCountsStartsAgainstLoop) {
  check_run_length<std::uint32_t>(0x40000000u);
  check_run_length<std::uint64_t>(std::uint64_t{5} << 60);
}

TEST(LowerBounds, GroupStartsAgainstStdLowerBound) {
  std::mt19937_64 rng(11);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}}) {
    std::vector<std::uint32_t> keys(n + 5, 0u);  // 5 slots past n that must be ignored
    std::uniform_int_distribution<std::uint32_t> key(0, 40);
    for (std::size_t i = 0; i < n; ++i) keys[i] = key(rng);
    const auto end = keys.begin() + static_cast<std::ptrdiff_t>(n);
    std::sort(keys.begin(), end);
    const std::size_t count = 45;  // keys 41-44 have no group: their bounds are n
    DeviceVector<std::uint32_t> bounds;
    lower_bounds(DeviceVector<std::uint32_t>(keys.begin(), keys.end()), n, count, bounds);
    const std::vector<std::uint32_t> got = to_host(bounds);
    ASSERT_EQ(got.size(), count);
    for (std::uint32_t k = 0; k < count; ++k)
      EXPECT_EQ(got[k],
                static_cast<std::uint32_t>(std::lower_bound(keys.begin(), end, k) - keys.begin()))
          << "n " << n << ", key " << k;
  }
}

// ---- Uniform grid and cell lists --------------------------------------------------------------

GridSpec unit_grid() {
  GridSpec g;
  g.origin[0] = -1, g.origin[1] = 0, g.origin[2] = 2;
  g.cell = 0.5f;
  g.dims[0] = 4, g.dims[1] = 3, g.dims[2] = 2;
  return g;
}

TEST(UniformGrid, CellOfAndStraysClampedToEdgeCells) {
  const GridSpec g = unit_grid();
  EXPECT_EQ(g.cell_count(), 24u);
  EXPECT_EQ(g.coord(-1.0f, 0), 0);
  EXPECT_EQ(g.coord(-0.49f, 0), 1);
  EXPECT_EQ(g.coord(0.99f, 0), 3);
  EXPECT_EQ(g.coord(1.01f, 0), 3);  // beyond the top: the last cell
  EXPECT_EQ(g.coord(-1.01f, 0), 0);
  EXPECT_EQ(g.coord(1e30f, 1), 2);
  EXPECT_EQ(g.coord(-1e30f, 1), 0);
  EXPECT_EQ(g.coord(std::numeric_limits<float>::infinity(), 2), 1);
  EXPECT_EQ(g.coord(-std::numeric_limits<float>::infinity(), 2), 0);
  EXPECT_EQ(g.linear(1, 2, 1), (1u * 3 + 2) * 4 + 1);
  EXPECT_EQ(g.cell_of(Vec4{0.2f, 0.7f, 2.6f, 0}), g.linear(2, 1, 1));
  EXPECT_EQ(g.cell_of(Vec4{-5, 100, -3, 0}), g.linear(0, 2, 0));
  EXPECT_EQ(g.cell_of(Vec3{5, -100, 30}), g.linear(3, 0, 1));
}

TEST(UniformGrid, CoveringSizes) {
  Box box;
  box.lo[0] = 0, box.lo[1] = -1, box.lo[2] = 3;
  box.hi[0] = 1, box.hi[1] = 1, box.hi[2] = 3.5;
  const GridSpec g = GridSpec::covering(box, 0.25, 2);
  EXPECT_EQ(g.reach, 2);
  EXPECT_GT(g.cell, 0.125f);  // a hair larger than radius / divisions
  EXPECT_LT(g.cell, 0.125f * (1 + 1e-5f));
  EXPECT_EQ(g.dims[0], 8);
  EXPECT_EQ(g.dims[1], 16);
  EXPECT_EQ(g.dims[2], 4);
  EXPECT_EQ(g.origin[1], -1.0f);
  for (int d = 0; d < 3; ++d) EXPECT_GE(g.dims[d] * double(g.cell), box.extent(d));
  const GridSpec one = GridSpec::covering(box, 0.25, 1);
  EXPECT_EQ(one.reach, 1);
  EXPECT_EQ(one.dims[0], 4);
  Box flat = box;
  flat.hi[2] = flat.lo[2];  // no extent: one layer of cells
  EXPECT_EQ(GridSpec::covering(flat, 0.25).dims[2], 1);
  Box huge;
  for (int d = 0; d < 3; ++d) huge.hi[d] = 1e4;
  EXPECT_THROW(GridSpec::covering(huge, 1e-2), std::runtime_error);
}

std::vector<Vec4> random_points(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> inside(-1.2f, 1.3f);  // some strays beyond the grid
  std::vector<Vec4> points(n);
  for (auto& p : points) p = {inside(rng), inside(rng) * 1.5f + 0.7f, inside(rng) + 2.5f, 0};
  return points;
}

// start[c+1] - start[c] is the number of items of cell c; items within a cell in input order.
void expect_cell_list(const GridSpec& g, const std::vector<std::uint32_t>& item_cells,
                      const std::vector<std::uint32_t>& items, const CellList& list) {
  const std::size_t cells = g.cell_count();
  std::vector<std::uint32_t> start(cells + 1);
  apron::copy(device_iterator(list.view().start), device_iterator(list.view().start) + start.size(),
              start.begin());
  std::vector<std::vector<std::uint32_t>> expected(cells);
  for (std::size_t i = 0; i < items.size(); ++i) expected[item_cells[i]].push_back(items[i]);
  const std::vector<std::uint32_t> order = to_host(list.order());
  ASSERT_EQ(order.size(), items.size());
  EXPECT_EQ(start[0], 0u);
  EXPECT_EQ(start[cells], items.size());
  for (std::size_t c = 0; c < cells; ++c) {
    ASSERT_EQ(start[c + 1] - start[c], expected[c].size()) << "cell " << c;
    EXPECT_TRUE(std::equal(expected[c].begin(), expected[c].end(), order.begin() + start[c]))
        << "cell " << c;
  }
}

TEST(CellList, StartArrayMatchesBruteForceCount) {
  std::mt19937_64 rng(17);
  const GridSpec g = unit_grid();
  for (std::size_t n : kSizes) {
    const std::vector<Vec4> points = random_points(n, rng);
    std::vector<std::uint32_t> cells(n), items(n);
    for (std::size_t i = 0; i < n; ++i) cells[i] = g.cell_of(points[i]);
    std::iota(items.begin(), items.end(), 0u);
    CellList list;
    list.build(g, to_device(points), n);
    expect_cell_list(g, cells, items, list);
    list.build(g, to_device(points), n);  // rebuilt in place (swapped buffers)
    expect_cell_list(g, cells, items, list);
    CellList sorted_only;
    sorted_only.sort(g, to_device(points), n);
    EXPECT_EQ(to_host(sorted_only.order()), to_host(list.order()));
  }
}

struct WriteEntries {
  const std::uint32_t* cells;
  const std::uint32_t* items;
  std::uint32_t* entry_cells;
  std::uint32_t* entry_items;
  APRON_HD void operator()(std::size_t i) const {
    entry_cells[i] = cells[i];
    entry_items[i] = items[i];
  }
};

TEST(CellList, EntriesCoveringSeveralCells) {
  // Items binned into several cells each (as meshdist's triangles): each cell lists its items in
  // entry order.
  std::mt19937_64 rng(19);
  const GridSpec g = unit_grid();
  for (std::size_t items_count : kSizes) {
    std::vector<std::uint32_t> cells, items;
    for (std::size_t t = 0; t < items_count; ++t)
      for (std::uint64_t k = rng() % 4; k-- > 0;) {
        cells.push_back(static_cast<std::uint32_t>(rng() % g.cell_count()));
        items.push_back(static_cast<std::uint32_t>(t));
      }
    const DeviceVector<std::uint32_t> d_cells = to_device(cells), d_items = to_device(items);
    CellList list;
    list.resize_entries(cells.size());
    for_each_index(cells.size(), WriteEntries{raw(d_cells), raw(d_items), list.entry_cells(),
                                              list.entry_items()});
    list.build_from_entries(g);
    EXPECT_EQ(list.size(), cells.size());
    expect_cell_list(g, cells, items, list);
  }
}

// Staging buffers: small ones from cudaMallocHost, large ones (32 MB and more) on huge pages
// page-locked in place (backend.cpp). Both carry copies from and to the device, stay page-locked,
// grow on demand, and hand themselves over when moved.
TEST(PinnedBuffer, SmallAndLargeBuffersCarryDeviceCopies) {
  for (const std::size_t bytes : {std::size_t{4096}, std::size_t{64} << 20}) {
    const std::size_t n = bytes / sizeof(std::uint32_t);
    std::vector<std::uint32_t> values(n);
    std::iota(values.begin(), values.end(), 7u);
    DeviceVector<std::uint32_t> device = to_device(values);
    PinnedBuffer buffer;
    buffer.reserve(bytes);
    ASSERT_GE(buffer.size(), bytes);
    auto* host = reinterpret_cast<std::uint32_t*>(buffer.data());
    detail::copy_to_host(raw(device), n, host);
    EXPECT_TRUE(std::equal(values.begin(), values.end(), host)) << bytes << " bytes";
#if defined(APRON_DEVICE_CUDA)
    cudaPointerAttributes where{};
    ASSERT_EQ(cudaPointerGetAttributes(&where, host), cudaSuccess);
    EXPECT_EQ(where.type, cudaMemoryTypeHost) << bytes << " bytes: not page-locked";
#endif
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint32_t>(3 * i);
    detail::copy_to_device(host, n, raw(device));
    const std::vector<std::uint32_t> back = to_host(device);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 3 * i) << i;

    PinnedBuffer moved(std::move(buffer));
    EXPECT_EQ(moved.data(), reinterpret_cast<std::byte*>(host));
    EXPECT_EQ(buffer.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved from, by design
    const std::size_t size = moved.size();
    moved.reserve(size);  // no larger: kept
    EXPECT_EQ(moved.data(), reinterpret_cast<std::byte*>(host));
    moved.reserve(size + 1);
    ASSERT_GE(moved.size(), size + 1);
    std::memset(moved.data(), 0xab, moved.size());
  }
}

}  // namespace
}  // namespace apron
