// Global reductions over a communicator, each one MPI_Allreduce: float64 sums, maxima and minima,
// an argmax with a deterministic lowest-index tie-break, and int64 sums. Workloads use these
// instead of raw MPI calls, so that every diagnostic is reduced the same way on 1 or N ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>

namespace apron {

double global_sum(MPI_Comm comm, double value);
double global_max(MPI_Comm comm, double value);
double global_min(MPI_Comm comm, double value);
std::int64_t global_sum(MPI_Comm comm, std::int64_t value);

// Element-wise over ranks, in place, one call for the whole span.
void global_sum(MPI_Comm comm, std::span<double> values);
void global_max(MPI_Comm comm, std::span<double> values);
void global_min(MPI_Comm comm, std::span<double> values);
void global_sum(MPI_Comm comm, std::span<std::int64_t> values);
// Bitwise or of flag arrays (which bricks some rank needs).
void global_or(MPI_Comm comm, std::span<std::uint8_t> flags);

// The largest value over all ranks and where it is: among equal values (and on every rank alike)
// the lowest global index wins, then the lowest rank. A rank with nothing to offer passes
// value = -infinity (or NaN-free data only: NaN never wins). index is the caller's global index
// (e.g. a particle id); rank is filled in.
struct ArgMax {
  double value;
  std::int64_t index;
  int rank;
};
ArgMax global_argmax(MPI_Comm comm, double value, std::int64_t index);
// Element-wise over ranks for several quantities at once (values[i] with indices[i]).
void global_argmax(MPI_Comm comm, std::span<const double> values,
                   std::span<const std::int64_t> indices, std::span<ArgMax> result);

}  // namespace apron
