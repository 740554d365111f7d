#include "kernels/sph/sph_kernels.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"

namespace apron::sph {
namespace {

struct DensityKernel {
  Params params;
  FluidArrays fluid;
  BoundaryArrays wall;

  APRON_HD void operator()(std::size_t a) const {
    if (!is_owned(fluid.flags[a])) return;
    const Vec4 pa = fluid.pos[a];
    float fluid_sum = 0, wall_sum = 0;  // sums of kernel shapes; the norm is applied once
    const float support2 = params.kernel.support() * params.kernel.support();
    NeighbourRecordWriter record(fluid.record, a);
    for_each_candidate_recording(fluid.cells, pa, record, [&](std::uint32_t b) {
      const float r2 = distance2(pa, load(fluid.pos + b));
      fluid_sum += params.kernel.value_shape(r2);
      return r2 < support2;
    });
    if (params.ghost_boundary)
      wall.cells.for_each_candidate(pa, [&](std::uint32_t b) {
        wall_sum += params.kernel.value_shape(distance2(pa, load(wall.pos + b)));
      });
    const float rho = params.kernel.value_norm *
                      (params.fluid_mass * fluid_sum + params.boundary_mass * wall_sum);
    fluid.rho[a] = rho;
    fluid.pressure[a] = params.pressure(rho);
  }
};

// The continuity equation with density diffusion, rho_a += elapsed (d rho_a / dt) with
// d rho_a / dt = sum_b m_b v_ab . grad_a W_ab
// (the kernel gradient corrected as the pair forces' is, so that a uniform compression of the
// lattice changes the density at its true rate) plus delta h c0 sum_b 2 (rho_b - rho_a -
// rho^H_ba) r_ab^2 / (r_ab^2 + 0.01 h^2) F_ab m_b / rho_b over fluid neighbours, F_ab the kernel
// gradient's magnitude over r (the diffusion's sign: toward the neighbours' density). Boundary
// particles add their walls' velocity to the divergence but no diffusion.
struct ContinuityKernel {
  Params params;
  FluidArrays fluid;
  BoundaryArrays wall;
  float elapsed;

