// Cloth's mesh colliders against the analytic ones: a box mesh at a rotated and moved pose gives
// the analytic box's depth and normal wherever the nearest feature is a face (to float round-off),
// an icosphere the sphere's within its faces' sagitta, and a vertex met by a moving collider
// leaves with the collider's normal velocity and no velocity into it.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cloth/implicit.hpp"
#include "kernels/cloth/mesh_colliders.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;
constexpr double kPi = 3.14159265358979323846;

surface::HostSurface box_mesh(V3 lo, V3 hi) {
  surface::HostSurface m;
  for (int i = 0; i < 8; ++i)
    m.vertices.push_back({i & 1 ? hi.x : lo.x, i & 2 ? hi.y : lo.y, i & 4 ? hi.z : lo.z});
  m.triangles = {{0, 2, 3}, {0, 3, 1}, {0, 1, 5}, {0, 5, 4}, {2, 6, 7}, {2, 7, 3},
                 {0, 4, 6}, {0, 6, 2}, {1, 3, 7}, {1, 7, 5}, {4, 5, 7}, {4, 7, 6}};
  return m;
}

// The unit icosphere subdivided `levels` times, scaled by `radius` (outward normals).
surface::HostSurface icosphere(int levels, double radius) {
  const double t = (1 + std::sqrt(5.0)) / 2;
  std::vector<std::array<double, 3>> v = {{-1, t, 0}, {1, t, 0}, {-1, -t, 0}, {1, -t, 0},
                                          {0, -1, t}, {0, 1, t}, {0, -1, -t}, {0, 1, -t},
                                          {t, 0, -1}, {t, 0, 1}, {-t, 0, -1}, {-t, 0, 1}};
  std::vector<std::array<std::uint32_t, 3>> f = {
      {0, 11, 5},  {0, 5, 1},  {0, 1, 7},  {0, 7, 10}, {0, 10, 11}, {1, 5, 9}, {5, 11, 4},
      {11, 10, 2}, {10, 7, 6}, {7, 1, 8},  {3, 9, 4},  {3, 4, 2},   {3, 2, 6}, {3, 6, 8},
      {3, 8, 9},   {4, 9, 5},  {2, 4, 11}, {6, 2, 10}, {8, 6, 7},   {9, 8, 1}};
  const auto unit = [](std::array<double, 3> p) {
    const double n = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    return std::array<double, 3>{p[0] / n, p[1] / n, p[2] / n};
  };
  for (auto& p : v) p = unit(p);
  for (int level = 0; level < levels; ++level) {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> middle;
    const auto mid = [&](std::uint32_t a, std::uint32_t b) {
      const auto key = std::minmax(a, b);
      auto [it, added] = middle.try_emplace(key, static_cast<std::uint32_t>(v.size()));
      if (added) v.push_back(unit({v[a][0] + v[b][0], v[a][1] + v[b][1], v[a][2] + v[b][2]}));
      return it->second;
    };
    std::vector<std::array<std::uint32_t, 3>> finer;
    for (const auto& [a, b, c] : f) {
      const std::uint32_t ab = mid(a, b), bc = mid(b, c), ca = mid(c, a);
      finer.insert(finer.end(), {{a, ab, ca}, {b, bc, ab}, {c, ca, bc}, {ab, bc, ca}});
    }
    f = std::move(finer);
  }
  surface::HostSurface m;
  for (const auto& p : v) m.vertices.push_back({radius * p[0], radius * p[1], radius * p[2]});
  m.triangles = f;
  return m;
}

// 35 degrees about a skew axis through `pivot`, then moved by `translation`.
BodyPose skew_pose(V3 pivot, V3 translation) {
  const V3 axis = normalized(V3{1, 2, 3});
  const double c = std::cos(35 * kPi / 180), s = std::sin(35 * kPi / 180), k = 1 - c;
  const double x = axis.x, y = axis.y, z = axis.z;
  BodyPose p;
  const double r[9] = {k * x * x + c,     k * x * y - s * z, k * x * z + s * y,
                       k * x * y + s * z, k * y * y + c,     k * y * z - s * x,
                       k * x * z - s * y, k * y * z + s * x, k * z * z + c};
  std::copy(r, r + 9, p.rotation);
  p.pivot[0] = pivot.x, p.pivot[1] = pivot.y, p.pivot[2] = pivot.z;
  p.translation[0] = translation.x, p.translation[1] = translation.y,
  p.translation[2] = translation.z;
  return p;
}

// Each point's whole contact, on the device (the view's arrays live there).
struct ContactsKernel {
  surface::SurfaceView view;
  BodyPose pose;
  const V3* points;
  double thickness;
  MeshContact* out;
  APRON_HD void operator()(std::size_t i) const {
    out[i] = mesh_contact(view, pose, points[i], thickness);
  }
};

std::vector<MeshContact> contacts(const surface::SurfaceQuery& q, const BodyPose& pose,
                                  const std::vector<V3>& points, double thickness) {
  DeviceVector<V3> on_device;
  to_device(points, on_device);
  DeviceVector<MeshContact> found(points.size());
  for_each_index(points.size(),
                 ContactsKernel{q.view(), pose, raw(on_device), thickness, raw(found)});
  const std::vector<MeshContact> out = to_host(found, points.size());
  // The colliders' own depth pass agrees with it.
  DeviceVector<double> depth;
  mesh_contact_depths(q.view(), pose, thickness, on_device, depth);
  const std::vector<double> depths = to_host(depth, points.size());
  for (std::size_t i = 0; i < points.size(); ++i)
    EXPECT_EQ(out[i].contact.depth, depths[i]) << "the two device paths disagree at point " << i;
  return out;
}

