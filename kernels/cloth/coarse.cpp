#include "kernels/cloth/coarse.hpp"

#include <atomic>
#include <cmath>

#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

struct LargestComponent {
  const V3* y;
  APRON_HD double operator()(std::size_t i) const {
    const double x = std::fabs(y[i].x), u = std::fabs(y[i].y), z = std::fabs(y[i].z);
    return x > u ? (x > z ? x : z) : (u > z ? u : z);
  }
};

// An integer add that concurrent threads may make to one sum; integers add associatively, so
// the result is the same whatever order the threads' adds land in.
APRON_HD inline void add_fixed(std::int64_t* at, std::int64_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(v));
#else
  std::atomic_ref<std::int64_t>(*at).fetch_add(v, std::memory_order_relaxed);
#endif
}

struct RestrictFixed {
  const std::uint32_t *offsets, *node;
  const double* weight;
  const V3* y;
  double scale;
  std::int64_t* sums;
  APRON_HD void operator()(std::size_t i) const {
    for (std::uint32_t e = offsets[i]; e < offsets[i + 1]; ++e) {
      const std::size_t n = 3 * static_cast<std::size_t>(node[e]);
      const double h = weight[e] * scale;  // as restrict_to_coarse rounds them
      add_fixed(sums + n, std::llround(h * y[i].x));
      add_fixed(sums + n + 1, std::llround(h * y[i].y));
      add_fixed(sums + n + 2, std::llround(h * y[i].z));
    }
  }
};

struct ProlongRows {
  const std::uint32_t *offsets, *node;
  const double* weight;
  const double* c;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    V3 s{0, 0, 0};
    for (std::uint32_t e = offsets[i]; e < offsets[i + 1]; ++e) {
      const std::size_t n = 3 * static_cast<std::size_t>(node[e]);
      const double h = weight[e];
      s = s + V3{h * c[n], h * c[n + 1], h * c[n + 2]};
    }
    out[i] = s;
  }
};

}  // namespace

double largest_component(const Vectors& y, std::size_t count) {
  return transform_reduce(count, LargestComponent{raw(y)}, 0.0, Maximum{});
}

void restrict_fixed(const CoarseCorners& corners, const Vectors& y, std::size_t count, double scale,
                    DeviceVector<std::int64_t>& sums) {
  apron::fill(sums.begin(), sums.end(), std::int64_t{0});
  for_each_index(count, RestrictFixed{raw(corners.offsets), raw(corners.node), raw(corners.weight),
                                      raw(y), scale, raw(sums)});
}

void prolong_rows(const CoarseCorners& corners, const DeviceVector<double>& c, std::size_t count,
                  Vectors& out) {
  for_each_index(count, ProlongRows{raw(corners.offsets), raw(corners.node), raw(corners.weight),
                                    raw(c), raw(out)});
}

}  // namespace apron::cloth