  APRON_HD void operator()(std::size_t a) const {
    if (!is_owned(fluid.flags[a])) return;
    const Vec4 pa = fluid.pos[a];
    const Vec4 va4 = fluid.vel[a];
    const Vec3 va = xyz(va4);
    const float rho_a = va4.w, h2 = params.kernel.h * params.kernel.h;
    float fluid_divergence = 0, wall_divergence = 0, diffusion = 0;
    const float support2 = params.kernel.support() * params.kernel.support();
    NeighbourRecordWriter record(fluid.record, a);
    for_each_candidate_recording(fluid.cells, pa, record, [&](std::uint32_t b) {
      const Vec4 pb = load(fluid.pos + b);
      const Vec4 vb = load(fluid.vel + b);
      const Vec3 r_ab = xyz(pa) - xyz(pb);
      const float r2 = norm2(r_ab);
      const float shape = params.kernel.gradient_shape(r2);
      fluid_divergence += dot(va - xyz(vb), r_ab) * shape;
      const float excess =
          vb.w - rho_a + params.hydrostatic_density_slope * dot(params.gravity, r_ab);
      diffusion += fast_divide(excess * r2 * shape, (r2 + 0.01f * h2) * vb.w);
      return r2 < support2;
    });
    if (params.ghost_boundary)
      wall.cells.for_each_candidate(pa, [&](std::uint32_t b) {
        const Vec4 pb = load(wall.pos + b);
        const Vec3 r_ab = xyz(pa) - xyz(pb);
        wall_divergence +=
            dot(va - wall.velocity.of(pb), r_ab) * params.kernel.gradient_shape(norm2(r_ab));
      });
    const float rate =
        -params.pair_scale(params.fluid_mass) * fluid_divergence -
        params.pair_scale(params.boundary_mass) * wall_divergence -
        2 * params.density_diffusion * params.kernel.gradient_norm * params.fluid_mass * diffusion;
    const float rho = rho_a + elapsed * rate;
    fluid.rho[a] = rho;
    fluid.pressure[a] = params.pressure(rho);
  }
};

// Monaghan (1992) artificial viscosity term Pi_ab (zero for receding pairs; branch-free).
APRON_HD inline float viscosity(float alpha, float h, float c, float rho_mean, Vec3 v_ab, Vec3 r_ab,
                                float r2) {
  const float vr = fminf(dot(v_ab, r_ab), 0.0f);
  // -alpha c mu / rho_mean with mu = h vr / (r^2 + 0.01 h^2), in one division.
  return fast_divide(-alpha * c * h * vr, (r2 + 0.01f * h * h) * rho_mean);
}

// The pair term of boundary particle b for fluid particle a, to be multiplied by r_ab and the
// constant Params::pair_scale(m_b): the pressure of a (pa_term = p_a / rho_a^2), of b (its own,
// averaged from the fluid, or else as seen from a: Params::wall_pressure), and the wall's viscosity
// on the velocity of a relative to the wall's there (v_ab), times the kernel gradient's shape.
APRON_HD inline float wall_pair_term(const Params& params, const BoundaryArrays& wall,
                                     std::uint32_t b, float p_a, float rho_a, float inv_rho_a2,
                                     float pa_term, Vec3 v_ab, Vec3 r_ab, float r2) {
  const float p_b = wall.pressure ? wall.pressure[b] : params.wall_pressure(p_a, rho_a, r_ab);
  const float pb_term = p_b * inv_rho_a2;
  const float pi_ab =
      viscosity(params.wall_alpha, params.kernel.h, params.sound_speed, rho_a, v_ab, r_ab, r2);
  return (pa_term + pb_term + pi_ab) * params.kernel.gradient_shape(r2);
}

// Monaghan (1994) boundary force, D ((r0/r)^12 - (r0/r)^4) r_ab / r^2 for r < r0: the wall
// model used when ghost boundary particles are switched off (for the comparison of the paper).
APRON_HD inline Vec3 wall_repulsion(const Params& params, const BoundaryArrays& wall,
                                    const Vec4& pa) {
  Vec3 acc{0, 0, 0};
  const float r0 = params.spacing;
  wall.cells.for_each_candidate(pa, [&](std::uint32_t b) {
    const Vec3 r_ab = xyz(pa) - xyz(load(wall.pos + b));
    const float r2 = norm2(r_ab);
    if (r2 >= r0 * r0 || r2 == 0) return;
    const float s2 = r0 * r0 / r2, s4 = s2 * s2;
    acc += (params.repulsion * (s4 * s4 * s4 - s4) / r2) * r_ab;
  });
  return acc;
}

// Laminar: with the laminar viscosity's term (Params::viscosity > 0); the pass without it is
// compiled apart, so that its registers and loop are what they were without the term.
template <bool Laminar>
struct AccelerationKernel {
  Params params;
  FluidArrays fluid;
  BoundaryArrays wall;

