#include "cloth/cloth_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include "config/yaml_reader.hpp"
#include "decomposition/partition.hpp"
#include "decomposition/reductions.hpp"
#include "io/mesh_reader.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/checksum.hpp"
#include "kernels/common/element_hash.hpp"
#include "kernels/common/primitives.hpp"
#include "runtime/json.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

Collider device_collider(const ColliderConfig& c) {
  Collider k;
  k.kind = c.kind == "sphere" ? Collider::sphere
           : c.kind == "box"  ? Collider::box
                              : Collider::floor;
  k.centre = {c.centre[0], c.centre[1], c.centre[2]};
  k.lo = {c.lo[0], c.lo[1], c.lo[2]};
  k.hi = {c.hi[0], c.hi[1], c.hi[2]};
  k.radius = c.radius;
  k.height = c.height;
  k.friction = c.friction;
  return k;
}

BodyPose body_pose(const RigidPose& p) {
  BodyPose b;
  std::copy(p.rotation.begin(), p.rotation.end(), b.rotation);
  std::copy(p.pivot.begin(), p.pivot.end(), b.pivot);
  std::copy(p.translation.begin(), p.translation.end(), b.translation);
  return b;
}

// The vertices within `depth` rings of the owned ones that other ranks own, ascending.
std::vector<std::int64_t> ghost_layers(const Rings& rings, const std::vector<int>& owner, int rank,
                                       int depth) {
  std::vector<std::uint8_t> seen(owner.size(), 0);
  std::vector<std::uint32_t> front;
  for (std::uint32_t v = 0; v < owner.size(); ++v)
    if (owner[v] == rank) seen[v] = 1, front.push_back(v);
  std::vector<std::int64_t> ghosts;
  for (int layer = 0; layer < depth; ++layer) {
    std::vector<std::uint32_t> next;
    for (const std::uint32_t v : front)
      for (std::uint32_t k = rings.offsets[v]; k < rings.offsets[v + 1]; ++k) {
        const std::uint32_t u = rings.neighbours[k];
        if (seen[u]) continue;
        seen[u] = 1;
        next.push_back(u);
        ghosts.push_back(u);
      }
    front.swap(next);
  }
  std::sort(ghosts.begin(), ghosts.end());
  return ghosts;
}

// The vertex table: the sheet's vertex index of each row (a vertex is owned by one rank), its
// position and velocity; the vertex count is a scalar the sheet must match.
SteppingDeclaration cloth_declaration() {
  SteppingDeclaration d;
  d.description = {"vertex", "cloth.xmf opens in ParaView; diagnostics.csv; run_report.json"};
  d.columns = {{"kinetic", 12},   {"potential", 12}, {"elastic", 12}, {"total", 12},
               {"max_speed", 6},  {"stretch", 12},   {"bend", 12},    {"coupling", 12},
               {"hourglass", 12}, {"max_strain", 6}, {"contact", 12}, {"residual", 6}};
  d.series = {"cloth"};
  d.tables = {{"vertices",
               {{"position", io::Dtype::f64, 3, ValueCheck::finite},
                {"velocity", io::Dtype::f64, 3, ValueCheck::finite},
                {"id", io::Dtype::i64, 1}},
               "vertices"}};
  d.state_name = "vertex positions or velocities";
  d.unstable_hint =
      "lower cloth.cfl (explicit) or cloth.implicit.dt (implicit), or check that the material "
      "(stretch, bend, density) is physical";
  return d;
}

}  // namespace

ClothSolver::ClothSolver(const WorkloadContext& context)
    : SteppingWorkload(context, cloth_declaration()),
      case_(cloth_case(config_)),
      transport_(context.ranks.comm),
      halo_(transport_) {}

// The sheet as the kernels number it. A grid's rows are already a local order; a file's vertices
// (a scan's, in any order) are renumbered along a space-filling curve, and file_index_ keeps the
// file's numbering for the output. A bad mesh is refused with the file's numbering, before that.
HostMesh ClothSolver::sheet() {
  const SheetConfig& s = case_.sheet;
  if (!s.from_file) {
    HostMesh mesh = grid_mesh(s.grid);
    for (auto& p : mesh.positions)
      for (int d = 0; d < 3; ++d) p[d] += s.centre[d];
    return mesh;
  }
  // Zero-area triangles are kept so that the mesh check names them (the cloth cannot use
  // them); every rank reads the same file and fails the same way.
  io::MeshReadOptions options;
  options.keep_degenerate = true;
  io::TriangleMesh read;
  try {
    read = io::read_mesh(s.file, options);
  } catch (const io::MeshReadError& e) {
    throw config::ConfigError("cloth.mesh.file: " + std::string(e.what()));
  }
  HostMesh mesh{std::move(read.vertices), std::move(read.triangles)};
  for (auto& p : mesh.positions)
    for (int d = 0; d < 3; ++d) p[d] = p[d] * s.scale + s.offset[d];
  if (const std::string problem = check_mesh(mesh); !problem.empty())
    throw config::ConfigError(config_.file + ": cloth: the sheet cannot be simulated: " + problem);
  file_index_ = locality_order(mesh);
  return renumbered(mesh, file_index_);
}

