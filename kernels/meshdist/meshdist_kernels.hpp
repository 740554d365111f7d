// Device side of the mesh-to-mesh distance (Zhang, Tang, Wu 2011): area-uniform surface sampling
// from a counter-based RNG and the float64 statistics of the distances. The search itself is the
// surface-query service's triangle grid (kernels/surface).
// The mesh and per-sample arrays are DeviceSpans (parts of one DeviceArena in the analysis);
// the forms taking DeviceVectors size them and are there for tests and one-off callers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/common/device_arena.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/surface/triangle_grid.hpp"

namespace apron::meshdist {

using surface::TriangleSoup;  // a mesh as the surface service sees it

// Samples with global indices [first, first + count): index g < vertices.size() is vertex g; the
// others are area-uniform points on the surface, point g - vertices.size() of the sequence that
// `seed` determines. `cumulative_area` is the inclusive prefix sum of triangle areas (float64,
// computed once on the host so every rank sees the same bits). A sample depends only on its
// global index, so any split over ranks yields the same samples.
// `samples` holds them: count elements of a span, or a device vector resized to count.
void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  DeviceSpan<Vec4> samples);
void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  std::size_t count, DeviceVector<Vec4>& samples);

// Float64 sums and the maximum with the lowest global index attaining it.
struct DistanceStats {
  double sum = 0;
  double sum_squares = 0;
  float max = -1;
  std::uint64_t argmax = ~std::uint64_t(0);  // global sample index
};
DistanceStats reduce_distances(DeviceSpan<const float> distance, std::uint64_t first);

}  // namespace apron::meshdist
