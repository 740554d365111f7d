#include "kernels/sph/mesh_walls.hpp"

#include "kernels/common/algorithms.hpp"
#include "kernels/sph/sph_kernels.hpp"

namespace apron::sph {
namespace {

// Where p lies against the wall within sqrt(radius2), seen from the fluid: its distance toward the
// fluid (negative behind the wall), the wall's nearest point and the unit normal toward the fluid.
// `near` is false where nothing of the wall lies that close or the nearest part is an open edge.
struct WallContact {
  bool near;
  float depth;
  Vec3 point, normal;
};

APRON_HD inline WallContact contact(const MeshWall& wall, Vec3 p, float radius2) {
  const surface::SurfaceHit hit = wall.surface.closest(p, radius2);
  if (hit.triangle < 0 || wall.surface.on_open_edge(hit)) return {false, 0, p, p};
  return {true, wall.fluid_side * hit.point.w, xyz(hit.point), wall.fluid_side * xyz(hit.normal)};
}

APRON_HD inline bool behind(const MeshWall& wall, Vec3 p, float radius2) {
  const WallContact c = contact(wall, p, radius2);
  return c.near && c.depth < 0;
}

struct KeepOff {
  MeshWall wall;
  Vec4* pos;
  Vec4* vel;
  const std::uint8_t* flags;
  float reach2, gap;
  APRON_HD void operator()(std::size_t i) const {
    if (!is_owned(flags[i])) return;
    const WallContact c = contact(wall, xyz(pos[i]), reach2);
    if (!c.near || c.depth >= 0) return;
    pos[i] = with_w(c.point + gap * c.normal, pos[i].w);
    const Vec3 v = xyz(vel[i]);
    const float into = dot(v, c.normal);
    if (into < 0) vel[i] = with_w(v - into * c.normal, vel[i].w);
  }
};

struct BehindWall {
  MeshWall wall;
  const Vec4* pos;
  const std::uint8_t* flags;
  APRON_HD std::size_t operator()(std::size_t i) const {
    return is_owned(flags[i]) && behind(wall, xyz(pos[i]), surface::kInfinity) ? 1 : 0;
  }
};

struct WallBand {
  MeshWall wall;
  const Vec4* points;
  float thickness;
  std::uint8_t* mark;
  APRON_HD void operator()(std::size_t i) const {
    mark[i] = behind(wall, xyz(points[i]), 1.0001f * thickness * thickness) ? 1 : 0;
  }
};

struct ClearanceFromWall {
  MeshWall wall;
  const Vec4* points;
  float clearance;
  std::uint8_t* mark;
  APRON_HD void operator()(std::size_t i) const {
    const Vec3 p = xyz(points[i]);
    // Near the wall the distance decides; farther, the side alone (from its cell, if known).
    surface::SurfaceHit hit = wall.surface.closest(p, clearance * clearance);
    if (hit.triangle < 0) {
      const std::uint8_t side = wall.surface.side_without_search(p);
      if (side) {
        const float sign = side == surface::SurfaceView::kInside ? -1.0f : 1.0f;
        if (wall.fluid_side * sign < 0) mark[i] = 0;
        return;
      }
      hit = wall.surface.closest(p, surface::kInfinity);
    }
    if (wall.fluid_side * hit.point.w < clearance) mark[i] = 0;
  }
};

}  // namespace

void mark_wall_band(const DeviceVector<Vec4>& points, const MeshWall& wall, float thickness,
                    DeviceVector<std::uint8_t>& mark) {
  mark.resize(points.size());
  for_each_index(points.size(), WallBand{wall, raw(points), thickness, raw(mark)});
}

void clear_unless_fluid_side(const DeviceVector<Vec4>& points, const MeshWall& wall,
                             float clearance, DeviceVector<std::uint8_t>& mark) {
  for_each_index(points.size(), ClearanceFromWall{wall, raw(points), clearance, raw(mark)});
}

void keep_off_wall(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel,
                   const DeviceVector<std::uint8_t>& flags, const MeshWall& wall, float reach,
                   float gap) {
  for_each_index(pos.size(), KeepOff{wall, raw(pos), raw(vel), raw(flags), reach * reach, gap});
}

std::size_t count_behind_wall(const DeviceVector<Vec4>& pos,
                              const DeviceVector<std::uint8_t>& flags, const MeshWall& wall) {
  return transform_reduce(pos.size(), BehindWall{wall, raw(pos), raw(flags)}, std::size_t{0},
                          Plus{});
}

}  // namespace apron::sph