// Timed by the driver (setup, or restart around load()).
void ClothSolver::build(bool at_rest) {
  const HostMesh mesh = sheet();
  check_memory(mesh.positions.size());
  build_mesh_colliders();
  if (at_rest) refuse_start_inside_colliders(mesh);
  Rings rings;
  // The same check on every rank: a bad mesh is refused by all of them together.
  try {
    rings = build_rings(mesh);
  } catch (const MeshError& e) {
    throw config::ConfigError(config_.file + ": cloth: the sheet cannot be simulated: " + e.what());
  }
  global_vertices_ = mesh.positions.size();
  check_pinned(mesh);
  distribute(mesh, rings);
  build_local_mesh(mesh, rings);
  if (case_.integrator.block_jacobi || case_.integrator.vbd) colour_rows(rings);
  build_output_triangles(mesh);
  choose_dt(mesh);
  if (case_.integrator.vbd || case_.integrator.two_level) setup_coarse(mesh);
  setup_self_contact(mesh, at_rest);
  Log::info(
      "cloth: %zu vertices, %zu triangles, dt = %.4g s, %d rank(s) (%zu owned here, %zu "
      "ghosts)",
      global_vertices_, mesh.triangles.size(), dt_, ranks_.size, owned_, halo_.ghost_count());
}

// About 810 bytes of device memory per local row with the explicit step (the run report's
// device_bytes_per_vertex on sheets of 289 to 1M vertices) and 20 vectors of 24 bytes more with
// the implicit one, with headroom: a sheet that cannot fit is refused before it is allocated,
// naming the key that sizes it, rather than failing in the middle of the setup.
void ClothSolver::check_memory(std::size_t vertices) const {
  const double kBytesPerVertex = case_.integrator.implicit ? 1400 : 900;
  const double rows = static_cast<double>(vertices) / ranks_.size;
  const double free_bytes = global_min(ranks_.comm, static_cast<double>(device_.free_bytes));
  if (rows * kBytesPerVertex <= 0.9 * free_bytes) return;
  const SheetConfig& s = case_.sheet;
  const std::string key = s.from_file ? "cloth.mesh.file" : "cloth.grid.cells";
  const std::string value =
      s.from_file ? s.file : std::to_string(s.grid.nx) + " x " + std::to_string(s.grid.ny);
  char text[256];
  std::snprintf(text, sizeof text,
                ": %zu vertices need about %.3g GB of memory per rank, %.3g GB are available; "
                "use a coarser sheet or more ranks",
                vertices, rows * kBytesPerVertex / 1e9, free_bytes / 1e9);
  throw config::ConfigError(config_.file + ": key '" + key + "' (" + value + ")" + text);
}

// A pinned box that holds no vertex is a mistake in the case (a sheet that was meant to hang
// would fall): refused, naming the box.
void ClothSolver::check_pinned(const HostMesh& mesh) const {
  for (std::size_t b = 0; b < case_.pinned.size(); ++b) {
    const Box& box = case_.pinned[b];
    const bool holds =
        std::any_of(mesh.positions.begin(), mesh.positions.end(), [&](const auto& p) {
          return box.contains(V3{p[0], p[1], p[2]});
        });
    if (!holds)
      throw config::ConfigError(config_.file + ": cloth.pinned[" + std::to_string(b) + "] " +
                                config::box_text(box) +
                                " holds no vertex of the sheet at rest; move or grow it");
  }
}

// Owners by the partition of the rest positions: every rank computes every vertex's owner.
void ClothSolver::distribute(const HostMesh& mesh, const Rings& rings) {
  Box bounds;
  for (int d = 0; d < 3; ++d) {
    bounds.lo[d] = std::numeric_limits<double>::max();
    bounds.hi[d] = std::numeric_limits<double>::lowest();
  }
  std::vector<Vec4> points(mesh.positions.size());
  for (std::size_t v = 0; v < points.size(); ++v) {
    const auto& p = mesh.positions[v];
    points[v] = {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2]), 0};
    for (int d = 0; d < 3; ++d)
      bounds.lo[d] = std::min(bounds.lo[d], p[d]), bounds.hi[d] = std::max(bounds.hi[d], p[d]);
  }
  bounds = bounds.expanded(1e-6 * (1 + bounds.hi[0] - bounds.lo[0]));
  // Each rank hands its share of the (replicated) vertices to the cut.
  const std::size_t n = points.size(), r = static_cast<std::size_t>(ranks_.rank);
  const std::size_t first = n * r / ranks_.size, last = n * (r + 1) / ranks_.size;
  const Partition partition =
      config_.decomposition.method == "cartesian"
          ? Partition::cartesian(bounds, ranks_.size, config_.decomposition.dims)
          : Partition::rcb(bounds, ranks_.comm,
                           std::span<const Vec4>(points.data() + first, last - first));
  const OwnerLookup lookup{partition.ownership_boxes().data(), partition.ranks()};
  owner_.resize(n);
  std::vector<std::int64_t> owned;
  for (std::size_t v = 0; v < n; ++v) {
    owner_[v] = lookup(points[v]);
    if (owner_[v] == ranks_.rank) owned.push_back(static_cast<std::int64_t>(v));
  }
  owned_ = owned.size();
  const std::vector<std::int64_t> ghosts = ghost_layers(rings, owner_, ranks_.rank, kGhostRings);
  std::vector<int> ghost_owners(ghosts.size());
  for (std::size_t g = 0; g < ghosts.size(); ++g) ghost_owners[g] = owner_[ghosts[g]];
  halo_.build_ghosts(owned, ghosts, ghost_owners);
}

