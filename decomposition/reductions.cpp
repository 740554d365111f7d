#include "decomposition/reductions.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace apron {
namespace {

int count_of(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("global reduction: too many values for one MPI call");
  return static_cast<int>(n);
}

// The argmax element as MPI sees it: plain doubles/int64s/ints in one struct.
struct ArgMaxItem {
  double value;
  std::int64_t index;
  int rank;
};

bool better(const ArgMaxItem& a, const ArgMaxItem& b) {
  if (std::isnan(b.value))
    return !std::isnan(a.value) || a.index < b.index || (a.index == b.index && a.rank < b.rank);
  if (std::isnan(a.value)) return false;
  if (a.value != b.value) return a.value > b.value;
  if (a.index != b.index) return a.index < b.index;
  return a.rank < b.rank;
}

// Commutative and associative: a total order (value desc, index asc, rank asc), NaN last.
void argmax_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<ArgMaxItem*>(in);
  auto* b = static_cast<ArgMaxItem*>(inout);
  for (int i = 0; i < *len; ++i)
    if (better(a[i], b[i])) b[i] = a[i];
}

struct ArgMaxMpi {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};

// Created on first use, kept until MPI_Finalize (which frees them).
const ArgMaxMpi& argmax_mpi() {
  static ArgMaxMpi mpi;
  static std::once_flag once;
  std::call_once(once, [] {
    const int lengths[3] = {1, 1, 1};
    const MPI_Aint displs[3] = {offsetof(ArgMaxItem, value), offsetof(ArgMaxItem, index),
                                offsetof(ArgMaxItem, rank)};
    const MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT64_T, MPI_INT};
    MPI_Datatype packed;
    MPI_Type_create_struct(3, lengths, displs, types, &packed);
    MPI_Type_create_resized(packed, 0, sizeof(ArgMaxItem), &mpi.type);
    MPI_Type_free(&packed);
    MPI_Type_commit(&mpi.type);
    MPI_Op_create(&argmax_op, 1, &mpi.op);
  });
  return mpi;
}

template <class T>
T reduce_one(MPI_Comm comm, T value, MPI_Datatype type, MPI_Op op) {
  T result{};
  MPI_Allreduce(&value, &result, 1, type, op, comm);
  return result;
}

}  // namespace

double global_sum(MPI_Comm comm, double value) {
  return reduce_one(comm, value, MPI_DOUBLE, MPI_SUM);
}
double global_max(MPI_Comm comm, double value) {
  return reduce_one(comm, value, MPI_DOUBLE, MPI_MAX);
}
double global_min(MPI_Comm comm, double value) {
  return reduce_one(comm, value, MPI_DOUBLE, MPI_MIN);
}
std::int64_t global_sum(MPI_Comm comm, std::int64_t value) {
  return reduce_one(comm, value, MPI_INT64_T, MPI_SUM);
}

void global_sum(MPI_Comm comm, std::span<double> values) {
  MPI_Allreduce(MPI_IN_PLACE, values.data(), count_of(values.size()), MPI_DOUBLE, MPI_SUM, comm);
}
void global_max(MPI_Comm comm, std::span<double> values) {
  MPI_Allreduce(MPI_IN_PLACE, values.data(), count_of(values.size()), MPI_DOUBLE, MPI_MAX, comm);
}
void global_min(MPI_Comm comm, std::span<double> values) {
  MPI_Allreduce(MPI_IN_PLACE, values.data(), count_of(values.size()), MPI_DOUBLE, MPI_MIN, comm);
}
void global_sum(MPI_Comm comm, std::span<std::int64_t> values) {
  MPI_Allreduce(MPI_IN_PLACE, values.data(), count_of(values.size()), MPI_INT64_T, MPI_SUM, comm);
}
void global_or(MPI_Comm comm, std::span<std::uint8_t> flags) {
  MPI_Allreduce(MPI_IN_PLACE, flags.data(), count_of(flags.size()), MPI_UINT8_T, MPI_BOR, comm);
}

void global_argmax(MPI_Comm comm, std::span<const double> values,
                   std::span<const std::int64_t> indices, std::span<ArgMax> result) {
  if (values.size() != indices.size() || values.size() != result.size())
    throw std::invalid_argument("global_argmax: values, indices and result differ in length");
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<ArgMaxItem> items(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) items[i] = {values[i], indices[i], rank};
  const auto& mpi = argmax_mpi();
  MPI_Allreduce(MPI_IN_PLACE, items.data(), count_of(items.size()), mpi.type, mpi.op, comm);
  for (std::size_t i = 0; i < items.size(); ++i)
    result[i] = {items[i].value, items[i].index, items[i].rank};
}

ArgMax global_argmax(MPI_Comm comm, double value, std::int64_t index) {
  ArgMax result{};
  global_argmax(comm, std::span<const double>(&value, 1), std::span<const std::int64_t>(&index, 1),
                std::span<ArgMax>(&result, 1));
  return result;
}

}  // namespace apron