TEST(MeshColliders, BoxMeshEqualsAnalyticBoxOffFaces) {
  const V3 lo{-0.3, -0.2, -0.1}, hi{0.4, 0.25, 0.15};
  surface::SurfaceQuery q;
  q.build(box_mesh(lo, hi));
  q.classify_cells();
  const BodyPose pose = skew_pose({0.1, 0, 0}, {0.5, -0.2, 1.0});
  Collider box;
  box.kind = Collider::box, box.lo = lo, box.hi = hi;
  const double thickness = 0.02;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<V3> body, world;
  for (int i = 0; i < 20000; ++i) {
    const V3 b{u(rng), u(rng), u(rng)};
    body.push_back(b);
    world.push_back(pose.apply(b));
  }
  const std::vector<MeshContact> got = contacts(q, pose, world, thickness);
  int compared = 0, touching = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const V3 b = body[i];
    // Points over a face (every coordinate but one inside the box): the grown box and the offset
    // surface agree there; beyond edges and corners the offset surface is rounded, the box not.
    int outside = 0;
    for (double d : {b.x < lo.x || b.x > hi.x, b.y < lo.y || b.y > hi.y, b.z < lo.z || b.z > hi.z})
      outside += d;
    const Contact want = contact(box, b, thickness);
    if (outside > 1) {  // the rounded offset lies inside the grown box
      EXPECT_LE(std::max(got[i].contact.depth, 0.0), std::max(want.depth, 0.0) + 1e-6) << i;
      continue;
    }
    ++compared;
    if (want.depth <= 0 && got[i].contact.depth <= 0) continue;
    ++touching;
    ASSERT_NEAR(got[i].contact.depth, want.depth, 1e-6) << "point " << i;
    const V3 normal = pose.rotate(want.normal);
    EXPECT_NEAR(dot(got[i].contact.normal, normal), 1.0, 1e-9) << "point " << i;
  }
  EXPECT_GT(compared, 5000);
  EXPECT_GT(touching, 2000);
}

TEST(MeshColliders, IcosphereWithinItsSagittaOfTheSphere) {
  const double radius = 0.25, thickness = 0.01;
  surface::SurfaceQuery q;
  q.build(icosphere(4, radius));
  q.classify_cells();
  // The faces' planes lie at most 2.85e-4 inside the sphere (their corners are on it).
  const double sagitta = 2.9e-4;
  const BodyPose pose = skew_pose({0, 0, 0}, {0, 0, 0.2});
  const V3 centre = pose.apply({0, 0, 0});
  std::mt19937 rng(5);
  std::normal_distribution<double> g;
  std::uniform_real_distribution<double> shell(radius - 0.05, radius + 0.05);
  std::vector<V3> points;
  for (int i = 0; i < 20000; ++i)
    points.push_back(centre + shell(rng) * normalized(V3{g(rng), g(rng), g(rng)}));
  const std::vector<MeshContact> got = contacts(q, pose, points, thickness);
  int touching = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double want = radius + thickness - norm(points[i] - centre);
    const double depth = std::max(got[i].contact.depth, 0.0);
    ASSERT_LE(depth, std::max(want, 0.0) + 1e-6) << "point " << i;
    ASSERT_GE(depth, std::max(want - sagitta, 0.0) - 1e-6) << "point " << i;
    if (got[i].contact.depth <= 0) continue;
    ++touching;
    // A facet's normal is within its angular radius (about 2.3 degrees at 5120 faces) of the
    // radial direction.
    EXPECT_GT(dot(got[i].contact.normal, normalized(points[i] - centre)), std::cos(3 * kPi / 180));
  }
  EXPECT_GT(touching, 5000);
}

TEST(MeshColliders, MovingColliderLeavesNoVelocityIntoIt) {
  const double thickness = 0.01, dt = 1e-3;
  surface::SurfaceQuery q;
  q.build(box_mesh({-0.5, -0.5, -0.05}, {0.5, 0.5, 0}));  // a table top at z = 0
  q.classify_cells();
  const V3 wall{0.3, -0.2, 0.5};  // the table's velocity: rising and sliding
  MeshColliderStep step;
  step.surface = q.view();
  step.thickness = thickness;
  step.dt = dt;
  step.after.translation[0] = wall.x * dt, step.after.translation[1] = wall.y * dt,
  step.after.translation[2] = wall.z * dt;
  for (double friction : {0.0, 0.5, 100.0}) {
    step.friction = friction;
    std::vector<V3> x = {{0.1, 0.1, 0.004}, {-0.2, 0.3, 0.2}}, v = {{1, 0, -0.2}, {0, 0, -1}};
    DeviceVector<V3> position, velocity;
    to_device(x, position);
    to_device(v, velocity);
    DeviceVector<std::uint8_t> pinned(2, 0);
    collide_with_mesh(step, position, velocity, pinned, 2);
    x = to_host(position, 2), v = to_host(velocity, 2);
    // The first vertex is put back on the moved table's offset surface, leaving with the table's
    // normal velocity; its sliding velocity (1, 0) relative to the table's (0.3, -0.2) is kept
    // (friction 0), slowed by friction x the normal speed (0.5 + 0.2), or stopped.
    // The surface service answers in float: normals to about 1e-7.
    EXPECT_NEAR(x[0].z, wall.z * dt + thickness, 1e-8);
    EXPECT_NEAR(v[0].z, wall.z, 1e-6);
    const V3 slide{1 - wall.x, 0 - wall.y, 0};
    const double keep = std::max(0.0, 1 - friction * 0.7 / norm(slide));
    EXPECT_NEAR(v[0].x, wall.x + keep * slide.x, 1e-6) << "friction " << friction;
    EXPECT_NEAR(v[0].y, wall.y + keep * slide.y, 1e-6) << "friction " << friction;
    // Along the table it keeps its drift while it slides; stopped (friction 100), its drift is
    // the table's.
    const double stuck = keep == 0 ? 1.0 : 0.0;
    EXPECT_NEAR(x[0].x, 0.1 + stuck * dt * (v[0].x - 1), 1e-9) << "friction " << friction;
    EXPECT_NEAR(x[0].y, 0.1 + stuck * dt * (v[0].y - 0), 1e-9) << "friction " << friction;
    // The second, far above it, is untouched.
    EXPECT_EQ(x[1].z, 0.2);
    EXPECT_EQ(v[1].z, -1.0);
  }
}