// The local rows' rings, in the sheet's ring order (so each vertex's frame and sums are those of
// one rank). The outermost ghost layer's rings lose the vertices not held here: they are marked
// open, and nothing owned reads what is computed from them.
void ClothSolver::build_local_mesh(const HostMesh& mesh, const Rings& rings) {
  const auto& ids = halo_.global_ids();
  const std::size_t n = ids.size();
  std::vector<std::array<double, 3>> rest(n);
  Rings local{{0}, {}, std::vector<std::uint8_t>(n)};
  std::vector<std::uint8_t> pinned(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::uint32_t>(ids[i]);
    rest[i] = mesh.positions[v];
    bool complete = true;
    for (std::uint32_t k = rings.offsets[v]; k < rings.offsets[v + 1]; ++k) {
      const std::int64_t index = halo_.local_index(rings.neighbours[k]);
      if (index < 0) {
        complete = false;
        continue;
      }
      local.neighbours.push_back(static_cast<std::uint32_t>(index));
    }
    local.offsets.push_back(static_cast<std::uint32_t>(local.neighbours.size()));
    local.boundary[i] = rings.boundary[v] || !complete;
    for (const Box& box : case_.pinned)
      if (box.contains(V3{rest[i][0], rest[i][1], rest[i][2]})) pinned[i] = 1;
  }
  upload_rings(rest, local, mesh_);
  pinned_ = DeviceVector<std::uint8_t>(pinned.begin(), pinned.end());
  first_bad_step_ = DeviceVector<std::uint64_t>(1, 0u);

  reference_ = make_reference(mesh_, mesh_.positions);
  const MaterialConfig& m = case_.material;
  model_ = make_energy_model(
      mesh_, Material{m.stretch, m.bend, m.coupling, m.hourglass},
      case_.precision == "mixed" ? GradientPrecision::mixed : GradientPrecision::float64);
  std::vector<double> mass = to_host(reference_.rest.area, n);
  for (double& a : mass) a *= m.density;
  mass_ = DeviceVector<double>(mass.begin(), mass.end());

  position_ = store_.add<V3>("position");
  velocity_ = store_.add<V3>("velocity");
  if (case_.integrator.implicit) implicit_.direction = store_.add<V3>("direction");
  store_.resize(n);
  *position_ = mesh_.positions;
  apron::fill(velocity_->begin(), velocity_->end(), V3{0, 0, 0});
  std::vector<Collider> colliders;
  for (const auto& c : case_.colliders)
    if (c.kind != "mesh") colliders.push_back(device_collider(c));
  colliders_ = DeviceVector<Collider>(colliders.begin(), colliders.end());
}

// Each mesh collider's surface at rest in the case's frame, with its empty cells classified so
// that vertices away from it are answered without a search. Replicated on every rank.
void ClothSolver::build_mesh_colliders() {
  mesh_colliders_.clear();
  for (std::size_t c = 0; c < case_.colliders.size(); ++c) {
    const ColliderConfig& config = case_.colliders[c];
    if (config.kind != "mesh") continue;
    auto collider = std::make_unique<MeshCollider>();
    collider->surface.build(*config.mesh.surface);
    collider->surface.classify_cells();
    collider->config = &config;
    mesh_colliders_.push_back(std::move(collider));
  }
}

MeshColliderStep ClothSolver::mesh_step(const MeshCollider& collider, double start,
                                        double dt) const {
  const PrescribedMotion& motion = collider.config->motion;
  return {collider.surface.view(),   body_pose(motion.at(start)), body_pose(motion.at(start + dt)),
          collider.config->friction, projection_thickness(),      dt};
}

// The barrier acts over the outer half of the thickness: a sheet at rest on a collider sits
// inside that band, where the barrier's push carries its weight, and the inner half keeps the
// impact of a fall of several millimetres a step away from the singular surface.
double ClothSolver::projection_thickness() const {
  return barrier_contact() ? 0.5 * motion_.thickness : motion_.thickness;
}

void ClothSolver::collide_with_meshes(double start, double dt) {
  for (const auto& collider : mesh_colliders_)
    collide_with_mesh(mesh_step(*collider, start, dt), *position_, *velocity_, pinned_, owned_);
}

void ClothSolver::build_output_triangles(const HostMesh& mesh) {
  std::vector<std::int64_t> row_of(mesh.positions.size(), -1);
  for (const auto& tri : mesh.triangles) {
    if (owner_[*std::min_element(tri.begin(), tri.end())] != ranks_.rank) continue;
    for (const std::uint32_t v : tri) {
      if (row_of[v] < 0) {
        row_of[v] = static_cast<std::int64_t>(output_rows_.size());
        output_rows_.push_back(static_cast<std::uint32_t>(halo_.local_index(v)));
      }
      output_triangles_.push_back(static_cast<std::uint32_t>(row_of[v]));
    }
  }
  visual_connectivity_.assign(output_triangles_.begin(), output_triangles_.end());
}

// The sheet's shortest edge, by its vertices in the sheet's numbering.
ClothSolver::Edge ClothSolver::shortest_edge(const HostMesh& mesh) {
  Edge shortest{std::numeric_limits<double>::max(), 0, 0};
  for (const auto& tri : mesh.triangles)
    for (int e = 0; e < 3; ++e) {
      const auto& a = mesh.positions[tri[e]];
      const auto& b = mesh.positions[tri[(e + 1) % 3]];
      const double length = std::hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
      if (length < shortest.length) shortest = {length, tri[e], tri[(e + 1) % 3]};
    }
  return shortest;
}

// What sets an edge's length, for messages: the grid's key, or the edge's vertices as the file
// numbers them.
std::string ClothSolver::edge_source(const Edge& edge) const {
  char text[512];
  const SheetConfig& s = case_.sheet;
  if (!s.from_file) {
    std::snprintf(text, sizeof text,
                  "key 'cloth.grid.size' (a %.3g x %.3g m sheet of %d x %d cells, its shortest "
                  "edge %.3g m)",
                  s.grid.size_x, s.grid.size_y, s.grid.nx, s.grid.ny, edge.length);
    return text;
  }
  const auto file_vertex = [&](std::uint32_t v) {
    return file_index_.empty() ? v : file_index_[v];
  };
  std::snprintf(text, sizeof text, "the edge from vertex %u to vertex %u of %s (%.3g m long)",
                file_vertex(edge.a), file_vertex(edge.b), s.file.c_str(), edge.length);
  return text;
}

