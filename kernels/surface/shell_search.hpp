// The nearest-triangle search of the surface grid (the shell search of Zhang, Tang, Wu 2011),
// inline so that every query kernel of the service (meshdist's distances, closest points, signed
// distances) runs the same search.
#pragma once

#include "kernels/surface/triangle_geometry.hpp"
#include "kernels/surface/triangle_grid.hpp"

namespace apron::surface {

inline constexpr float kInfinity = __builtin_huge_valf();
inline constexpr int kNoTriangle = 0x7fffffff;

APRON_HD inline void offer_triangle(const Vec4* corners, int t, Vec3 p, Nearest& best) {
  const Vec4 a = load(corners + 3 * t), b = load(corners + 3 * t + 1),
             c = load(corners + 3 * t + 2);
  best.offer(distance2_to_triangle(p, xyz(a), xyz(b), xyz(c)), t);
}

APRON_HD inline float squared(float x) {
  return x * x;
}
APRON_HD inline int magnitude(int x) {
  return x < 0 ? -x : x;
}

// The paper's search (its Fig. 2): the cells at Chebyshev distance r from the sample's cell form
// shell r; after each shell, stop once everything not yet searched is farther than the nearest
// triangle found.
struct ShellSearch {
  GridGeometry g;
  const Vec4* corners;
  const std::uint32_t* cell_start;     // the pairs of cell c: [cell_start[c], cell_start[c+1])
  const std::uint32_t* pair_triangle;  // by cell

  APRON_HD void visit(Vec3 p, int i, int j, int k, Nearest& best) const {
    const std::uint32_t cell = g.linear(i, j, k);
    const std::uint32_t stop = cell_start[cell + 1];
    for (std::uint32_t n = cell_start[cell]; n < stop; ++n)
      offer_triangle(corners, static_cast<int>(load(pair_triangle + n)), p, best);
  }

  // Squared distance from p to the slab of the grid beyond face `side` of the searched box
  // [lo, hi] along `axis` (with the margin toward p, so it never overestimates).
  APRON_HD float slab_distance2(Vec3 p, int axis, bool upper, const int lo[3],
                                const int hi[3]) const {
    const float q[3] = {p.x, p.y, p.z};
    float d2 = 0;
    for (int d = 0; d < 3; ++d) {
      float box_lo = g.origin[d] - g.margin, box_hi = g.origin[d] + g.dims[d] * g.cell + g.margin;
      if (d == axis) {
        if (upper)
          box_lo = g.origin[d] + (hi[d] + 1) * g.cell - g.margin;
        else
          box_hi = g.origin[d] + lo[d] * g.cell + g.margin;
      }
      if (q[d] < box_lo) d2 += squared(box_lo - q[d]);
      if (q[d] > box_hi) d2 += squared(q[d] - box_hi);
    }
    return d2;
  }

  // Lower bound on the squared distance to any triangle outside the searched box; negative when
  // the box covers the whole grid.
  APRON_HD float unsearched_distance2(Vec3 p, const int lo[3], const int hi[3]) const {
    float bound = -1;
    for (int d = 0; d < 3; ++d) {
      if (lo[d] > 0) {
        const float s = slab_distance2(p, d, false, lo, hi);
        bound = bound < 0 || s < bound ? s : bound;
      }
      if (hi[d] < g.dims[d] - 1) {
        const float s = slab_distance2(p, d, true, lo, hi);
        bound = bound < 0 || s < bound ? s : bound;
      }
    }
    return bound;
  }

  APRON_HD void visit_shell(Vec3 p, const int c[3], int r, const int lo[3], const int hi[3],
                            Nearest& best) const {
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j) {
        const bool inner_row = magnitude(k - c[2]) < r && magnitude(j - c[1]) < r;
        if (!inner_row) {
          for (int i = lo[0]; i <= hi[0]; ++i) visit(p, i, j, k, best);
          continue;
        }
        if (c[0] - r >= 0) visit(p, c[0] - r, j, k, best);  // only the two ends of inner rows
        if (c[0] + r < g.dims[0]) visit(p, c[0] + r, j, k, best);
      }
  }

  APRON_HD Nearest operator()(Vec3 p) const { return within(p, {kInfinity, kNoTriangle}); }

  // The nearest triangle closer than `best` when that radius spans a few cells at most: every
  // cell the sphere's bounding box touches holds every triangle that can be that close, so no
  // shells and no bounds (a particle within a spacing of a wall, every step: 1-8 cells).
  APRON_HD Nearest within_box(Vec3 p, Nearest best) const {
    const float r = sqrtf(best.d2) + g.margin;
    const float q[3] = {p.x, p.y, p.z};
    int lo[3], hi[3];
    for (int d = 0; d < 3; ++d) {
      lo[d] = g.coord(q[d] - r, d);
      hi[d] = g.coord(q[d] + r, d);
    }
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j)
        for (int i = lo[0]; i <= hi[0]; ++i) visit(p, i, j, k, best);
    return best;
  }

  // The nearest triangle closer than `best` (which the search starts from: {r^2, kNoTriangle}
  // finds only triangles within r, and stops as soon as nothing nearer can be left).
  APRON_HD Nearest within(Vec3 p, Nearest best) const {
    const int c[3] = {g.coord(p.x, 0), g.coord(p.y, 1), g.coord(p.z, 2)};
    for (int r = 0;; ++r) {
      int lo[3], hi[3];
      for (int d = 0; d < 3; ++d) {
        lo[d] = c[d] - r < 0 ? 0 : c[d] - r;
        hi[d] = c[d] + r >= g.dims[d] ? g.dims[d] - 1 : c[d] + r;
      }
      visit_shell(p, c, r, lo, hi, best);
      const float bound = unsearched_distance2(p, lo, hi);
      if (bound < 0 || bound > best.d2) return best;
    }
  }
};

inline ShellSearch shell_search(const TriangleGrid& grid, const TriangleSoup& mesh) {
  return {grid.geometry(), mesh.corners.data(), grid.cell_start(), grid.cell_triangles()};
}

}  // namespace apron::surface