// The explicit step on the floor: a vertex resting on it, pushed along it by less than friction x
// its weight, does not move at all (its drift undone: before, it crept dt^2 F_t / m a step);
// pushed by more, it slides, each drift at its velocity before friction.
TEST(MeshColliders, FrictionHoldsARestingVertexOnTheFloor) {
  const double dt = 1e-3, thickness = 0.01, mass = 0.5, g = 9.81, friction = 0.3;
  DeviceVector<Collider> floor(1);
  Collider c;
  c.kind = Collider::floor;
  c.friction = friction;
  apron::fill(floor.begin(), floor.end(), c);
  for (const double push : {0.5 * friction * mass * g, 2 * friction * mass * g}) {
    const V3 start{0.2, -0.1, thickness};
    DeviceVector<V3> position, velocity, gradient;
    to_device(std::vector<V3>{start}, position);
    to_device(std::vector<V3>{{0, 0, 0}}, velocity);
    to_device(std::vector<V3>{{-push, 0, 0}}, gradient);  // the force along +x is -gradient
    DeviceVector<double> masses(1, mass);
    DeviceVector<std::uint8_t> pinned(1, 0);
    DeviceVector<std::uint64_t> bad(1, 0);
    MotionParams p;
    p.dt = dt, p.gravity = {0, 0, -g}, p.thickness = thickness, p.step = 1;
    for (int step = 0; step < 10; ++step)
      advance_vertices({&position, &velocity, &gradient, &masses, &pinned, &bad}, 1, p, floor);
    const V3 x = to_host(position, 1)[0], v = to_host(velocity, 1)[0];
    EXPECT_NEAR(x.z, thickness, 1e-15);
    if (push < friction * mass * g) {
      EXPECT_NEAR(x.x, start.x, 1e-15);  // it crept 1.5e-5 m before
      EXPECT_EQ(v.x, 0.0);
    } else {  // sliding at (push / m - friction g) t, each drift at the velocity before friction
      const double a = push / mass - friction * g;
      EXPECT_NEAR(v.x, a * 10 * dt, 1e-12);
      EXPECT_NEAR(x.x, start.x + dt * dt * (45 * a + 10 * push / mass), 1e-12);
    }
    EXPECT_EQ(x.y, start.y);
  }
}

// ---- the analytic colliders inside the implicit step ---------------------------------------

// Outside a box, the signed depth is minus the distance to the grown box, along its nearest point.
TEST(ImplicitContact, BoxDepthOutsideIsMinusTheDistance) {
  Collider box;
  box.kind = Collider::box;
  box.lo = {-1, -1, -1};
  box.hi = {1, 1, 1};
  const double t = 0.1;
  const Contact face = contact(box, {1.4, 0.2, -0.3}, t);
  EXPECT_NEAR(face.depth, -0.3, 1e-15);
  EXPECT_NEAR(face.normal.x, 1, 1e-15);
  const Contact corner = contact(box, {1.4, 1.5, 0}, t);
  EXPECT_NEAR(corner.depth, -0.5, 1e-15);
  EXPECT_NEAR(corner.normal.x, 0.6, 1e-15);
  EXPECT_NEAR(corner.normal.y, 0.8, 1e-15);
  const Contact on = contact(box, {0.3, -1.1, 0}, t);  // on the grown box's -y face
  EXPECT_EQ(on.depth, 0);
  EXPECT_EQ(on.normal.y, -1);
}

struct ImplicitRows {
  DeviceVector<double> mass;
  DeviceVector<std::uint8_t> pinned;
  ImplicitSystem system() const { return {&mass, &pinned, 0.01, 0, {0, 0, -9.81}}; }
};