// An edge shorter than the float spacing at the sheet's coordinates has ends that the float
// arithmetic of the forces and the output cannot tell apart, and a stability limit no run can
// step through: refused, naming it.
void ClothSolver::refuse_unresolved_edge(const HostMesh& mesh, const Edge& edge) const {
  double magnitude = 0;
  for (const auto& p : mesh.positions)
    for (const double x : p) magnitude = std::max(magnitude, std::fabs(x));
  const double resolution = std::numeric_limits<float>::epsilon() * magnitude;
  if (edge.length >= resolution) return;
  char text[160];
  std::snprintf(text, sizeof text,
                " is shorter than the float resolution of the sheet's coordinates (%.3g m at "
                "%.3g m); merge its vertices, or scale the sheet",
                resolution, magnitude);
  throw config::ConfigError(config_.file + ": cloth: " + edge_source(edge) + text);
}

// The explicit limit of the sheet's fastest waves on its shortest edge h: membrane waves at
// c = sqrt(6 zeta / mu) (W = 3 zeta e^2 under a uniaxial strain e) need dt <= h / c, bending
// waves (D = 6 xi) dt <= 2 h^2 / (pi^2 sqrt(D / mu)).
void ClothSolver::choose_dt(const HostMesh& mesh) {
  shortest_ = shortest_edge(mesh);
  refuse_unresolved_edge(mesh, shortest_);
  const double h = shortest_.length;
  const MaterialConfig& m = case_.material;
  double limit = h / std::sqrt(6 * m.stretch / m.density);
  if (m.bend > 0)
    limit = std::min(
        limit,
        2 * h * h / (std::numbers::pi * std::numbers::pi * std::sqrt(6 * m.bend / m.density)));
  explicit_dt_ = case_.cfl * limit;
  dt_ = case_.integrator.implicit ? case_.integrator.dt : explicit_dt_;
  if (case_.integrator.implicit)
    Log::info("cloth: implicit step %.4g s, %.3g x the explicit stability limit (%.4g s)", dt_,
              dt_ / limit, limit);
  motion_.dt = dt_;
  clock_.dt = dt_;
  motion_.gravity = {case_.gravity[0], case_.gravity[1], case_.gravity[2]};
  motion_.damping_rate = m.damping / m.density;
  motion_.thickness = case_.thickness;
}

StepLimit ClothSolver::largest_step() const {
  if (case_.integrator.implicit) {
    char cause[64];
    std::snprintf(cause, sizeof cause, "key 'cloth.integrator.dt' (%.3g s)", dt_);
    return {dt_, cause, "raise it"};
  }
  return {dt_, edge_source(shortest_) + " with cloth.material",
          case_.sheet.from_file ? "merge or move those vertices, or raise cloth.mesh.scale"
                                : "enlarge the sheet, or use fewer cloth.grid.cells"};
}

// A sheet that starts inside a collider (grown by the thickness) would be thrown onto its
// surface in the first step, with energy from nowhere: refused, naming the collider.
void ClothSolver::refuse_start_inside_colliders(const HostMesh& mesh) const {
  std::vector<V3> rest(mesh.positions.size());
  for (std::size_t v = 0; v < rest.size(); ++v)
    rest[v] = {mesh.positions[v][0], mesh.positions[v][1], mesh.positions[v][2]};
  DeviceVector<V3> rest_on_device;  // for the mesh colliders: uploaded once for all of them
  if (!mesh_colliders_.empty()) to_device(rest, rest_on_device);
  std::size_t next_mesh = 0;
  for (std::size_t c = 0; c < case_.colliders.size(); ++c) {
    std::vector<double> depth(rest.size());
    if (case_.colliders[c].kind == "mesh") {
      DeviceVector<double> on_device;
      mesh_contact_depths(mesh_colliders_[next_mesh++]->surface.view(),
                          body_pose(case_.colliders[c].motion.at(0)), case_.thickness,
                          rest_on_device, on_device);
      depth = to_host(on_device, rest.size());
    } else {
      const Collider collider = device_collider(case_.colliders[c]);
      for (std::size_t v = 0; v < rest.size(); ++v)
        depth[v] = contact(collider, rest[v], case_.thickness).depth;
    }
    for (std::size_t v = 0; v < rest.size(); ++v) {
      const V3 x = rest[v];
      const bool held = std::any_of(case_.pinned.begin(), case_.pinned.end(),
                                    [&](const Box& box) { return box.contains(x); });
      if (held || depth[v] <= 0) continue;
      char text[320];
      std::snprintf(text, sizeof text,
                    ": cloth.colliders[%zu] (a %s, grown by cloth.thickness %.3g m) holds vertex "
                    "%u of the sheet at rest, at (%.6g, %.6g, %.6g); move the sheet or the "
                    "collider so that the sheet starts outside it",
                    c, case_.colliders[c].kind.c_str(), case_.thickness,
                    file_index_.empty() ? static_cast<std::uint32_t>(v) : file_index_[v], x.x, x.y,
                    x.z);
      throw config::ConfigError(config_.file + text);
    }
  }
}