  APRON_HD void operator()(std::size_t a) const {
    if (!is_owned(fluid.flags[a])) return;
    const Vec4 pa = fluid.pos[a];
    const Vec4 va4 = fluid.vel[a];
    const Vec3 va = xyz(va4);
    const float rho_a = va4.w, pa_term = pa.w;
    const float h = params.kernel.h, c = params.sound_speed;
    const float support2 = params.kernel.support() * params.kernel.support();
    // Pair terms summed without the constant factors pair_scale(m_b), applied once at the end.
    Vec3 fluid_sum{0, 0, 0}, wall_sum{0, 0, 0};
    [[maybe_unused]] Vec3 laminar_sum{0, 0, 0};
    const auto near = [&](const Vec4* pos) {
      return [&, pos](std::uint32_t b) { return distance2(pa, load(pos + b)) < support2; };
    };
    // b == a passes the test and adds a multiple of r_ab = 0.
    const NeighbourRecordReader record(fluid.record, a);  // from the density pass
    for_each_recorded_neighbour(fluid.cells, pa, record, near(fluid.pos), [&](std::uint32_t b) {
      const Vec4 pb = load(fluid.pos + b);
      const Vec3 r_ab = xyz(pa) - xyz(pb);
      const float r2 = norm2(r_ab);
      const Vec4 vb = load(fluid.vel + b);
      const Vec3 v_ab = va - xyz(vb);
      const float pressure_term = pa_term + pb.w;
      const float pi_ab = viscosity(params.alpha, h, c, 0.5f * (rho_a + vb.w), v_ab, r_ab, r2);
      const float shape = params.kernel.gradient_shape(r2);
      fluid_sum += ((pressure_term + pi_ab) * shape) * r_ab;
      // Lo & Shao (2003): nu lap(v) = sum m_b 4 nu (r_ab . grad W) v_ab / ((rho_a + rho_b)
      // (r^2 + 0.01 h^2)); the factor 4 nu m_b and the gradient's constant come at the end.
      if constexpr (Laminar)
        laminar_sum += (shape * fast_divide(r2, (rho_a + vb.w) * (r2 + 0.01f * h * h))) * v_ab;
    });
    const float fluid_scale = params.pair_scale(params.fluid_mass);
    // fluid_scale = -m_b K where grad W_ab = K shape r_ab: times it, this is the laminar term.
    if constexpr (Laminar) fluid_sum += (-4 * params.viscosity) * laminar_sum;
    // Boundary particles take the fluid particle's density, their own pressure (the fluid's
    // around them plus the hydrostatic head, Adami et al. 2012: compute_wall_pressure) or else
    // the fluid particle's extrapolated to them, p_b = p_a + rho_a g.(x_b - x_a), and their
    // wall's velocity (a moving solid's drags the fluid). Without the hydrostatic head a wall
    // would carry no pressure gradient and the fluid beside it would sag.
    if (!params.ghost_boundary) {
      const Vec3 acc = params.gravity + fluid_scale * fluid_sum + wall_repulsion(params, wall, pa);
      fluid.acc[a] = with_w(acc, 0);
      return;
    }
    const float p_a = fluid.pressure[a], inv_rho_a2 = fast_divide(1.0f, rho_a * rho_a);
    wall.cells.for_each_neighbour(pa, near(wall.pos), [&](std::uint32_t b) {
      const Vec4 pb = load(wall.pos + b);
      const Vec3 r_ab = xyz(pa) - xyz(pb), v_ab = va - wall.velocity.of(pb);
      const float r2 = norm2(r_ab);
      wall_sum +=
          wall_pair_term(params, wall, b, p_a, rho_a, inv_rho_a2, pa_term, v_ab, r_ab, r2) * r_ab;
    });
    const float wall_scale = params.pair_scale(params.boundary_mass);
    const Vec3 acc = params.gravity + fluid_scale * fluid_sum + wall_scale * wall_sum;
    fluid.acc[a] = with_w(acc, 0);
  }
};

struct WallPressureKernel {
  Params params;
  FluidArrays fluid;
  BoundaryArrays wall;
  float* out;
  APRON_HD void operator()(std::size_t w) const {
    const Vec4 pw = wall.pos[w];
    const Vec3 body_force = params.gravity - wall.velocity.acceleration_of(pw);
    float weight = 0, pressure = 0, head = 0;
    fluid.cells.for_each_candidate(pw, [&](std::uint32_t f) {
      const Vec4 pf = load(fluid.pos + f);
      const Vec3 r_wf = xyz(pw) - xyz(pf);
      const float wt = params.kernel.value_shape(norm2(r_wf));
      weight += wt;
      pressure += fluid.pressure[f] * wt;
      head += fluid.rho[f] * dot(body_force, r_wf) * wt;
    });
    const float p = weight > 0 ? (pressure + head) / weight : 0;
    out[w] = params.clamp_negative_pressure && p < 0 ? 0 : p;
  }
};

struct PlaceMovingWall {
  const Vec4* rest;
  WallPoses poses;
  Vec4* out;
  APRON_HD void operator()(std::size_t i) const {
    const Vec4 r = rest[i];
    const float* m = poses.pose[static_cast<int>(r.w) - 1];
    const float d[3] = {r.x - m[9], r.y - m[10], r.z - m[11]};
    float x[3];
    for (int k = 0; k < 3; ++k)
      x[k] = m[3 * k] * d[0] + m[3 * k + 1] * d[1] + m[3 * k + 2] * d[2] + m[9 + k] + m[12 + k];
    out[i] = {x[0], x[1], x[2], r.w};
  }
};

struct InsideBox {
  const Vec4* points;
  Box box;
  APRON_HD bool operator()(std::uint32_t i) const { return box.contains(points[i]); }
};

struct CombineWallForces {
  APRON_HD WallForces operator()(const WallForces& a, const WallForces& b) const {
    WallForces out;
    for (int k = 0; k < kMaxMovingWalls; ++k)
      for (int d = 0; d < 3; ++d) out.force[k][d] = a.force[k][d] + b.force[k][d];
    return out;
  }
};

// The wall pair terms of AccelerationKernel for one particle, per moving wall.
struct ForceOnMovingWalls {
  Params params;
  FluidArrays fluid;
  BoundaryArrays wall;
  APRON_HD WallForces operator()(std::size_t a) const {
    WallForces out{};
    if (!is_owned(fluid.flags[a])) return out;
    const Vec4 pa = fluid.pos[a];
    const Vec3 va = xyz(fluid.vel[a]);
    const float rho_a = fluid.rho[a], p_a = fluid.pressure[a];
    const float inv_rho_a2 = 1.0f / (rho_a * rho_a), pa_term = p_a * inv_rho_a2;
    const float support2 = params.kernel.support() * params.kernel.support();
    // -(mass of a) x (the wall part of its acceleration): the force on the wall.
    const float scale = -params.fluid_mass * params.pair_scale(params.boundary_mass);
    wall.cells.for_each_candidate(pa, [&](std::uint32_t b) {
      const Vec4 pb = load(wall.pos + b);
      const Vec3 r_ab = xyz(pa) - xyz(pb);
      const float r2 = norm2(r_ab);
      if (pb.w < 0.5f || r2 >= support2) return;
      const Vec3 v_ab = va - wall.velocity.of(pb);
      const float s =
          scale * wall_pair_term(params, wall, b, p_a, rho_a, inv_rho_a2, pa_term, v_ab, r_ab, r2);
      double* f = out.force[static_cast<int>(pb.w) - 1];
      f[0] += s * r_ab.x;
      f[1] += s * r_ab.y;
      f[2] += s * r_ab.z;
    });
    return out;
  }
};

struct StagePairTerms {
  Vec4* pos;
  Vec4* vel;
  const float* rho;
  const float* pressure;
  APRON_HD void operator()(std::size_t i) const {
    pos[i].w = pressure[i] / (rho[i] * rho[i]);
    vel[i].w = rho[i];
  }
};

// Whether x lies within the walls, faces included, compared in float as the clamp of
// IntegrateKernel places particles: a particle stopped at a face is inside.
APRON_HD bool inside_walls(const Box& walls, const Vec3& x) {
  const float* xs = &x.x;
  for (int d = 0; d < 3; ++d)
    if (xs[d] < static_cast<float>(walls.lo[d]) || xs[d] > static_cast<float>(walls.hi[d]))
      return false;
  return true;
}

struct IntegrateKernel {
  Vec4* pos;
  Vec4* vel;
  const Vec4* acc;
  const std::uint8_t* flags;
  float dt;
  bool carries_density;
  bool clamp;
  Box container;