// A vertex resting on a collider's offset surface that gravity pushes in is held along its
// normal; one above it, one that the sheet pulls off it, and a held vertex are free.
TEST(ImplicitContact, RestingVerticesPushedInAreConstrained) {
  const double t = 0.01;
  Collider floor, sphere;
  floor.kind = Collider::floor;
  floor.friction = 0.3;
  sphere.kind = Collider::sphere;
  sphere.centre = {5, 0, 1};
  sphere.radius = 0.5;
  sphere.friction = 0.7;
  const std::vector<Collider> colliders{floor, sphere};
  const std::vector<V3> x{{0, 0, t},                    // on the floor
                          {1, 0, t + 0.5 * t},          // above it
                          {2, 0, t},                    // on it, pulled up
                          {3, 0, t},                    // on it, held
                          {5, 0, 1 + 0.5 + t + 1e-5}};  // on the sphere's top
  const std::vector<V3> gradient{{0, 0, 0}, {0, 0, 0}, {0, 0, -20}, {0, 0, 0}, {0.1, 0, 0}};
  ImplicitRows rows;
  to_device(std::vector<double>(x.size(), 1.0), rows.mass);
  to_device(std::vector<std::uint8_t>{0, 0, 0, 1, 0}, rows.pinned);
  DeviceVector<V3> x_device, gradient_device;
  DeviceVector<Collider> colliders_device;
  to_device(x, x_device);
  to_device(gradient, gradient_device);
  to_device(colliders, colliders_device);
  DeviceVector<ContactConstraint> held;
  contact_constraints(rows.system(), x_device, gradient_device, colliders_device, t, 0.01 * t,
                      x.size(), held);
  const std::vector<ContactConstraint> got = to_host(held);
  EXPECT_EQ(got[0].normal.z, 1);
  EXPECT_EQ(got[0].friction, 0.3);
  for (const int free : {1, 2, 3}) EXPECT_EQ(dot(got[free].normal, got[free].normal), 0) << free;
  EXPECT_NEAR(got[4].normal.z, 1, 1e-15);
  EXPECT_EQ(got[4].friction, 0.7);
}

// The filter leaves the tangent part; friction takes friction x the impulse / m from the slide,
// never reversing it, and nothing where the collider would have to pull.
TEST(ImplicitContact, FilterAndFrictionFromTheConstraintImpulse) {
  ImplicitRows rows;
  to_device(std::vector<double>{2.0, 2.0, 2.0}, rows.mass);
  to_device(std::vector<std::uint8_t>{0, 0, 0}, rows.pinned);
  DeviceVector<ContactConstraint> held;
  to_device(std::vector<ContactConstraint>{{{0, 0, 1}, 0.5}, {{0, 0, 1}, 0.5}, {{0, 0, 1}, 0.5}},
            held);
  DeviceVector<V3> v;
  to_device(std::vector<V3>{{1, 0, -3}, {0.1, 0, 2}, {0, 1, 0}}, v);
  filter(held, 3, v);
  std::vector<V3> filtered = to_host(v);
  EXPECT_EQ(filtered[0].z, 0);
  EXPECT_EQ(filtered[0].x, 1);
  EXPECT_EQ(filtered[1].z, 0);
  // Impulses 2 (pushing: 0.5 x 2 / 2 = 0.5 m/s taken), 2 (more than the 0.1 m/s slide: it
  // stops) and -1 (the collider would pull: no friction).
  DeviceVector<V3> residual;
  to_device(std::vector<V3>{{0, 0, -2}, {0, 0, -2}, {0, 0, 1}}, residual);
  constraint_friction(rows.system(), held, residual, 3, v);
  const std::vector<V3> after = to_host(v);
  EXPECT_NEAR(after[0].x, 0.5, 1e-15);
  EXPECT_EQ(after[1].x, 0);
  EXPECT_EQ(after[2].y, 1);
}

// A table top at z = 0, friction 0.5, moving at `wall` over one step of dt.
struct MovingTable {
  surface::SurfaceQuery query;
  MeshColliderStep step;
  MovingTable(V3 wall, double thickness, double dt) {
    query.build(box_mesh({-0.5, -0.5, -0.05}, {0.5, 0.5, 0}));
    query.classify_cells();
    step.surface = query.view();
    step.thickness = thickness;
    step.dt = dt;
    step.friction = 0.5;
    step.after.translation[0] = wall.x * dt, step.after.translation[1] = wall.y * dt,
    step.after.translation[2] = wall.z * dt;
  }
};