void ClothSolver::setup_self_contact(const HostMesh& mesh, bool at_rest) {
  if (!case_.self_collision.enabled) return;
  self_contact_ = std::make_unique<SheetSelfContact>(case_, ranks_.comm);
  const auto& ids = halo_.global_ids();
  // The repulsion as stiff as an explicit step can take, whichever integrator steps: an implicit
  // step's longer dt would make it softer, and the clamps would do its work.
  self_contact_->setup(
      {&mesh, std::vector<std::int64_t>(ids.begin(), ids.begin() + owned_),
       std::min(dt_, explicit_dt_), case_.material.density, at_rest, config_.file, file_index_},
      *position_);
  if (case_.integrator.implicit)
    Log::info(
        "cloth: self-collision: no vertex moves more than %.3g m a step (%.3g m/s at dt = "
        "%.4g s); faster motion is slowed",
        self_contact_->largest_step(), self_contact_->largest_step() / dt_, dt_);
}

// One step of the user's dt. With cloth.implicit.max_halvings, a sub-step whose solve does
// not reach its tolerance is taken again from its start (which the solve leaves as it was: only
// advance_motion's end moves the sheet) at half the length, and the rest of the step at that
// length, up to max_halvings halvings; the last one's solve refuses or accepts as configured. The
// lengths are dt / 2^k, exact, and the decision is each solve's residual, summed over ranks in
// fixed point: every rank subdivides alike. The next step starts at dt again, so a restart from
// any step's end repeats the run.
double ClothSolver::take_step() {
  const double dt = std::min(dt_, config_.time.end - clock_.time);
  motion_.step = static_cast<std::uint64_t>(clock_.step + 1);
  const int most = case_.integrator.max_halvings;
  ImplicitWork& w = implicit_;
  const long ticks = 1L << most;  // the step in units of its shortest sub-step
  long done = 0;
  w.halving = 0;
  while (done < ticks) {
    const double start = clock_.time + dt * static_cast<double>(done) / static_cast<double>(ticks);
    if (advance_motion(start, std::ldexp(dt, -w.halving), w.halving < most)) {
      done += ticks >> w.halving;
      if (w.halving > 0) ++w.substeps;
    } else {
      ++w.halving;
      ++w.halvings;
    }
  }
  if (w.halving > 0) {
    ++w.subdivided;
    w.most_halvings = std::max(w.most_halvings, static_cast<long>(w.halving));
    Log::info(
        "cloth: step %ld subdivided (cloth.implicit.max_halvings %d): its solve did not reach "
        "%s at dt = %.4g s; taken in sub-steps down to %.4g s (%ld steps subdivided so far, "
        "counted in the run report)",
        clock_.step + 1, most,
        case_.integrator.vbd ? "cloth.implicit.tolerance" : "cloth.implicit.newton_tolerance", dt,
        std::ldexp(dt, -w.halving), w.subdivided);
  }
  motion_.dt = dt;
  return dt;
}

// The motion over [start, start + dt]; false, the sheet left as it was, where the implicit solve
// did not converge and `may_fail` (a shorter sub-step is to be tried).
bool ClothSolver::advance_motion(double start, double dt, bool may_fail) {
  motion_.dt = dt;
  step_start_ = start;
  {
    auto t = timers_.scope("forces");
    energy_gradient(mesh_, *position_, reference_, model_, gradient_);
  }
  if (case_.integrator.block_jacobi) {  // before the repulsion joins the gradient
    auto t = timers_.scope("preconditioner");
    probe_diagonal_blocks(*position_, gradient_, 0, implicit_.colours);
  }
  if (self_contact_) {
    auto t = timers_.scope("self contact");
    self_contact_->add_gradient(gradient_);
  }
  if (case_.integrator.implicit) {
    auto t = timers_.scope("implicit solve");
    if (!(case_.integrator.vbd ? solve_vbd(may_fail) : solve_implicit(may_fail))) return false;
  }
  {
    auto t = timers_.scope("integrate");
    MotionParams motion = motion_;
    motion.thickness = projection_thickness();
    advance_vertices({&*position_, &*velocity_, &gradient_, &mass_, &pinned_, &first_bad_step_},
                     owned_, motion, colliders_);
  }
  if (!mesh_colliders_.empty()) {
    auto t = timers_.scope("mesh colliders");
    collide_with_meshes(step_start_, motion_.dt);
  }
  if (self_contact_) {  // last of the motion: no vertex passes its bound
    auto t = timers_.scope("self contact");
    self_contact_->clamp(*position_, *velocity_);
  }
  {
    auto t = timers_.scope("halo");
    const FieldRef fields[] = {position_, velocity_};
    halo_.gather(store_, fields);
  }
  if (self_contact_) {
    auto t = timers_.scope("contact gather");
    self_contact_->refresh(*position_);
  }
  return true;
}

long ClothSolver::first_unfinite_step() const {
  return static_cast<long>(read_element(first_bad_step_, 0));
}

ClothSolver::Diagnostics ClothSolver::diagnostics() {
  vertex_measures(mesh_, *position_, reference_, model_, measures_);
  vertex_energies(*position_, *velocity_, mass_, measures_, reference_.rest.area, owned_,
                  motion_.gravity, scratch_);
  const auto o = static_cast<std::uint32_t>(owned_);
  std::vector<std::uint32_t> bounds(7);
  for (std::uint32_t s = 0; s < bounds.size(); ++s) bounds[s] = s * o;
  DeviceVector<double> sums, largest;
  segmented_reduce(scratch_, DeviceVector<std::uint32_t>(bounds.begin(), bounds.end()), 6,
                   Reduction::sum, sums);
  std::vector<double> totals = to_host(sums, 6);
  global_sum(ranks_.comm, totals);
  vertex_extremes(*velocity_, measures_, owned_, scratch_);
  segmented_reduce(scratch_, DeviceVector<std::uint32_t>(bounds.begin(), bounds.begin() + 3), 2,
                   Reduction::max, largest);
  std::vector<double> extremes(2, std::numeric_limits<double>::lowest());
  if (owned_) extremes = to_host(largest, 2);
  Diagnostics d;
  d.kinetic = totals[0], d.potential = totals[1];
  d.stretch = totals[2], d.bend = totals[3], d.coupling = totals[4], d.hourglass = totals[5];
  d.max_speed = global_max(ranks_.comm, extremes[0]);
  d.max_strain = global_max(ranks_.comm, extremes[1]);
  if (self_contact_) d.contact = global_sum(ranks_.comm, self_contact_->energy());
  return d;
}

