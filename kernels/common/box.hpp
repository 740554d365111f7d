// Axis-aligned box, without Thrust: decomposition, I/O and config code use it on the host.
#pragma once

#include "kernels/common/hd.hpp"

namespace apron {

// Axis-aligned box [lo, hi), in double so that subdomain edges computed on different ranks agree.
struct Box {
  double lo[3] = {0, 0, 0};
  double hi[3] = {0, 0, 0};

  // P: anything with float or double members x, y, z (Vec4, Vec3).
  template <class P>
  APRON_HD bool contains(const P& p) const {
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
