// The device algorithms of kernels/common/algorithms.hpp for the kokkos backend (included from
// there, after the operations Plus, Maximum, Minimum): the same functions with the same
// contracts, through Kokkos::parallel_for, parallel_reduce, parallel_scan and deep_copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "kernels/common/backend.hpp"

namespace apron {

namespace detail {
template <class It>
struct IsDeviceIterator : std::false_type {};
template <class T>
struct IsDeviceIterator<DevicePointer<T>> : std::true_type {};

template <class T>
T* address(DevicePointer<T> it) {
  return it.get();
}
template <class It>
auto address(It it) {
  return std::to_address(it);
}

template <class T>
struct Sequence {
  T* out;
  T start;
  APRON_HD void operator()(std::size_t i) const { out[i] = static_cast<T>(start + i); }
};
template <class MapPtr, class SrcPtr, class OutPtr>
struct Gather {
  MapPtr map;
  SrcPtr src;
  OutPtr out;
  APRON_HD void operator()(std::size_t i) const { out[i] = src[map[i]]; }
};
template <class InPtr, class MapPtr, class OutPtr>
struct Scatter {
  InPtr in;
  MapPtr map;
  OutPtr out;
  APRON_HD void operator()(std::size_t i) const { out[map[i]] = in[i]; }
};
}  // namespace detail

template <class T>
DevicePointer<T> device_iterator(T* p) {
  return DevicePointer<T>(p);
}

// [first, last) to out, between any two of host and device; done on return.
template <class In, class Out>
Out copy_n(In first, std::size_t n, Out out) {
  constexpr bool from_device = detail::IsDeviceIterator<In>::value;
  constexpr bool to_device = detail::IsDeviceIterator<Out>::value;
  const auto* from = detail::address(first);
  auto* to = detail::address(out);
  if constexpr (from_device && to_device)
    detail::copy_on_device(from, n, to);
  else if constexpr (from_device)
    detail::copy_to_host(from, n, to);
  else if constexpr (to_device)
    detail::copy_to_device(from, n, to);
  else
    std::copy_n(first, n, out);
  return out + static_cast<std::ptrdiff_t>(n);
}
template <class In, class Out>
Out copy(In first, In last, Out out) {
  return copy_n(first, static_cast<std::size_t>(last - first), out);
}

template <class It, class T>
void fill(It first, It last, const T& value) {
  using V = typename std::iterator_traits<It>::value_type;
  for_each_index(static_cast<std::size_t>(last - first), FillWith<V>{first.get(), V(value)});
}
template <class It, class T = int>
void sequence(It first, It last, T start = 0) {
  using V = typename std::iterator_traits<It>::value_type;
  for_each_index(static_cast<std::size_t>(last - first),
                 detail::Sequence<V>{first.get(), static_cast<V>(start)});
}
template <class MapIt, class SrcIt, class OutIt>
void gather(MapIt map_first, MapIt map_last, SrcIt src, OutIt out) {
  const auto n = static_cast<std::size_t>(map_last - map_first);
  for_each_index(n, detail::Gather{map_first.get(), src.get(), out.get()});
}
template <class InIt, class MapIt, class OutIt>
void scatter(InIt first, InIt last, MapIt map, OutIt out) {
  const auto n = static_cast<std::size_t>(last - first);
  for_each_index(n, detail::Scatter{first.get(), map.get(), out.get()});
}

}  // namespace apron

