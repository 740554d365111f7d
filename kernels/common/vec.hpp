// Small vector types for device code. Positions and velocities are stored as 16-byte Vec4 so a
// neighbour's data arrives in one aligned load on the GPU; arithmetic uses the xyz part.
#pragma once

#include <cmath>

#include "kernels/common/backend.hpp"
#include "kernels/common/box.hpp"

namespace apron {

struct alignas(16) Vec4 {
  float x, y, z, w;
};

struct Vec3 {
  float x, y, z;
};

// Three components of any scalar: float64 vertex positions of a mesh workload, or values that
// carry derivatives (the cloth's forward-mode gradient).
template <class T>
struct Vector3 {
  T x, y, z;
};

template <class T>
APRON_HD inline Vector3<T> operator+(Vector3<T> a, Vector3<T> b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z};
}
template <class T>
APRON_HD inline Vector3<T> operator-(Vector3<T> a, Vector3<T> b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
template <class T>
APRON_HD inline Vector3<T> operator*(T s, Vector3<T> a) {
  return {s * a.x, s * a.y, s * a.z};
}
template <class T>
APRON_HD inline Vector3<T>& operator+=(Vector3<T>& a, Vector3<T> b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  return a;
}

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
APRON_HD inline Vec3 cross(Vec3 a, Vec3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
// a / |a|, or zero for a zero vector.
APRON_HD inline Vec3 normalized(Vec3 a) {
  const float n2 = norm2(a);
  return n2 > 0 ? (1.0f / sqrtf(n2)) * a : Vec3{0, 0, 0};
}
APRON_HD inline float distance2(const Vec4& a, const Vec4& b) {
  return norm2(xyz(a) - xyz(b));
}

}  // namespace apron