// A mesh collider takes the rows it holds deeper than the analytic ones, with its velocity at the
// contact: a table top rising under a resting vertex holds it at the table's normal speed; the
// first guess and the friction are relative to that velocity.
TEST(ImplicitContact, MovingMeshHoldsAtItsOwnVelocity) {
  const double t = 0.01, dt = 0.01;
  const V3 wall{0.3, -0.2, 0.5};
  const MovingTable table(wall, t, dt);
  const MeshColliderStep& step = table.step;
  Collider floor;  // below the table: shallower there, deeper off it
  floor.kind = Collider::floor;
  floor.height = -0.02;
  floor.friction = 0.1;
  const std::vector<V3> x{{0.1, 0.1, t},            // on the table
                          {0.2, 0.1, t + 0.5 * t},  // above it
                          {0.8, 0, -0.02 + t}};     // off the table, on the floor
  ImplicitRows rows;
  to_device(std::vector<double>(x.size(), 1.0), rows.mass);
  to_device(std::vector<std::uint8_t>(x.size(), 0), rows.pinned);
  DeviceVector<V3> x_device, gradient;
  to_device(x, x_device);
  to_device(std::vector<V3>(x.size(), V3{0, 0, 0}), gradient);
  DeviceVector<Collider> colliders;
  to_device(std::vector<Collider>{floor}, colliders);
  DeviceVector<ContactConstraint> held;
  contact_constraints(rows.system(), x_device, gradient, colliders, t, 0.01 * t, x.size(), held);
  mesh_contact_constraints(rows.system(), x_device, gradient, step, 0.01 * t, x.size(), held);
  const std::vector<ContactConstraint> got = to_host(held);
  // The service answers in float: its normals tilt by a few 1e-6, which the velocities below
  // (a few m/s) carry.
  EXPECT_NEAR(got[0].normal.z, 1, 1e-10);
  EXPECT_EQ(got[0].friction, 0.5);
  EXPECT_NEAR(norm(got[0].wall_velocity - wall), 0, 1e-12);
  EXPECT_EQ(dot(got[1].normal, got[1].normal), 0);
  EXPECT_EQ(got[2].normal.z, 1);  // the floor's
  EXPECT_EQ(got[2].friction, 0.1);
  EXPECT_EQ(norm(got[2].wall_velocity), 0);
  // The first guess keeps its slide and takes the table's normal speed; the directions lose the
  // normal part entirely.
  DeviceVector<V3> v;
  to_device(std::vector<V3>{{1, 0, -3}, {1, 0, -3}, {1, 0, -3}}, v);
  hold(held, x.size(), v);
  std::vector<V3> guess = to_host(v);
  EXPECT_NEAR(guess[0].z, wall.z, 1e-5);
  EXPECT_NEAR(guess[0].x, 1, 1e-5);
  EXPECT_EQ(guess[1].z, -3);
  EXPECT_EQ(guess[2].z, 0);
  // Friction against the table's slide: the impulse 0.2 takes 0.5 x 0.2 = 0.1 m/s from the
  // relative slide (0.7, 0.2).
  DeviceVector<V3> residual;
  to_device(std::vector<V3>{{0, 0, -0.2}, {0, 0, 0}, {0, 0, 0}}, residual);
  constraint_friction(rows.system(), held, residual, x.size(), v);
  const std::vector<V3> after = to_host(v);
  const V3 slide{1 - wall.x, 0 - wall.y, 0};
  const double keep = 1 - 0.1 / norm(slide);
  EXPECT_NEAR(after[0].x, wall.x + keep * slide.x, 1e-5);
  EXPECT_NEAR(after[0].y, wall.y + keep * slide.y, 1e-5);
  EXPECT_NEAR(after[0].z, wall.z, 1e-5);
}

// Speculative contact: a free row whose end point lies inside a collider's offset surface (deeper
// than the tolerance) is held landing: its normal the collider's at the end point, its normal
// velocity the one that ends the step on the surface's tangent plane there; rows held already,
// held in place, or ending outside stay as they are. A landing row the collider would pull is
// released, a resting row is not; the friction's impulse is the one that stops the row at its
// approach.
TEST(ImplicitContact, LandingRowsEndTheStepOnTheSurface) {
  const double t = 0.01, dt = 0.01, tolerance = 0.01 * t;
  Collider floor, sphere;
  floor.kind = Collider::floor;
  floor.friction = 0.3;
  sphere.kind = Collider::sphere;
  sphere.centre = {5, 0, 1};
  sphere.radius = 0.5;
  const V3 above_sphere{5.1, 0, 1 + 0.5 + t + 0.004};
  const V3 into_sphere{5.05, 0.02, 1 + 0.5 + t - 0.006};
  const std::vector<V3> x{{0, 0, t + 0.003},  // 3 mm above the floor's offset surface
                          {1, 0, t + 0.003},  // the same, ending above it
                          {2, 0, t},          // resting, held already
                          {3, 0, t + 0.003},  // held in place
                          above_sphere,
                          {4, 0, t + 0.003}};  // ending inside by less than the tolerance
  const std::vector<V3> end{{0.01, 0, t - 0.002}, {1, 0, t + 0.001}, {2, 0, t - 0.005},
                            {3, 0, t - 0.002},    into_sphere,       {4, 0, t - 0.5 * tolerance}};
  ImplicitRows rows;  // dt 0.01
  to_device(std::vector<double>(x.size(), 2.0), rows.mass);
  to_device(std::vector<std::uint8_t>{0, 0, 0, 1, 0, 0}, rows.pinned);
  DeviceVector<V3> x_device, end_device;
  DeviceVector<Collider> colliders;
  to_device(x, x_device);
  to_device(end, end_device);
  to_device(std::vector<Collider>{floor, sphere}, colliders);
  std::vector<ContactConstraint> start(x.size());
  start[2] = {{0, 0, 1}, 0.3};
  DeviceVector<ContactConstraint> held;
  to_device(start, held);
  DeviceVector<std::uint8_t> changed;
  landing_constraints(rows.system(), x_device, end_device, colliders, t, tolerance, x.size(), held,
                      changed);
  EXPECT_EQ(changed_rows(changed, x.size()), 2);
  const std::vector<ContactConstraint> got = to_host(held);
  EXPECT_EQ(got[0].landing, 1);
  EXPECT_EQ(got[0].normal.z, 1);
  EXPECT_EQ(got[0].friction, 0.3);
  EXPECT_NEAR(got[0].approach, -0.003 / dt, 1e-12);
  for (const int free : {1, 3, 5}) EXPECT_EQ(dot(got[free].normal, got[free].normal), 0) << free;
  EXPECT_EQ(got[2].landing, 0);
  EXPECT_EQ(got[2].approach, 0);
  // The sphere's normal at the end point; x0's height above the tangent plane there.
  const V3 n = normalized(into_sphere - sphere.centre);
  EXPECT_NEAR(norm(got[4].normal - n), 0, 1e-15);
  const V3 on_surface = sphere.centre + (sphere.radius + t) * n;
  EXPECT_NEAR(got[4].approach, -dot(above_sphere - on_surface, n) / dt, 1e-12);
  // Held at the approach, the landing rows end the step on the tangent plane; the tangent part
  // of the velocity stays.
  DeviceVector<V3> v;
  to_device(std::vector<V3>(x.size(), V3{0.2, 0, -1}), v);
  hold(held, x.size(), v);
  const std::vector<V3> guess = to_host(v);
  EXPECT_NEAR(x[0].z + dt * guess[0].z, t, 1e-15);
  EXPECT_EQ(guess[0].x, 0.2);
  EXPECT_NEAR(dot(above_sphere + dt * guess[4] - on_surface, n), 0, 1e-15);
  EXPECT_EQ(guess[1].z, -1);
  EXPECT_EQ(guess[2].z, 0);
  // The impulse that stops row 0 at its approach: m (v0 + dt g) . n less m approach.
  DeviceVector<V3> v0, gradient;
  to_device(std::vector<V3>(x.size(), V3{0, 0, -0.5}), v0);
  to_device(std::vector<V3>(x.size(), V3{0, 0, 0}), gradient);
  friction_impulses(rows.system(), v0, gradient, x.size(), held);
  EXPECT_NEAR(to_host(held)[0].impulse, 2.0 * (0.5 + dt * 9.81 - 0.3), 1e-12);
  // Residuals: row 0 would be pulled (r . n > 0), row 4 pushed, row 2 (resting) pulled.
  DeviceVector<V3> residual;
  to_device(std::vector<V3>{{0, 0, 1}, {0, 0, 1}, {0, 0, 1}, {0, 0, 1}, -1.0 * n, {0, 0, 1}},
            residual);
  release_pulling_landings(residual, x.size(), held, changed);
  EXPECT_EQ(changed_rows(changed, x.size()), 1);
  const std::vector<ContactConstraint> released = to_host(held);
  EXPECT_EQ(dot(released[0].normal, released[0].normal), 0);
  EXPECT_EQ(released[0].landing, 0);
  EXPECT_EQ(released[4].landing, 1);
  EXPECT_EQ(released[2].normal.z, 1);
}

