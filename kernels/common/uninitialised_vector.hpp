// Host arrays whose new elements of trivial types are left unset on resize, so that a large array
// is first touched by the threads that fill it (in parallel, on their own memory nodes) instead of
// being zeroed by one thread first: for 20M points that zeroing alone took 0.1-0.2 s.
#pragma once

#include <new>
#include <utility>
#include <vector>

namespace apron {

template <class T>
struct UninitialisedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using UninitialisedVector = std::vector<T, UninitialisedAllocator<T>>;

}  // namespace apron
