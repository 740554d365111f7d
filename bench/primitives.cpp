// Device primitives (kernels/common/primitives.hpp): radix sort of 10M (uint32 key, uint32 value)
// pairs with 16- and 32-bit limits, beside thrust::sort_by_key (what the cell list used before),
// and an exclusive scan of 10M uint32. Google Benchmark; bench_primitives --benchmark_filter=...
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include <thrust/copy.h>
#include <thrust/sort.h>

#include "kernels/common/primitives.hpp"

namespace {

constexpr std::size_t kPairs = 10'000'000;

std::vector<std::uint32_t> random_keys(int bits) {
  std::mt19937 rng(1);
  std::vector<std::uint32_t> keys(kPairs);
  const std::uint32_t mask = bits == 32 ? ~0u : (1u << bits) - 1;
  for (auto& k : keys) k = rng() & mask;
  return keys;
}

void sort_pairs_limited(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const std::vector<std::uint32_t> host = random_keys(bits);
  apron::DeviceVector<std::uint32_t> keys(kPairs), values(kPairs), keys_alt, values_alt;
  for (auto _ : state) {
    state.PauseTiming();
    apron::copy(host.begin(), host.end(), keys.begin());
    apron::device_synchronize();
    state.ResumeTiming();
    apron::sort_pairs(keys, values, kPairs, bits, keys_alt, values_alt);
    apron::device_synchronize();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPairs));
}
BENCHMARK(sort_pairs_limited)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

void thrust_sort_by_key(benchmark::State& state) {
  const std::vector<std::uint32_t> host = random_keys(static_cast<int>(state.range(0)));
  apron::DeviceVector<std::uint32_t> keys(kPairs), values(kPairs);
  for (auto _ : state) {
    state.PauseTiming();
    apron::copy(host.begin(), host.end(), keys.begin());
    apron::device_synchronize();
    state.ResumeTiming();
    thrust::sort_by_key(apron::policy(), keys.begin(), keys.end(), values.begin());
    apron::device_synchronize();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPairs));
}
BENCHMARK(thrust_sort_by_key)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

void exclusive_scan_10m(benchmark::State& state) {
  const apron::DeviceVector<std::uint32_t> in(kPairs, 3u);
  apron::DeviceVector<std::uint32_t> out(kPairs);
  for (auto _ : state) {
    apron::exclusive_scan(in, kPairs, out);
    apron::device_synchronize();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPairs));
}
BENCHMARK(exclusive_scan_10m)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