// A moving mesh takes a landing row from the floor where it lies deeper: the row lands on the
// table at the table's normal speed plus its approach.
TEST(ImplicitContact, MovingMeshTakesTheLandingRowsItHoldsDeeper) {
  const double t = 0.01, dt = 0.01, tolerance = 0.01 * t;
  const V3 wall{0.3, -0.2, 0.5};
  const MovingTable table(wall, t, dt);
  const MeshColliderStep& step = table.step;
  Collider floor;  // just below the table's top
  floor.kind = Collider::floor;
  floor.height = -0.001;
  const std::vector<V3> x{{0.1, 0.1, t + 0.004}, {0.8, 0, t + 0.004}};
  const std::vector<V3> end{{0.1, 0.1, t - 0.003}, {0.8, 0, t - 0.003}};
  ImplicitRows rows;
  to_device(std::vector<double>(x.size(), 1.0), rows.mass);
  to_device(std::vector<std::uint8_t>(x.size(), 0), rows.pinned);
  DeviceVector<V3> x_device, end_device;
  DeviceVector<Collider> colliders;
  to_device(x, x_device);
  to_device(end, end_device);
  to_device(std::vector<Collider>{floor}, colliders);
  DeviceVector<ContactConstraint> held;
  to_device(std::vector<ContactConstraint>(x.size()), held);
  DeviceVector<std::uint8_t> changed;
  landing_constraints(rows.system(), x_device, end_device, colliders, t, tolerance, x.size(), held,
                      changed);
  mesh_landing_constraints(rows.system(), x_device, end_device, step, tolerance, x.size(), held,
                           changed);
  EXPECT_EQ(changed_rows(changed, x.size()), 2);
  const std::vector<ContactConstraint> got = to_host(held);
  EXPECT_EQ(got[0].friction, 0.5);  // the table's, deeper than the floor
  EXPECT_NEAR(norm(got[0].wall_velocity - wall), 0, 1e-12);
  EXPECT_NEAR(got[0].approach, -0.004 / dt, 1e-5);  // the service's float distances
  EXPECT_EQ(got[1].friction, 0);                    // off the table: the floor's
  EXPECT_NEAR(got[1].approach, -0.005 / dt, 1e-12);
  DeviceVector<V3> v;
  to_device(std::vector<V3>(x.size(), V3{0, 0, -1}), v);
  hold(held, x.size(), v);
  EXPECT_NEAR(to_host(v)[0].z, wall.z - 0.004 / dt, 1e-5);
}

