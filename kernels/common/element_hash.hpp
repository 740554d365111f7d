// The checksum of apron's checkpoint datasets: the sum (mod 2^64) over rows of a 64-bit hash of
// the row's bytes and its global row index. A sum does not depend on how the rows are split over
// ranks or threads, so a checkpoint written by 4 ranks on GPUs verifies on 3 ranks on CPUs, and
// the index in the hash catches rows that moved as well as rows that changed.
#pragma once

#include <cstddef>
#include <cstdint>

#ifndef APRON_HD
#if defined(__CUDACC__)
#define APRON_HD __host__ __device__
#else
#define APRON_HD
#endif
#endif

namespace apron {

// splitmix64's finaliser: every input bit reaches every output bit.
APRON_HD inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Hash of one row of `size` bytes at global row `index` (bytes read one by one, so the result
// does not depend on alignment or on the host's word order).
APRON_HD inline std::uint64_t row_hash(const unsigned char* bytes, std::size_t size,
                                       std::uint64_t index) {
  std::uint64_t h = mix64(index + 0x9e3779b97f4a7c15ull);
  for (std::size_t k = 0; k < size; k += 8) {
    std::uint64_t word = 0;
    const std::size_t n = size - k < 8 ? size - k : 8;
    for (std::size_t b = 0; b < n; ++b) word |= static_cast<std::uint64_t>(bytes[k + b]) << (8 * b);
    h = mix64(h ^ word);
  }
  return h;
}

// Host version over `rows` rows of `row_bytes` bytes, the first having global index `first`.
inline std::uint64_t rows_checksum(const void* data, std::size_t row_bytes, std::size_t rows,
                                   std::uint64_t first) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::size_t i = 0; i < rows; ++i)
    sum += row_hash(bytes + i * row_bytes, row_bytes, first + i);
  return sum;
}

}  // namespace apron
