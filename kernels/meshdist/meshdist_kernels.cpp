#include "kernels/meshdist/meshdist_kernels.hpp"

#include "kernels/common/algorithms.hpp"

namespace apron::meshdist {
namespace {

// Counter-based random numbers (SplitMix64's mixer): value j of sample k depends only on
// (seed, k, j), whatever thread or rank computes it.
APRON_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
APRON_HD inline std::uint64_t random_bits(std::uint64_t seed, std::uint64_t k, unsigned j) {
  return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (2 * k + j));
}

struct MakeSamples {
  const Vec4* vertices;
  std::uint64_t vertex_count;
  const Vec4* corners;
  const double* cumulative_area;
  std::size_t triangles;
  std::uint64_t seed, first;
  Vec4* out;

  // The first triangle whose cumulative area exceeds `target`.
  APRON_HD std::size_t pick_triangle(double target) const {
    std::size_t lo = 0, hi = triangles - 1;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (cumulative_area[mid] > target)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }

  APRON_HD void operator()(std::size_t i) const {
    const std::uint64_t g = first + i;
    if (g < vertex_count) {
      out[i] = vertices[g];
      return;
    }
    const std::uint64_t k = g - vertex_count;
    const double u = static_cast<double>(random_bits(seed, k, 0) >> 11) * 0x1.0p-53;
    const std::size_t t = pick_triangle(u * cumulative_area[triangles - 1]);
    const std::uint64_t bits = random_bits(seed, k, 1);
    const float u2 = static_cast<float>(bits >> 40) * 0x1.0p-24f;
    const float u3 = static_cast<float>((bits >> 8) & 0xffffffu) * 0x1.0p-24f;
    // Uniform on the triangle: a + s(1 - u3) ab + s u3 ac with s = sqrt(u2).
    const float s = sqrtf(u2);
    const Vec3 a = xyz(corners[3 * t]), b = xyz(corners[3 * t + 1]), c = xyz(corners[3 * t + 2]);
    out[i] = with_w(a + (s * (1 - u3)) * (b - a) + (s * u3) * (c - a), 0);
  }
};

struct StatsOfSample {
  const float* distance;
  std::uint64_t first;
  APRON_HD DistanceStats operator()(std::size_t i) const {
    const double d = distance[i];
    return {d, d * d, distance[i], first + i};
  }
};

struct CombineStats {
  APRON_HD DistanceStats operator()(const DistanceStats& a, const DistanceStats& b) const {
    DistanceStats out{a.sum + b.sum, a.sum_squares + b.sum_squares, a.max, a.argmax};
    if (b.max > a.max || (b.max == a.max && b.argmax < a.argmax)) {
      out.max = b.max;
      out.argmax = b.argmax;
    }
    return out;
  }
};

}  // namespace

void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  DeviceSpan<Vec4> samples) {
  for_each_index(samples.size(),
                 MakeSamples{vertices.data(), vertices.size(), mesh.corners.data(),
                             cumulative_area.data(), mesh.size(), seed, first, samples.data()});
}

void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  std::size_t count, DeviceVector<Vec4>& samples) {
  samples.resize(count);
  make_samples(vertices, mesh, cumulative_area, seed, first,
               DeviceSpan<Vec4>(raw(samples), samples.size()));
}

DistanceStats reduce_distances(DeviceSpan<const float> distance, std::uint64_t first) {
  return transform_reduce(distance.size(), StatsOfSample{distance.data(), first}, DistanceStats{},
                          CombineStats{});
}

}  // namespace apron::meshdist
