// The FLIP wall friction kernel against Coulomb's law worked by hand: in one brick on the tank's
// floor, water sliding along x over the floor loses mu g dt per step in the voxel row touching
// the floor, nothing above it, nothing on the side walls that carry no load, and stops rather
// than reverse when the loss exceeds its speed.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/flip/flip_kernels.hpp"

namespace apron::flip {
namespace {

constexpr int kB = 4;
constexpr float kG = 9.81f, kDt = 0.01f, kMu = 0.3f;

struct OneBrick {
  BrickGrid grid;
  DeviceVector<int> origin{std::vector<int>{0, 0, 0}};
  DeviceVector<Vec4> vel, vel_old;
  SlotGeometry geometry() const { return {grid, raw(origin), SolidVoxels{}, 1}; }
  OneBrick(float u_x, float w_floor) {
    grid.b = kB;
    for (int d = 0; d < 3; ++d) grid.voxels[d] = kB, grid.bricks[d] = 1;
    std::vector<Vec4> u(grid.stored_per_brick(), Vec4{u_x, 0, 0, 0});
    std::vector<Vec4> old(grid.stored_per_brick(), Vec4{u_x, 0, 0, 0});
    // What P2G left on the floor's faces (z = 0, the lower z-face of row k = 0), before gravity.
    for (int j = -1; j <= kB; ++j)
      for (int i = -1; i <= kB; ++i) old[grid.row(0, i, j, 0)].z = w_floor;
    vel = DeviceVector<Vec4>(u.begin(), u.end());
    vel_old = DeviceVector<Vec4>(old.begin(), old.end());
  }
  std::vector<Vec4> run() {
    GridFields f{};
    f.vel = raw(vel);
    f.vel_old = raw(vel_old);
    wall_friction(geometry(), f, Vec3{0, 0, -kG}, kDt, kMu);
    std::vector<Vec4> out(vel.size());
    apron::copy(vel.begin(), vel.end(), out.begin());
    return out;
  }
};

TEST(WallFriction, FloorTakesMuGDtFromTheRowOnIt) {
  OneBrick b(1.0f, 0.0f);  // at rest vertically: the floor stops gravity's g dt
  const auto u = b.run();
  for (int k = 0; k < kB; ++k)
    for (int j = 0; j < kB; ++j)
      for (int i = 1; i < kB; ++i) {  // x-faces between two fluid voxels
        const float expected = k == 0 ? 1.0f - kMu * kG * kDt : 1.0f;
        EXPECT_NEAR(u[b.grid.row(0, i, j, k)].x, expected, 1e-6f) << i << " " << j << " " << k;
      }
}

TEST(WallFriction, LoadIncludesWhatTheParticlesBroughtIntoTheFloor) {
  OneBrick b(1.0f, -0.5f);  // falling onto the floor at 0.5 m/s: it stops 0.5 + g dt
  const auto u = b.run();
  EXPECT_NEAR(u[b.grid.row(0, 2, 2, 0)].x, 1.0f - kMu * (0.5f + kG * kDt), 1e-6f);
}

TEST(WallFriction, NoLoadNoFrictionAndNoReversal) {
  OneBrick rising(1.0f, 2.0f);  // leaving the floor faster than gravity pulls: no load
  EXPECT_NEAR(rising.run()[rising.grid.row(0, 2, 2, 0)].x, 1.0f, 1e-6f);
  OneBrick slow(0.01f, 0.0f);  // slower than mu g dt: stops
  EXPECT_EQ(slow.run()[slow.grid.row(0, 2, 2, 0)].x, 0.0f);
}

}  // namespace
}  // namespace apron::flip