// Friction inside Newton's step: the lagged impulse from the step's start; the force minus the
// gradient of the potential, the product its Hessian (both against central differences, at rest,
// sticking below eps, sliding above it, and on a free row); the preconditioner inverts M' + H.
TEST(ImplicitContact, FrictionPotentialItsGradientHessianAndInverse) {
  ImplicitRows rows;  // dt 0.01, g (0, 0, -9.81), no damping
  to_device(std::vector<double>(5, 2.0), rows.mass);
  to_device(std::vector<std::uint8_t>(5, 0), rows.pinned);
  const ImplicitSystem system = rows.system();
  const V3 tilted = normalized(V3{0.3, -0.2, 1});
  const V3 wall{0.05, 0.02, 0};
  std::vector<ContactConstraint> c(5);
  for (int i = 0; i < 4; ++i) c[i] = {i == 3 ? tilted : V3{0, 0, 1}, 0.4, i == 3 ? wall : V3{}, 0};
  DeviceVector<ContactConstraint> held;
  to_device(c, held);
  DeviceVector<V3> v0, gradient0;
  to_device(std::vector<V3>(5, V3{0, 0, -1}), v0);
  to_device(std::vector<V3>{{0, 0, 0}, {0, 0, -3}, {1, 0, 0}, {0, 0, 0}, {0, 0, 0}}, gradient0);
  friction_impulses(system, v0, gradient0, 5, held);
  c = to_host(held);
  // p = -(m v0 + dt (m g - grad)).n: 2 + 0.1962, less 0.03 where the sheet pulls it off.
  EXPECT_NEAR(c[0].impulse, 2.1962, 1e-12);
  EXPECT_NEAR(c[1].impulse, 2.1962 - 0.03, 1e-12);
  EXPECT_NEAR(c[2].impulse, 2.1962, 1e-12);
  EXPECT_EQ(c[4].impulse, 0);  // a free row
  const double eps = 1e-3;
  // At rest, sticking (u = eps / 3), sliding (u = 5 eps), sliding on the moving tilted plane.
  const std::vector<V3> v{{0, 0, 0},
                          {eps / 3, 0, 0.7},
                          {-3 * eps, 4 * eps, 0},
                          wall + V3{0.01, 0.02, -0.004},
                          {1, 2, 3}};
  DeviceVector<V3> velocity, force, direction, product;
  to_device(v, velocity);
  force.resize(5);
  friction_force(held, eps, velocity, 5, force);
  const std::vector<V3> f = to_host(force);
  const auto potential = [&](const std::vector<V3>& at) {
    DeviceVector<V3> a;
    to_device(at, a);
    DeviceVector<double> out;
    friction_potential(held, eps, a, 0, a, 5, out);
    return to_host(out);
  };
  const double h = 1e-7;
  for (int i = 0; i < 5; ++i)
    for (int axis = 0; axis < 3; ++axis) {
      std::vector<V3> plus = v, minus = v;
      (axis == 0 ? plus[i].x : axis == 1 ? plus[i].y : plus[i].z) += h;
      (axis == 0 ? minus[i].x : axis == 1 ? minus[i].y : minus[i].z) -= h;
      const double slope = (potential(plus)[i] - potential(minus)[i]) / (2 * h);
      const double got = axis == 0 ? f[i].x : axis == 1 ? f[i].y : f[i].z;
      EXPECT_NEAR(-got, slope, 1e-6 * (std::abs(slope) + 1e-3)) << "row " << i << " axis " << axis;
    }
  EXPECT_GT(norm(f[2]), 0.4 * c[2].impulse * (1 - 1e-12));  // sliding: mu p
  EXPECT_EQ(norm(f[4]), 0);
  // The product against the force's central differences along q.
  const std::vector<V3> q{
      {0.3, -0.7, 0.2}, {1, 0.5, -2}, {0.2, 0.1, 0.4}, {-0.5, 0.3, 0.1}, {1, 1, 1}};
  to_device(q, direction);
  to_device(std::vector<V3>(5, V3{0, 0, 0}), product);
  add_friction_product(held, eps, velocity, direction, 5, product);
  const std::vector<V3> hq = to_host(product);
  const double k = 1e-9;
  std::vector<V3> vp(5), vm(5);
  for (int i = 0; i < 5; ++i) vp[i] = v[i] + k * q[i], vm[i] = v[i] - k * q[i];
  DeviceVector<V3> at, fp(5), fm(5);
  to_device(vp, at);
  friction_force(held, eps, at, 5, fp);
  to_device(vm, at);
  friction_force(held, eps, at, 5, fm);
  const std::vector<V3> up = to_host(fp), down = to_host(fm);
  for (int i = 0; i < 5; ++i) {
    const V3 expected = (-1 / (2 * k)) * (up[i] - down[i]);
    EXPECT_LT(norm(hq[i] - expected), 1e-5 * (norm(expected) + 1)) << "row " << i;
  }
  // (M' + H) z = r on the rows with friction.
  DeviceVector<V3> residual, z;
  to_device(q, residual);
  to_device(std::vector<V3>(5, V3{0, 0, 0}), z);
  friction_precondition(system, held, eps, velocity, residual, 5, z);
  const std::vector<V3> zs = to_host(z);
  to_device(std::vector<V3>(5, V3{0, 0, 0}), product);
  add_friction_product(held, eps, velocity, z, 5, product);
  const std::vector<V3> hz = to_host(product);
  for (int i = 0; i < 4; ++i)
    EXPECT_LT(norm(2.0 * zs[i] + hz[i] - q[i]), 1e-10 * norm(q[i])) << "row " << i;
}

