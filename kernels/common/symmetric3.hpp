// Symmetric 3x3 matrices and their eigen-decomposition, on the host and the device (the plane
// detector's covariances, the cloth's implicit preconditioner blocks).
#pragma once

#include <cmath>

#include "kernels/common/hd.hpp"

namespace apron {

// Symmetric 3x3 as xx xy xz yy yz zz.
struct Sym3 {
  double m[6] = {0, 0, 0, 0, 0, 0};
  APRON_HD double at(int i, int j) const {
    const int lo = i < j ? i : j, hi = i < j ? j : i;
    constexpr int kIndex[3][3] = {{0, 1, 2}, {1, 3, 4}, {2, 4, 5}};
    return m[kIndex[lo][hi]];
  }
};

// Eigenvalues ascending, eigenvectors as the columns vec[.][k] (unit length, right-handed).
struct Eigen3 {
  double value[3];
  double vec[3][3];
};

// Cyclic Jacobi rotations: converges to double precision in a few sweeps for 3x3, and stays
// accurate for the nearly singular covariances of thin planar clusters, where the closed form
// (trigonometric) solution loses the small eigenvalue to cancellation.
APRON_HD inline Eigen3 eigen_symmetric(const Sym3& s) {
  double a[3][3], v[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) a[i][j] = s.at(i, j);
  for (int sweep = 0; sweep < 32; ++sweep) {
    const double off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
    const double diag = a[0][0] * a[0][0] + a[1][1] * a[1][1] + a[2][2] * a[2][2];
    if (off <= 1e-30 * diag || off == 0) break;
    for (int p = 0; p < 2; ++p)
      for (int q = p + 1; q < 3; ++q) {
        if (a[p][q] == 0) continue;
        const double theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        const double t =
            (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), sn = t * c;
        for (int k = 0; k < 3; ++k) {  // A <- A J (columns p, q)
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - sn * akq;
          a[k][q] = sn * akp + c * akq;
        }
        for (int k = 0; k < 3; ++k) {  // A <- J^T A (rows p, q)
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - sn * aqk;
          a[q][k] = sn * apk + c * aqk;
        }
        for (int k = 0; k < 3; ++k) {
          const double vkp = v[k][p], vkq = v[k][q];
          v[k][p] = c * vkp - sn * vkq;
          v[k][q] = sn * vkp + c * vkq;
        }
      }
  }
  int order[3] = {0, 1, 2};  // ascending eigenvalues
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      if (a[order[j]][order[j]] < a[order[i]][order[i]]) {
        const int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  Eigen3 e;
  for (int k = 0; k < 3; ++k) {
    e.value[k] = a[order[k]][order[k]];
    for (int d = 0; d < 3; ++d) e.vec[d][k] = v[d][order[k]];
  }
  return e;
}

}  // namespace apron