std::vector<double> ClothSolver::diagnostics_row() {
  const Diagnostics d = diagnostics();
  const double total = d.kinetic + d.potential + d.elastic() + d.contact;
  // The implicit steps' largest relative residual since the previous row (0: explicit); a row
  // written again at the same step (a run stopped early) repeats it.
  if (implicit_.steps != implicit_.row_steps) {
    implicit_.row_steps = implicit_.steps;
    implicit_.last_row_residual = implicit_.row_residual;
    implicit_.row_residual = 0;
  }
  const double residual = implicit_.last_row_residual;
  return {d.kinetic, d.potential, d.elastic(), total,        d.max_speed, d.stretch,
          d.bend,    d.coupling,  d.hourglass, d.max_strain, d.contact,   residual};
}

std::vector<io::VisualBlock> ClothSolver::visual_blocks() {
  const auto position = to_host(*position_, store_.size());
  const auto velocity = to_host(*velocity_, store_.size());
  vertex_measures(mesh_, *position_, reference_, model_, measures_);
  const auto measures = to_host(measures_, store_.size());
  stage_ = {};
  for (const std::uint32_t row : output_rows_) {
    const std::int64_t vertex = halo_.global_ids()[row];
    stage_.id.push_back(file_index_.empty() ? vertex : file_index_[vertex]);
    const V3 p = position[row], v = velocity[row];
    const VertexMeasures& m = measures[row];
    stage_.position.insert(stage_.position.end(), {float(p.x), float(p.y), float(p.z)});
    stage_.velocity.insert(stage_.velocity.end(), {float(v.x), float(v.y), float(v.z)});
    stage_.energy.push_back(static_cast<float>(m.energy()));
    stage_.strain_max.push_back(static_cast<float>(m.strain_max));
    stage_.strain_min.push_back(static_cast<float>(m.strain_min));
    stage_.mean_curvature.push_back(static_cast<float>(m.mean_curvature));
    stage_.gaussian_curvature.push_back(static_cast<float>(m.gaussian_curvature));
  }
  io::VisualBlock block;
  block.channel = "cloth";
  block.kind = io::VisualBlock::Kind::mesh;
  block.points = output_rows_.size();
  block.point_fields = {{"position", io::Dtype::f32, 3, stage_.position.data()},
                        {"velocity", io::Dtype::f32, 3, stage_.velocity.data()},
                        {"energy_density", io::Dtype::f32, 1, stage_.energy.data()},
                        {"strain_max", io::Dtype::f32, 1, stage_.strain_max.data()},
                        {"strain_min", io::Dtype::f32, 1, stage_.strain_min.data()},
                        {"mean_curvature", io::Dtype::f32, 1, stage_.mean_curvature.data()},
                        {"gaussian_curvature", io::Dtype::f32, 1, stage_.gaussian_curvature.data()},
                        {"id", io::Dtype::i64, 1, stage_.id.data()}};
  block.cells = output_triangles_.size() / 3;
  block.connectivity = visual_connectivity_.data();
  return {block};
}

void ClothSolver::write_series() {
  const io::VisualBlock block = visual_blocks().front();
  io::TriangleMeshPart part;
  part.vertices = block.points;
  part.vertex_fields = block.point_fields;
  part.triangles = block.cells;
  part.connectivity = output_triangles_.data();
  series(0).write(clock_.step, clock_.time, part);
}

template <class... Vectors>
std::size_t bytes_of(const Vectors&... v) {
  return (0 + ... + (v.capacity() * sizeof(typename Vectors::value_type)));
}

// Device memory this rank holds for the sheet: mesh, rest state, energy model and its scratch,
// vertex fields, halo plan.
std::size_t ClothSolver::device_bytes() const {
  const auto tensors = [](const SurfaceTensors<double>& t) {
    return bytes_of(t.normal, t.tangent, t.area, t.metric, t.curvature, t.valid);
  };
  return bytes_of(mesh_.positions, mesh_.corners, mesh_.ring_offsets, mesh_.ring_neighbours,
                  mesh_.boundary, mesh_.spoke_weights, mesh_.rim_weights) +
         bytes_of(reference_.ring_coordinates, reference_.ring_misfit) + tensors(reference_.rest) +
         bytes_of(model_.twin_slot, model_.normal, model_.normal_inverse_length,
                  model_.normal_sum_adjoint, model_.slots64.x, model_.slots64.n, model_.slots32.x,
                  model_.slots32.n) +
         store_.device_bytes() + bytes_of(gradient_, mass_, measures_, scratch_, pinned_) +
         bytes_of(implicit_.rhs, implicit_.residual, implicit_.product, implicit_.velocity,
                  implicit_.shifted, implicit_.gradient_plus, implicit_.gradient_minus,
                  implicit_.filtered, implicit_.free_motion, implicit_.free_product,
                  implicit_.point, implicit_.elastic, implicit_.newton, implicit_.step,
                  implicit_.contact_gradient, implicit_.contact_product) +
         bytes_of(implicit_.energy, implicit_.trial_energy) +
         bytes_of(implicit_.blocks, implicit_.colour, implicit_.constraints) +
         halo_.halo_plan().device_bytes() + (self_contact_ ? self_contact_->device_bytes() : 0);
}

