// Forward-mode differentiation: a value with its derivatives along three directions (the x, y, z
// of one vertex). Running the per-vertex energy on positions of this type gives the exact
// gradient of the discrete energy (to round-off), the requirement for the internal
// forces, without deriving the fits, frames and normals by hand.
#pragma once

#include <cmath>

#include "kernels/common/hd.hpp"

namespace apron::cloth {

template <class T>
struct Dual3 {
  T v;
  T d[3];

  APRON_HD Dual3(T value = T(0)) : v(value), d{T(0), T(0), T(0)} {}  // a constant
  APRON_HD Dual3(T value, T d0, T d1, T d2) : v(value), d{d0, d1, d2} {}

  // Hidden friends: found by argument-dependent lookup and, not being templates, they let a
  // plain T convert on either side (2.0 * x).
  friend APRON_HD Dual3 operator+(Dual3 a, Dual3 b) {
    return {a.v + b.v, a.d[0] + b.d[0], a.d[1] + b.d[1], a.d[2] + b.d[2]};
  }
  friend APRON_HD Dual3 operator-(Dual3 a, Dual3 b) {
    return {a.v - b.v, a.d[0] - b.d[0], a.d[1] - b.d[1], a.d[2] - b.d[2]};
  }
  friend APRON_HD Dual3 operator-(Dual3 a) { return {-a.v, -a.d[0], -a.d[1], -a.d[2]}; }
  friend APRON_HD Dual3 operator*(Dual3 a, Dual3 b) {
    return {a.v * b.v, a.d[0] * b.v + a.v * b.d[0], a.d[1] * b.v + a.v * b.d[1],
            a.d[2] * b.v + a.v * b.d[2]};
  }
  friend APRON_HD Dual3 operator/(Dual3 a, Dual3 b) {
    const T q = a.v / b.v;
    return {q, (a.d[0] - q * b.d[0]) / b.v, (a.d[1] - q * b.d[1]) / b.v,
            (a.d[2] - q * b.d[2]) / b.v};
  }
  friend APRON_HD Dual3& operator+=(Dual3& a, Dual3 b) { return a = a + b; }
  friend APRON_HD bool operator<(Dual3 a, Dual3 b) { return a.v < b.v; }
  friend APRON_HD bool operator>(Dual3 a, Dual3 b) { return a.v > b.v; }
  friend APRON_HD Dual3 sqrt(Dual3 a) {
    using std::sqrt;
    const T s = sqrt(a.v), h = T(0.5) / s;
    return {s, h * a.d[0], h * a.d[1], h * a.d[2]};
  }
  friend APRON_HD Dual3 fabs(Dual3 a) { return a.v < T(0) ? -a : a; }
};

}  // namespace apron::cloth
