// for_each_index with a floor on the blocks resident per SM: the compiler caps each thread's
// registers so that MinBlocks blocks of BlockThreads threads fit, spilling if it must. For a
// functor whose registers, not its memory traffic, limit how many warps hide its load latency
// (the cloth gradient's per-vertex adjoint: bench/NOTES.md). On the CPU the same as
// for_each_index.
#pragma once

#include <cstddef>

#include "kernels/common/backend.hpp"

namespace apron {

#if defined(APRON_BACKEND_KOKKOS)
template <int BlockThreads, int MinBlocks, class F>
void for_each_index_resident(std::size_t n, F f) {
  if (n == 0) return;
  ensure_kokkos();
  using Policy = Kokkos::RangePolicy<Kokkos::IndexType<std::size_t>,
                                     Kokkos::LaunchBounds<BlockThreads, MinBlocks>>;
  Kokkos::parallel_for("apron::for_each_index_resident", Policy(0, n), f);
}
#elif defined(__CUDACC__)
template <int BlockThreads, int MinBlocks, class F>
__global__ void __launch_bounds__(BlockThreads, MinBlocks)
    for_each_index_resident_kernel(std::size_t n, F f) {
  const std::size_t i = blockIdx.x * std::size_t{BlockThreads} + threadIdx.x;
  if (i < n) f(i);
}
template <int BlockThreads, int MinBlocks, class F>
void for_each_index_resident(std::size_t n, F f) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>((n + BlockThreads - 1) / BlockThreads);
  for_each_index_resident_kernel<BlockThreads, MinBlocks><<<blocks, BlockThreads>>>(n, f);
  check_launch("for_each_index_resident");
}
#else
template <int BlockThreads, int MinBlocks, class F>
void for_each_index_resident(std::size_t n, F f) {
  for_each_index<BlockThreads>(n, f);
}
#endif

}  // namespace apron