// cloth.implicit.max_halvings: the run report's counts (vbd_ or newton_ by the integrator) and a
// line in the log when any step was subdivided.
void ClothSolver::report_halvings(Json& json) const {
  const bool vbd = case_.integrator.vbd;
  const std::string prefix = vbd ? "vbd_" : "newton_";
  json.value(prefix + "subdivided_steps", static_cast<long long>(implicit_.subdivided));
  json.value(prefix + "substeps", static_cast<long long>(implicit_.substeps));
  json.value(prefix + "halvings", static_cast<long long>(implicit_.halvings));
  json.value(prefix + "halvings_most", static_cast<long long>(implicit_.most_halvings));
  json.value(prefix + (vbd ? "retried_sweeps" : "retried_iterations"),
             static_cast<long long>(implicit_.retried_iterations));
  if (implicit_.subdivided > 0)
    Log::info(
        "cloth: %ld steps were subdivided (cloth.implicit.max_halvings %d) into %ld sub-steps, "
        "%ld halvings (at most %ld in one step), %ld %s of unconverged attempts redone",
        implicit_.subdivided, case_.integrator.max_halvings, implicit_.substeps, implicit_.halvings,
        implicit_.most_halvings, implicit_.retried_iterations,
        vbd ? "sweeps" : "Newton iterations");
}

void ClothSolver::report_fields(Json& json) const {
  json.value("vertices", static_cast<std::size_t>(global_vertices_));
  // The most any rank holds per vertex it owns (ghost rows included).
  const double per_vertex =
      global_max(ranks_.comm, static_cast<double>(device_bytes()) /
                                  static_cast<double>(std::max<std::size_t>(owned_, 1)));
  json.value("device_bytes_per_vertex", per_vertex);
  json.value("dt", dt_);
  json.value("ghost_rings", static_cast<long long>(kGhostRings));
  json.value("halo_transport", transport_.name());
  const IntegratorConfig& integrator = case_.integrator;
  json.value("integrator", integrator.vbd ? "vbd" : integrator.implicit ? "implicit" : "explicit");
  const double steps = static_cast<double>(std::max(implicit_.steps, 1L));
  if (integrator.max_halvings > 0) report_halvings(json);
  if (integrator.vbd) {
    json.value("vbd_sweeps_per_step", static_cast<double>(implicit_.newton_iterations) / steps);
    json.value("vbd_sweeps_most", static_cast<long long>(implicit_.most_newton));
    json.value("vbd_unconverged_steps", static_cast<long long>(implicit_.accepted_unconverged));
    json.value("vbd_unconverged_residual_largest", implicit_.largest_accepted);
    json.value("vbd_search_rounds_per_step", static_cast<double>(implicit_.search_rounds) / steps);
    if (coarse_.nodes > 0) {
      json.value("vbd_coarse_nodes", static_cast<long long>(coarse_.nodes));
      json.value("vbd_coarse_corrections", static_cast<long long>(coarse_.corrections));
      json.value("vbd_coarse_moved", static_cast<long long>(coarse_.moved));
      json.value("vbd_coarse_builds", static_cast<long long>(coarse_.builds));
      json.value("vbd_coarse_shifted", static_cast<long long>(coarse_.shifted));
      json.value("vbd_coarse_phi_drop", coarse_.phi_drop);
      json.value("vbd_coarse_operator_error", coarse_.operator_error);
      json.value("vbd_coarse_asymmetry", coarse_.asymmetry);
      json.value("vbd_coarse_step_length_mean",
                 coarse_.step_lengths / static_cast<double>(std::max(coarse_.moved, 1L)));
    }
    if (implicit_.accepted_unconverged > 0)
      Log::warn(
          "cloth: %ld of %ld vertex block descent steps were taken above their tolerance %.3g "
          "after cloth.implicit.sweeps = %ld sweeps (cloth.implicit.unconverged: accept): "
          "relative residual up to %.3g; the motion is not backward Euler's to that tolerance",
          implicit_.accepted_unconverged, implicit_.steps, integrator.newton_tolerance,
          integrator.sweeps, implicit_.largest_accepted);
  } else if (integrator.implicit) {
    json.value("cg_iterations_per_step", static_cast<double>(implicit_.iterations) / steps);
    json.value("cg_iterations_most", static_cast<long long>(implicit_.most_iterations));
    json.value("cg_negative_curvature_stops", static_cast<long long>(implicit_.curvature_stops));
    json.value("newton_iterations_per_step",
               static_cast<double>(implicit_.newton_iterations) / steps);
    json.value("newton_iterations_most", static_cast<long long>(implicit_.most_newton));
    json.value("cg_capped_solves", static_cast<long long>(implicit_.capped_solves));
    json.value("line_search_smallest_step", implicit_.smallest_step_length);
    if (two_level()) {
      json.value("cg_coarse_nodes", static_cast<long long>(coarse_.nodes));
      json.value("cg_coarse_builds", static_cast<long long>(coarse_.builds));
      json.value("cg_coarse_shifted", static_cast<long long>(coarse_.shifted));
      json.value("cg_coarse_dense_builds", static_cast<long long>(coarse_.dense_builds));
      json.value("cg_coarse_applications", static_cast<long long>(coarse_.applications));
      json.value("cg_coarse_operator_error", coarse_.operator_error);
      json.value("cg_coarse_asymmetry", coarse_.asymmetry);
      json.value("cg_two_level_asymmetry", coarse_.preconditioner_asymmetry);
      json.value("cg_two_level_held_largest", coarse_.held_largest);
      if (std::isfinite(coarse_.smallest_ratio))  // (no build yet: none)
        json.value("cg_two_level_ratio_smallest", coarse_.smallest_ratio);
    }
    if (barrier_contact())
      json.value("newton_friction_lags", static_cast<long long>(implicit_.friction_lags_run));
    if (speculative_contact()) {
      json.value("newton_landing_rows", static_cast<long long>(implicit_.landings));
      json.value("newton_landings_released", static_cast<long long>(implicit_.landings_released));
      json.value("newton_landing_updates", static_cast<long long>(implicit_.landing_updates_run));
    }
  }
  if (self_contact_) self_contact_->report(json);
}

