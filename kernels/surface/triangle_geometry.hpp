// Exact point-triangle distance with the closest point, by Voronoi regions of the triangle
// (Ericson, Real-Time Collision Detection, 5.1.5): the closest point lies in the region of a
// vertex, of an edge, or in the face. Everything is computed relative to corner a, so the
// result keeps float32's relative precision of the *distance*, not of the coordinates.
#pragma once

#include "kernels/common/vec.hpp"

namespace apron::surface {

APRON_HD inline Vec3 closest_offset_on_segment(Vec3 ap, Vec3 ab) {
  const float len2 = dot(ab, ab);
  float t = len2 > 0 ? dot(ap, ab) / len2 : 0.0f;
  t = t < 0 ? 0.0f : (t > 1 ? 1.0f : t);
  return t * ab;
}

// Which part of a triangle (a, b, c) holds a closest point: a corner, an edge (edge e joins corner
// e to corner (e + 1) % 3) or the face. Signed distances take the pseudonormal of this feature.
enum TriangleFeature : int {
  kVertexA = 0,
  kVertexB = 1,
  kVertexC = 2,
  kEdgeAB = 3,
  kEdgeBC = 4,
  kEdgeCA = 5,
  kFace = 6
};
APRON_HD inline bool is_vertex(int feature) {
  return feature < kEdgeAB;
}
APRON_HD inline bool is_edge(int feature) {
  return feature >= kEdgeAB && feature < kFace;
}

// Closest point of triangle (a, a+ab, a+ac) to a+ap, returned as an offset from a, and the
// feature it lies on. Callers that need the distance only ignore `feature`; inlined, its stores
// vanish.
APRON_HD inline Vec3 closest_offset_on_triangle(Vec3 ap, Vec3 ab, Vec3 ac, int& feature) {
  const float d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) {
    feature = kVertexA;
    return Vec3{0, 0, 0};
  }
  const Vec3 bp = ap - ab;
  const float d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) {
    feature = kVertexB;
    return ab;
  }
  const float vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    feature = kEdgeAB;
    return (d1 / (d1 - d3)) * ab;
  }
  const Vec3 cp = ap - ac;
  const float d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) {
    feature = kVertexC;
    return ac;
  }
  const float vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    feature = kEdgeCA;
    return (d2 / (d2 - d6)) * ac;
  }
  const float va = d3 * d6 - d5 * d4;
  if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0) {
    const float w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    feature = kEdgeBC;
    return ab + w * (ac - ab);
  }
  const float sum = va + vb + vc;
  if (!(sum > 0)) {  // a sliver too thin for float32: the nearest of its edges
    const Vec3 on_ab = closest_offset_on_segment(ap, ab);
    const Vec3 on_ca = closest_offset_on_segment(ap, ac);
    const Vec3 on_bc = ab + closest_offset_on_segment(bp, ac - ab);
    Vec3 best = on_ab;
    feature = kEdgeAB;
    if (norm2(on_ca - ap) < norm2(best - ap)) {
      best = on_ca;
      feature = kEdgeCA;
    }
    if (norm2(on_bc - ap) < norm2(best - ap)) {
      best = on_bc;
      feature = kEdgeBC;
    }
    return best;
  }
  feature = kFace;
  return (vb / sum) * ab + (vc / sum) * ac;
}
APRON_HD inline Vec3 closest_offset_on_triangle(Vec3 ap, Vec3 ab, Vec3 ac) {
  int unused;
  return closest_offset_on_triangle(ap, ab, ac, unused);
}

// Squared distance from p to triangle (a, b, c).
APRON_HD inline float distance2_to_triangle(Vec3 p, Vec3 a, Vec3 b, Vec3 c) {
  const Vec3 ap = p - a;
  return norm2(closest_offset_on_triangle(ap, b - a, c - a) - ap);
}

APRON_HD inline Vec3 closest_point_on_triangle(Vec3 p, Vec3 a, Vec3 b, Vec3 c) {
  return a + closest_offset_on_triangle(p - a, b - a, c - a);
}

// Where the ray o + s d crosses triangle (a, b, c): s, or -1 when it misses (Moeller & Trumbore
// 1997; a ray in the triangle's plane misses).
APRON_HD inline float ray_triangle(Vec3 o, Vec3 d, Vec3 a, Vec3 b, Vec3 c) {
  const Vec3 e1 = b - a, e2 = c - a;
  const Vec3 pv = cross(d, e2);
  const float det = dot(e1, pv);
  if (det == 0) return -1;
  const float inv = 1.0f / det;
  const Vec3 tv = o - a;
  const float u = dot(tv, pv) * inv;
  if (u < 0 || u > 1) return -1;
  const Vec3 qv = cross(tv, e1);
  const float v = dot(d, qv) * inv;
  if (v < 0 || u + v > 1) return -1;
  const float s = dot(e2, qv) * inv;
  return s >= 0 ? s : -1;
}

// The nearest triangle so far. Ties go to the lower triangle index, so the answer does not depend
// on the order in which triangles are visited (grid search and brute force agree bitwise).
struct Nearest {
  float d2;
  int triangle;
  APRON_HD void offer(float candidate_d2, int candidate) {
    if (candidate_d2 < d2 || (candidate_d2 == d2 && candidate < triangle)) {
      d2 = candidate_d2;
      triangle = candidate;
    }
  }
};

}  // namespace apron::surface