// Reductions, scans and selection through Kokkos' parallel_reduce and parallel_scan, where Thrust
// does not run (kernels/common/algorithms.hpp takes Thrust's on Kokkos' Cuda space).
#if !APRON_THRUST_ALGORITHMS
namespace apron {

namespace detail {
// The identity of a reduction or scan operation for T (the empty range's result).
template <class T>
APRON_HD T identity_of(Plus) {
  return T{};
}
template <class T>
APRON_HD T identity_of(Maximum) {
  return std::numeric_limits<T>::lowest();
}
template <class T>
APRON_HD T identity_of(Minimum) {
  return std::numeric_limits<T>::max();
}

template <class T, class F, class Op>
struct TransformReduce {
  using value_type = T;
  F f;
  Op op;
  T identity;
  APRON_HD void operator()(std::size_t i, T& acc) const { acc = op(acc, f(i)); }
  APRON_HD void join(T& acc, const T& other) const { acc = op(acc, other); }
  APRON_HD void init(T& acc) const { acc = identity; }
};

template <class T, class F, class Op, bool kInclusive>
struct Scan {
  using value_type = T;
  F f;
  Op op;
  T identity, first;
  T* out;
  APRON_HD void operator()(std::size_t i, T& update, bool final) const {
    const T v = f(i);  // read before out[i] is written: in-place scans
    if (final && !kInclusive) out[i] = op(first, update);
    update = op(update, v);
    if (final && kInclusive) out[i] = update;
  }
  APRON_HD void join(T& update, const T& input) const { update = op(update, input); }
  APRON_HD void init(T& update) const { update = identity; }
};

// Writes emit(i, slot) for the i with keep(i), slot counting them; the count at the end.
template <class Keep, class Emit>
struct Select {
  using value_type = std::size_t;
  Keep keep;
  Emit emit;
  APRON_HD void operator()(std::size_t i, std::size_t& slot, bool final) const {
    if (!keep(i)) return;
    if (final) emit(i, slot);
    ++slot;
  }
};

template <class Keep, class Emit>
std::size_t select(std::size_t n, Keep keep, Emit emit) {
  if (n == 0) return 0;
  ensure_kokkos();
  std::size_t count = 0;
  Kokkos::parallel_scan("apron::select", Kokkos::RangePolicy<Kokkos::IndexType<std::size_t>>(0, n),
                        Select<Keep, Emit>{keep, emit}, count);
  return count;
}

template <class Pred>
struct IndexIf {
  Pred pred;
  APRON_HD bool operator()(std::size_t i) const { return pred(static_cast<std::uint32_t>(i)); }
};
struct WriteIndex {
  std::uint32_t* out;
  APRON_HD void operator()(std::size_t i, std::size_t slot) const {
    out[slot] = static_cast<std::uint32_t>(i);
  }
};
struct Flagged {
  const std::uint8_t* flags;
  APRON_HD bool operator()(std::size_t i) const { return flags[i] != 0; }
};
template <class T>
struct WriteValue {
  const T* values;
  T* out;
  APRON_HD void operator()(std::size_t i, std::size_t slot) const { out[slot] = values[i]; }
};

}  // namespace detail

template <class T, class F, class Op>
T transform_reduce(std::size_t n, F f, T init, Op op) {
  if (n == 0) return init;
  ensure_kokkos();
  T result = init;
  Kokkos::parallel_reduce("apron::transform_reduce",
                          Kokkos::RangePolicy<Kokkos::IndexType<std::size_t>>(0, n),
                          detail::TransformReduce<T, F, Op>{f, op, init}, result);
  return result;
}

template <class T, class F>
void exclusive_scan(std::size_t n, F f, T* out, T init = T{}) {
  if (n == 0) return;
  ensure_kokkos();
  Kokkos::parallel_scan("apron::exclusive_scan",
                        Kokkos::RangePolicy<Kokkos::IndexType<std::size_t>>(0, n),
                        detail::Scan<T, F, Plus, false>{f, Plus{}, T{}, init, out});
}
template <class T, class F, class Op = Plus>
void inclusive_scan(std::size_t n, F f, T* out, Op op = {}) {
  if (n == 0) return;
  ensure_kokkos();
  const T identity = detail::identity_of<T>(op);
  Kokkos::parallel_scan("apron::inclusive_scan",
                        Kokkos::RangePolicy<Kokkos::IndexType<std::size_t>>(0, n),
                        detail::Scan<T, F, Op, true>{f, op, identity, identity, out});
}

template <class Pred>
std::size_t copy_indices_if(std::size_t n, std::uint32_t* out, Pred pred) {
  return detail::select(n, detail::IndexIf<Pred>{pred}, detail::WriteIndex{out});
}

template <class T>
std::size_t copy_flagged(const T* values, const std::uint8_t* flags, std::size_t n, T* out) {
  return detail::select(n, detail::Flagged{flags}, detail::WriteValue<T>{values, out});
}

}  // namespace apron
#endif  // !APRON_THRUST_ALGORITHMS
