// Small fixed-size algebra for the cloth kernels, templated on the scalar so that the same
// per-vertex code runs in float (the simulation) and float64 (tests, gradient checks).
// Vector3 and its +, -, scaling and += are kernels/common/vec.hpp's (mesh vertex fields travel
// through the ParticleStore); the rest is here.
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/common/hd.hpp"
#include "kernels/common/vec.hpp"

namespace apron::cloth {

template <class T>
struct Vector2 {
  T x, y;
};

// A symmetric 2x2 tensor (metric, curvature, strain): components 11, 12 (= 21) and 22.
template <class T>
struct Sym2 {
  T xx, xy, yy;
};

template <class T>
APRON_HD inline T dot(Vector3<T> a, Vector3<T> b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
template <class T>
APRON_HD inline Vector3<T> cross(Vector3<T> a, Vector3<T> b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
template <class T>
APRON_HD inline bool is_finite(Vector3<T> a) {
  using std::isfinite;
  return isfinite(a.x) && isfinite(a.y) && isfinite(a.z);
}
template <class T>
APRON_HD inline T norm(Vector3<T> a) {
  using std::sqrt;  // the float overload for T = float, on host and device
  return sqrt(dot(a, a));
}
// x / y, the same bits as the division for a finite, nonzero y; a zero x skips it (0 * y is the
// same signed zero). nvcc's IEEE division leaves its short path for a zero (or subnormal)
// quotient and calls a general routine of ~70 instructions, which the flat and resting rings of a
// cloth (zero misfits, zero off-diagonal metrics, zero curvature right-hand sides) take all the
// time: a fifth of the per-vertex adjoint's instructions (bench/NOTES.md). Any other type (the
// dual numbers of the forward-mode oracle): the plain division.
template <class T>
APRON_HD inline T quotient(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    return x == T(0) ? x * y : x / y;
  else
    return x / y;
}
// a / |a|, or zero for a zero vector (a degenerate ring must not poison its neighbours with NaN).
template <class T>
APRON_HD inline Vector3<T> normalized(Vector3<T> a) {
  const T length = norm(a);
  return length > T(0) ? (T(1) / length) * a : Vector3<T>{0, 0, 0};
}
// The part of a normal to the unit vector n.
template <class T>
APRON_HD inline Vector3<T> tangential(Vector3<T> a, Vector3<T> n) {
  return a - dot(a, n) * n;
}

// Conversions between precisions (a no-op where From = To).
template <class To, class From>
APRON_HD inline Vector3<To> vector_cast(Vector3<From> a) {
  return {To(a.x), To(a.y), To(a.z)};
}
template <class To, class From>
APRON_HD inline Sym2<To> sym2_cast(Sym2<From> s) {
  return {To(s.xx), To(s.xy), To(s.yy)};
}

template <class T>
APRON_HD inline T trace(Sym2<T> s) {
  return s.xx + s.yy;
}
template <class T>
APRON_HD inline T determinant(Sym2<T> s) {
  return s.xx * s.yy - s.xy * s.xy;
}
template <class T>
APRON_HD inline Sym2<T> operator-(Sym2<T> a, Sym2<T> b) {
  return {a.xx - b.xx, a.xy - b.xy, a.yy - b.yy};
}
template <class T>
APRON_HD inline Sym2<T> operator*(T s, Sym2<T> a) {
  return {s * a.xx, s * a.xy, s * a.yy};
}
// tr(A^-1 s): the trace of s measured in the metric A (a frame-independent invariant).
template <class T>
APRON_HD inline T trace_in_metric(Sym2<T> s, Sym2<T> metric) {
  return (metric.yy * s.xx - T(2) * metric.xy * s.xy + metric.xx * s.yy) / determinant(metric);
}

// Symmetric 3x3 system M u = r stored as its upper triangle (m00 m01 m02 m11 m12 m22). Solved
// by Cramer's rule: the systems are tiny, well scaled by the caller, and this keeps the kernel
// free of branches. Returns false (u untouched) when M is singular relative to its scale.
template <class T>
struct Sym3System {
  T m00 = 0, m01 = 0, m02 = 0, m11 = 0, m12 = 0, m22 = 0;
  T r0 = 0, r1 = 0, r2 = 0;

  // Adds the equation row . u = rhs to the least-squares normal equations.
  APRON_HD void add_row(T c0, T c1, T c2, T rhs) {
    m00 += c0 * c0;
    m01 += c0 * c1;
    m02 += c0 * c2;
    m11 += c1 * c1;
    m12 += c1 * c2;
    m22 += c2 * c2;
    r0 += c0 * rhs;
    r1 += c1 * rhs;
    r2 += c2 * rhs;
  }

  APRON_HD bool solve(T u[3]) const {
    using std::fabs;
    const T c00 = m11 * m22 - m12 * m12, c01 = m02 * m12 - m01 * m22, c02 = m01 * m12 - m02 * m11;
    const T det = m00 * c00 + m01 * c01 + m02 * c02;
    const T scale = m00 + m11 + m22;
    if (!(fabs(det) > T(1e-6) * scale * scale * scale)) return false;
    const T c11 = m00 * m22 - m02 * m02, c12 = m01 * m02 - m00 * m12, c22 = m00 * m11 - m01 * m01;
    u[0] = quotient(c00 * r0 + c01 * r1 + c02 * r2, det);
    u[1] = quotient(c01 * r0 + c11 * r1 + c12 * r2, det);
    u[2] = quotient(c02 * r0 + c12 * r1 + c22 * r2, det);
    return true;
  }
};

}  // namespace apron::cloth