// Newton's start with friction inside: the rows with friction at rest on their collider, the others
// untouched; the residual's scale: mu p / sqrt(M') on the rows with friction, zero elsewhere.
TEST(ImplicitContact, FrictionStartAndScale) {
  ImplicitRows rows;  // dt 0.01, g (0, 0, -9.81), no damping
  to_device(std::vector<double>{2, 2, 2, 4}, rows.mass);
  to_device(std::vector<std::uint8_t>{0, 0, 1, 0}, rows.pinned);
  const V3 wall{0.05, 0.02, -0.01};
  std::vector<ContactConstraint> c(4);
  c[0] = {V3{0, 0, 1}, 0.4, wall, 0, 2.5};  // friction
  c[1] = {V3{0, 0, 1}, 0, wall, 0, 2.5};    // frictionless collider
  c[2] = {V3{0, 0, 1}, 0.4, wall, 0, 2.5};  // pinned (friction_impulses gives it none)
  c[3] = {V3{0, 0, 1}, 0.5, V3{}, 0, 0};    // pulled off: no impulse
  DeviceVector<ContactConstraint> held;
  to_device(c, held);
  const std::vector<V3> v{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}};
  DeviceVector<V3> velocity, scale;
  to_device(v, velocity);
  friction_start(held, 4, velocity);
  const std::vector<V3> started = to_host(velocity);
  EXPECT_EQ(norm(started[0] - wall), 0);
  EXPECT_EQ(norm(started[1] - v[1]), 0);
  EXPECT_EQ(norm(started[3] - v[3]), 0);
  scale.resize(4);
  friction_scale(rows.system(), held, 4, scale);
  const std::vector<V3> s = to_host(scale);
  EXPECT_NEAR(s[0].x, 0.4 * 2.5 / std::sqrt(2.0), 1e-15);
  EXPECT_EQ(s[0].y, 0);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(norm(s[i]), 0) << "row " << i;
}

// friction_predict: a sliding row whose own inertia's step (R.t / M') would carry it through the
// apex takes, along its slide, the stiffness k with which that step ends at the apex: (M' + k) |u|
// = -R.t. One the step slows short of the apex, one in the band, one without friction and a
// pinned one keep f1' (0 along the slide outside the band).
TEST(ImplicitContact, FrictionPredictStopsTheSlideAtTheApex) {
  ImplicitRows rows;  // dt 0.01, no damping: M' = M
  to_device(std::vector<double>{2, 2, 2, 2, 2}, rows.mass);
  to_device(std::vector<std::uint8_t>{0, 0, 0, 0, 1}, rows.pinned);
  const double eps = 1e-3, mu = 0.4, p = 2.5, speed = 0.1;
  std::vector<ContactConstraint> c(5, ContactConstraint{V3{0, 0, 1}, mu, V3{}, 0, p});
  c[3].friction = 0;
  DeviceVector<ContactConstraint> held;
  to_device(c, held);
  // Rows 0, 1, 4 slide at 0.1 m/s along x; the residual along -x is 0.5 (row 0: 0.5 / 2 > 0.1,
  // through the apex) or 0.1 (row 1: 0.05 < 0.1, it slows); row 2 creeps inside the band.
  const std::vector<V3> v{
      {speed, 0, 0}, {speed, 0, 0}, {0.5e-3, 0, 0}, {speed, 0, 0}, {speed, 0, 0}};
  const std::vector<V3> r{{-0.5, 0, 0}, {-0.1, 0, 0}, {-0.5, 0, 0}, {-0.5, 0, 0}, {-0.5, 0, 0}};
  DeviceVector<V3> velocity, residual, q, product;
  to_device(v, velocity);
  to_device(r, residual);
  friction_predict(rows.system(), held, eps, velocity, residual, 5);
  const std::vector<ContactConstraint> predicted = to_host(held);
  const double along = 0.5 / speed - 2;  // k: (2 + k) 0.1 = 0.5
  EXPECT_NEAR(predicted[0].secant * mu * p, along, 1e-12);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(predicted[i].secant, 0) << "row " << i;
  // The product along the slide: k on row 0, 0 on row 1 (f1' outside the band); across it
  // mu p / |u| on both.
  to_device(std::vector<V3>(5, V3{1, 1, 0}), q);
  to_device(std::vector<V3>(5, V3{0, 0, 0}), product);
  add_friction_product(held, eps, velocity, q, 5, product);
  const std::vector<V3> out = to_host(product);
  EXPECT_NEAR(out[0].x, along, 1e-12);
  EXPECT_NEAR(out[0].y, mu * p / speed, 1e-12);
  EXPECT_NEAR(out[1].x, 0, 1e-12);
  EXPECT_NEAR(out[1].y, mu * p / speed, 1e-12);
  // The preconditioner inverts M' + that block on row 0: along the slide the row's own step
  // -R.t / (M' + k) is its whole speed.
  DeviceVector<V3> z(5);
  friction_precondition(rows.system(), held, eps, velocity, q, 5, z);
  const std::vector<V3> zs = to_host(z);
  EXPECT_NEAR(0.5 * zs[0].x, speed, 1e-15);
  EXPECT_NEAR(zs[0].y, 1 / (2 + mu * p / speed), 1e-15);
  EXPECT_NEAR(zs[1].x, 1 / 2.0, 1e-15);
}

}  // namespace
}  // namespace apron::cloth
