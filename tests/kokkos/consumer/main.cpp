// Smoke test of a Kokkos install: initialises Kokkos, sums 0..n-1 on the default execution space
// and checks the result against n(n-1)/2. Exit status 0 only when the sum is right.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>

int main(int argc, char* argv[]) {
  Kokkos::ScopeGuard guard(argc, argv);
  using Space = Kokkos::DefaultExecutionSpace;
  // Large enough that every thread gets work, small enough that the sum fits int64 exactly.
  const std::int64_t n = 10'000'000;
  std::int64_t sum = 0;
  Kokkos::parallel_reduce(
      "apron_kokkos_smoke", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(0, n),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t& partial) { partial += i; }, sum);
  const std::int64_t expected = n * (n - 1) / 2;
  std::printf("Kokkos %d.%d.%d, execution space %s (concurrency %d): sum 0..%lld = %lld\n",
              KOKKOS_VERSION_MAJOR, KOKKOS_VERSION_MINOR, KOKKOS_VERSION_PATCH, Space::name(),
              Space().concurrency(), static_cast<long long>(n - 1), static_cast<long long>(sum));
  if (sum != expected) {
    std::fprintf(stderr, "wrong sum: expected %lld\n", static_cast<long long>(expected));
    return 1;
  }
  return 0;
}