  APRON_HD void operator()(std::size_t i) const {
    if (!is_owned(flags[i])) return;
    Vec3 v = xyz(vel[i]) + dt * xyz(acc[i]);
    Vec3 x = xyz(pos[i]) + dt * v;
    if (clamp) {  // inelastic wall: stop at the face, drop the normal velocity
      float* xs = &x.x;
      float* vs = &v.x;
      for (int d = 0; d < 3; ++d) {
        const float lo = static_cast<float>(container.lo[d]);
        const float hi = static_cast<float>(container.hi[d]);
        if (xs[d] < lo) xs[d] = lo, vs[d] = vs[d] < 0 ? 0 : vs[d];
        if (xs[d] > hi) xs[d] = hi, vs[d] = vs[d] > 0 ? 0 : vs[d];
      }
    }
    vel[i] = with_w(v, carries_density ? vel[i].w : 0);
    pos[i] = with_w(x, 0);
  }
};

struct ExtremesOf {
  const Vec4* vel;
  const Vec4* acc;
  const std::uint8_t* flags;
  APRON_HD Extremes operator()(std::size_t i) const {
    if (!is_owned(flags[i])) return {};
    return {sqrtf(norm2(xyz(vel[i]))), sqrtf(norm2(xyz(acc[i])))};
  }
};

struct MaxExtremes {
  APRON_HD Extremes operator()(const Extremes& a, const Extremes& b) const {
    return {a.max_speed > b.max_speed ? a.max_speed : b.max_speed,
            a.max_acceleration > b.max_acceleration ? a.max_acceleration : b.max_acceleration};
  }
};

struct TotalsOf {
  Params params;
  const Vec4* pos;
  const Vec4* vel;
  const std::uint8_t* flags;
  Box container;
  APRON_HD Totals operator()(std::size_t i) const {
    Totals t;
    if (!is_owned(flags[i])) return t;
    const Vec3 x = xyz(pos[i]);
    const double m = params.fluid_mass;
    const double v2 = norm2(xyz(vel[i]));
    t.count = 1;
    t.kinetic = 0.5 * m * v2;
    t.potential = -m * dot(params.gravity, x);
    t.max_speed = sqrt(v2);
    t.front_x = x.x;
    t.outside = inside_walls(container, x) ? 0 : 1;
    return t;
  }
};

struct SumTotals {
  APRON_HD Totals operator()(const Totals& a, const Totals& b) const {
    Totals t;
    t.count = a.count + b.count;
    t.kinetic = a.kinetic + b.kinetic;
    t.potential = a.potential + b.potential;
    t.max_speed = a.max_speed > b.max_speed ? a.max_speed : b.max_speed;
    t.front_x = a.front_x > b.front_x ? a.front_x : b.front_x;
    t.outside = a.outside + b.outside;
    return t;
  }
};

}  // namespace

void compute_density(const Params& params, const FluidArrays& fluid, const BoundaryArrays& wall,
                     float elapsed) {
  if (params.continuity_density)
    for_each_index(fluid.n, ContinuityKernel{params, fluid, wall, elapsed});
  else
    for_each_index(fluid.n, DensityKernel{params, fluid, wall});
}

void stage_pair_terms(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel,
                      const DeviceVector<float>& rho, const DeviceVector<float>& pressure,
                      std::size_t n) {
  for_each_index(n, StagePairTerms{raw(pos), raw(vel), raw(rho), raw(pressure)});
}

void compute_acceleration(const Params& params, const FluidArrays& fluid,
                          const BoundaryArrays& wall) {
  if (params.viscosity > 0)
    for_each_index(fluid.n, AccelerationKernel<true>{params, fluid, wall});
  else
    for_each_index(fluid.n, AccelerationKernel<false>{params, fluid, wall});
}

void integrate(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel, const DeviceVector<Vec4>& acc,
               const DeviceVector<std::uint8_t>& flags, float dt, bool carries_density,
               const Box* container) {
  IntegrateKernel k{
      raw(pos), raw(vel), raw(acc), raw(flags), dt, carries_density, container != nullptr, {}};
  if (container) k.container = *container;
  for_each_index(pos.size(), k);
}

void compute_wall_pressure(const Params& params, const FluidArrays& fluid,
                           const BoundaryArrays& wall, DeviceVector<float>& out) {
  out.resize(wall.n);
  for_each_index(wall.n, WallPressureKernel{params, fluid, wall, raw(out)});
}

void place_moving_walls(const DeviceVector<Vec4>& rest, const WallPoses& poses,
                        DeviceVector<Vec4>& out) {
  out.resize(rest.size());
  for_each_index(rest.size(), PlaceMovingWall{raw(rest), poses, raw(out)});
}

void append_inside(const DeviceVector<Vec4>& points, const Box& box, DeviceVector<Vec4>& out) {
  DeviceVector<std::uint32_t> picked;
  const std::size_t count = select_indices_if(points.size(), InsideBox{raw(points), box}, picked);
  const std::size_t first = out.size();
  out.resize(first + count);
  apron::gather(picked.begin(), picked.begin() + count, points.begin(), out.begin() + first);
}

WallForces moving_wall_forces(const Params& params, const FluidArrays& fluid,
                              const BoundaryArrays& wall) {
  return transform_reduce(fluid.n, ForceOnMovingWalls{params, fluid, wall}, WallForces{},
                          CombineWallForces{});
}

Extremes owned_extremes(const DeviceVector<Vec4>& vel, const DeviceVector<Vec4>& acc,
                        const DeviceVector<std::uint8_t>& flags) {
  return transform_reduce(vel.size(), ExtremesOf{raw(vel), raw(acc), raw(flags)}, Extremes{},
                          MaxExtremes{});
}

Totals owned_totals(const Params& params, const DeviceVector<Vec4>& pos,
                    const DeviceVector<Vec4>& vel, const DeviceVector<std::uint8_t>& flags,
                    const Box& container) {
  return transform_reduce(pos.size(), TotalsOf{params, raw(pos), raw(vel), raw(flags), container},
                          Totals{}, SumTotals{});
}

namespace {
constexpr float kNoHeight = -__builtin_huge_valf();  // no particle near the gauge

struct HeightNear {
  const Vec4* pos;
  const std::uint8_t* flags;
  float x, y, radius2;
  APRON_HD float operator()(std::size_t i) const {
    const float dx = pos[i].x - x, dy = pos[i].y - y;
    const bool near = is_owned(flags[i]) && dx * dx + dy * dy <= radius2;
    return near ? pos[i].z : kNoHeight;
  }
};
}  // namespace

float highest_near(const DeviceVector<Vec4>& pos, const DeviceVector<std::uint8_t>& flags, float x,
                   float y, float radius) {
  return transform_reduce(pos.size(), HeightNear{raw(pos), raw(flags), x, y, radius * radius},
                          kNoHeight, Maximum{});
}

}  // namespace apron::sph
