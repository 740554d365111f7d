// Sustained device memory bandwidth: a 16-byte-per-element copy (read + write), the roofline
// reference for bench/NOTES.md. Prints GB/s, median of 10 runs after a warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/vec.hpp"

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{1} << 27);
  apron::DeviceVector<apron::Vec4> a(n, apron::Vec4{1, 2, 3, 4}), b(n);
  std::vector<double> seconds;
  for (int run = 0; run < 11; ++run) {
    apron::device_synchronize();
    const auto start = std::chrono::steady_clock::now();
    apron::copy(a.begin(), a.end(), b.begin());
    apron::device_synchronize();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  seconds.erase(seconds.begin());  // warm-up
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf("%s copy of %zu x 16 B: %.1f GB/s (read + write, median of %zu)\n",
              apron::backend_name(), n, 2.0 * 16 * n / median / 1e9, seconds.size());
  return 0;
}
