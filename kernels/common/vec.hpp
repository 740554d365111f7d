// Small vector types for device code. Positions and velocities are stored as 16-byte Vec4 so a
// neighbour's data arrives in one aligned load on the GPU; arithmetic uses the xyz part.
#pragma once

#include <cmath>

#include "kernels/common/backend.hpp"

namespace apron {

struct alignas(16) Vec4 {
  float x, y, z, w;
};

struct Vec3 {
  float x, y, z;
};

// Read-only loads through the GPU's non-coherent data cache (__ldg): the neighbour loops read
// each particle's data from many threads and never write it during the pass.
APRON_HD inline Vec4 load(const Vec4* p) {
#if defined(__CUDA_ARCH__)
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return {v.x, v.y, v.z, v.w};
#else
  return *p;
#endif
}
template <class T>
APRON_HD inline T load(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

APRON_HD inline Vec3 xyz(const Vec4& v) {
  return {v.x, v.y, v.z};
}
APRON_HD inline Vec4 with_w(const Vec3& v, float w) {
  return {v.x, v.y, v.z, w};
}
APRON_HD inline Vec3 operator+(Vec3 a, Vec3 b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z};
}
APRON_HD inline Vec3 operator-(Vec3 a, Vec3 b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
APRON_HD inline Vec3 operator*(float s, Vec3 a) {
  return {s * a.x, s * a.y, s * a.z};
}
APRON_HD inline Vec3& operator+=(Vec3& a, Vec3 b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  return a;
}
APRON_HD inline float dot(Vec3 a, Vec3 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
APRON_HD inline float norm2(Vec3 a) {
  return dot(a, a);
}
// Squared distance between the xyz parts of two points.
APRON_HD inline float distance2(const Vec4& a, const Vec4& b) {
  return norm2(xyz(a) - xyz(b));
}

// Axis-aligned box [lo, hi), in double so that subdomain edges computed on different ranks agree.
struct Box {
  double lo[3] = {0, 0, 0};
  double hi[3] = {0, 0, 0};

  APRON_HD bool contains(const Vec4& p) const {
    return p.x >= lo[0] && p.x < hi[0] && p.y >= lo[1] && p.y < hi[1] && p.z >= lo[2] &&
           p.z < hi[2];
  }
  APRON_HD Box expanded(double margin) const {
    Box b = *this;
    for (int d = 0; d < 3; ++d) {
      b.lo[d] -= margin;
      b.hi[d] += margin;
    }
    return b;
  }
  APRON_HD double extent(int d) const { return hi[d] - lo[d]; }
  APRON_HD double volume() const { return extent(0) * extent(1) * extent(2); }
  bool intersects(const Box& o) const {
    for (int d = 0; d < 3; ++d)
      if (hi[d] <= o.lo[d] || o.hi[d] <= lo[d]) return false;
    return true;
  }
};

}  // namespace apron