void ClothSolver::save_state(SavedState& state) const {
  {
    auto t = timers_.scope("checkpoint copy");
    checkpoint_rows_ = std::make_shared<std::vector<double>>(6 * owned_);
    checkpoint_ids_ = std::make_shared<std::vector<std::int64_t>>(
        halo_.global_ids().begin(), halo_.global_ids().begin() + owned_);
    auto* rows = reinterpret_cast<V3*>(checkpoint_rows_->data());
    apron::copy(position_->begin(), position_->begin() + owned_, rows);
    apron::copy(velocity_->begin(), velocity_->begin() + owned_, rows + owned_);
  }
  const V3* rows = reinterpret_cast<const V3*>(checkpoint_rows_->data());
  const std::int64_t* ids = checkpoint_ids_->data();
  const std::size_t n = owned_;
  state.rows(
      "vertices", n,
      {{rows, [this, n](std::uint64_t first) { return device_checksum(*position_, n, first); }},
       {rows + n, [this, n](std::uint64_t first) { return device_checksum(*velocity_, n, first); }},
       {ids, [ids, n](std::uint64_t first) {
          return rows_checksum(ids, sizeof(std::int64_t), n, first);
        }}});
  state.keep(checkpoint_rows_);
  state.keep(checkpoint_ids_);
  state.scalar("vertices", static_cast<double>(global_vertices_));
}

// Every rank reads a share of the rows, all ranks swap them, and each keeps its local rows by
// id (owned and ghosts alike: the ghosts' values are their owners').
void ClothSolver::restore(const LoadedState& state) {
  build(false);
  if (state.total_rows("vertices") != global_vertices_)
    throw std::runtime_error(state.where() + ": the checkpoint holds " +
                             std::to_string(state.total_rows("vertices")) +
                             " vertices, the case's sheet " + std::to_string(global_vertices_));
  const SheetState all = gather_rows(state.column<V3>("vertices", "position"),
                                     state.column<V3>("vertices", "velocity"),
                                     state.column<std::int64_t>("vertices", "id"));
  std::vector<V3> position(store_.size()), velocity(store_.size());
  for (std::size_t row = 0; row < store_.size(); ++row) {
    const auto v = static_cast<std::size_t>(halo_.global_ids()[row]);
    position[row] = all.position[v];
    velocity[row] = all.velocity[v];
  }
  apron::copy(position.begin(), position.end(), position_->begin());
  apron::copy(velocity.begin(), velocity.end(), velocity_->begin());
  if (self_contact_) self_contact_->refresh(*position_);
}

// Collective: the rows every rank read, as the whole sheet's state by vertex index. Every index
// must appear exactly once (a damaged id column is refused on every rank).
ClothSolver::SheetState ClothSolver::gather_rows(const std::vector<V3>& position,
                                                 const std::vector<V3>& velocity,
                                                 const std::vector<std::int64_t>& ids) const {
  const std::size_t count = ids.size();
  const int local = static_cast<int>(count);
  std::vector<int> counts(ranks_.size), displs(ranks_.size);
  MPI_Allgather(&local, 1, MPI_INT, counts.data(), 1, MPI_INT, ranks_.comm);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<std::int64_t> all_ids(global_vertices_);
  MPI_Allgatherv(ids.data(), local, MPI_INT64_T, all_ids.data(), counts.data(), displs.data(),
                 MPI_INT64_T, ranks_.comm);
  std::vector<double> all_values(6 * global_vertices_);
  for (int& c : counts) c *= 6;
  for (int& d : displs) d *= 6;
  std::vector<double> mine(6 * count);  // (position, velocity) per row
  for (std::size_t i = 0; i < count; ++i) {
    const V3 p = position[i], v = velocity[i];
    std::copy_n(std::array<double, 6>{p.x, p.y, p.z, v.x, v.y, v.z}.data(), 6, &mine[6 * i]);
  }
  MPI_Allgatherv(mine.data(), 6 * local, MPI_DOUBLE, all_values.data(), counts.data(),
                 displs.data(), MPI_DOUBLE, ranks_.comm);
  SheetState state{std::vector<V3>(global_vertices_), std::vector<V3>(global_vertices_)};
  std::vector<std::uint8_t> seen(global_vertices_, 0);
  for (std::size_t i = 0; i < global_vertices_; ++i) {
    const std::int64_t v = all_ids[i];
    if (v < 0 || static_cast<std::size_t>(v) >= global_vertices_ || seen[v]++)
      throw std::runtime_error("the checkpoint's vertex ids are not the sheet's 0.." +
                               std::to_string(global_vertices_ - 1) + " once each: it is damaged");
    const double* r = &all_values[6 * i];
    state.position[v] = {r[0], r[1], r[2]};
    state.velocity[v] = {r[3], r[4], r[5]};
  }
  return state;
}

WorkloadSpec cloth_spec() {
  return workload_spec_of<ClothSolver>(
      "cloth", "Cosserat-surface cloth on a triangle mesh (time-stepping)", cloth_schema());
}

}  // namespace apron::cloth
