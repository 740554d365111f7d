#include "cloth/cloth_config.hpp"

#include <cmath>
#include <string>

#include "config/yaml_reader.hpp"

namespace apron::cloth {
namespace {

using config::MapReader;

// The grid's two counts: cells along x and y, each 1..4096 (16.8M vertices at most).
GridSpec read_grid(MapReader& r) {
  GridSpec g;
  const auto size = r.vec3("size");  // z ignored: the sheet lies in the z = 0 plane
  g.size_x = size[0], g.size_y = size[1];
  if (!(g.size_x > 0 && g.size_y > 0 && std::isfinite(g.size_x * g.size_y)))
    r.fail("size", "must be [x, y, 0] with x, y > 0 (metres)");
  const auto cells = r.vec3("cells");
  for (int d = 0; d < 2; ++d)
    if (!(cells[d] >= 1 && cells[d] <= 4096 && cells[d] == std::floor(cells[d])))
      r.fail("cells", "must be [nx, ny, 0] with whole numbers from 1 to 4096");
  g.nx = static_cast<int>(cells[0]), g.ny = static_cast<int>(cells[1]);
  g.perturbed = r.get<bool>("perturbed", false);
  g.jitter = r.in_range("jitter", 0, 0.3, g.jitter);
  const long seed = r.get<long>("seed", 1);
  if (seed < 0) r.fail("seed", "must be 0 or positive");
  g.seed = static_cast<std::uint64_t>(seed);
  return g;
}

SheetConfig read_sheet(MapReader& cloth) {
  SheetConfig s;
  const bool grid = cloth.has("grid"), mesh = cloth.has("mesh");
  if (grid == mesh)
    cloth.fail("grid", "give exactly one of grid: {size, cells, ...} or mesh: {file}");
  if (grid) {
    MapReader r = cloth.child("grid");
    s.grid = read_grid(r);
    s.centre = r.vec3("centre", s.centre);
    r.finish();
    return s;
  }
  MapReader r = cloth.child("mesh");
  s.from_file = true;
  s.file = config::resolve_input_path(r, "file", r.get<std::string>("file"), "mesh file");
  s.scale = r.positive("scale", 1.0);
  s.offset = r.vec3("offset", s.offset);
  r.finish();
  return s;
}

MaterialConfig read_material(MapReader r) {
  MaterialConfig m;
  m.density = r.in_range("density", 1e-6, 1e6, m.density);
  m.stretch = r.in_range("stretch", 1e-6, 1e12, m.stretch);
  m.bend = r.in_range("bend", 0, 1e6, m.bend);
  m.coupling = r.in_range("coupling", -1e6, 1e6, m.coupling);
  // The energy is positive definite only while the coupling is below the geometric mean of
  // the stretch and bend stiffnesses (P is positive definite; zeta e^2 + phi e k + xi k^2).
  if (m.coupling * m.coupling >= 4 * m.stretch * m.bend && m.coupling != 0)
    r.fail("coupling", "must satisfy coupling^2 < 4 stretch bend (else the energy has no minimum)");
  // Up to 1: the explicit step's limit counts stretch alone (the drapes ran at up to 3).
  m.hourglass = r.in_range("hourglass", 0, 1, m.hourglass);
  m.damping = r.in_range("damping", 0, 1e9, m.damping);
  r.finish();
  return m;
}

ColliderConfig read_collider(MapReader r, double default_friction) {
  ColliderConfig c;
  c.kind = r.choice("kind", {"sphere", "box", "floor", "mesh"});
  c.friction = r.in_range("friction", 0, 10, default_friction);
  if (c.kind == "mesh") {
    c.mesh = config::read_mesh_shape(r, false);  // inside and outside need a closed surface
    c.motion = read_motion(r);
  } else if (c.kind == "sphere") {
    c.centre = r.vec3("centre");
    c.radius = r.positive("radius");
  } else if (c.kind == "box") {
    const Box b = config::read_box(r);
    c.lo = {b.lo[0], b.lo[1], b.lo[2]}, c.hi = {b.hi[0], b.hi[1], b.hi[2]};
  } else {
    c.height = r.get<double>("height", 0.0);
    if (!std::isfinite(c.height)) r.fail("height", "must be a finite number (metres)");
  }
  r.finish();
  return c;
}

// preconditioner: two_level's lattice (cloth.implicit.coarse, optional): its factor, as vbd's, and
// whether its operator is probed once a (sub-)step (the default) or at every Newton iteration.
void read_two_level_lattice(MapReader& r, IntegratorConfig& c) {
  c.coarse_factor = 8;
  c.coarse_refresh_step = true;  // as fast or faster in every measurement (bench/NOTES.md)
  if (!r.has("coarse")) return;
  MapReader k = r.child("coarse");
  c.coarse_factor = k.in_range("factor", 4, 1e6, c.coarse_factor);
  if (k.has("every"))
    k.fail("every",
           "applies only with 'integrator: vbd' (the two-level preconditioner's coarse part acts "
           "at every conjugate-gradient iteration)");
  c.coarse_refresh_step = k.choice("refresh", {"newton", "step"}, "step") == "step";
  const std::string solve = k.choice("solve", {"auto", "banded", "dense"}, "auto");
  c.coarse_solve = solve == "banded"  ? IntegratorConfig::CoarseSolve::banded
                   : solve == "dense" ? IntegratorConfig::CoarseSolve::dense
                                      : IntegratorConfig::CoarseSolve::automatic;
  k.finish();
}

IntegratorConfig read_integrator(MapReader& cloth) {
  IntegratorConfig c;
  const std::string name = cloth.choice("integrator", {"explicit", "implicit", "vbd"}, "explicit");
  c.implicit = name != "explicit";
  c.vbd = name == "vbd";
  MapReader r = cloth.child("implicit");
  if (c.implicit) {
    if (!r.has("dt"))
      r.fail("dt", "is required with 'integrator: " + name +
                       "' (the step in seconds, set by the motion: e.g. 1e-3)");
    c.dt = r.in_range("dt", 1e-9, 10);
    const long halvings = r.get<long>("max_halvings", 0);
    if (halvings < 0 || halvings > 20)
      r.fail("max_halvings", "must be between 0 and 20 (halvings of the step; 0: off)");
    c.max_halvings = static_cast<int>(halvings);
  }
  if (c.vbd) {
    for (const char* key : {"max_iterations", "preconditioner", "newton_tolerance",
                            "newton_iterations", "friction", "contact", "barrier_stiffness"})
      if (r.has(key))
        r.fail(key,
               "applies only with 'integrator: implicit' (vbd takes dt, max_halvings, tolerance, "
               "sweeps, unconverged, line_search, contact_start, coarse)");
    c.newton_tolerance = r.in_range("tolerance", 1e-12, 0.5, c.newton_tolerance);
    c.sweeps = r.get<long>("sweeps", c.sweeps);
    if (c.sweeps < 1 || c.sweeps > 100000) r.fail("sweeps", "must be between 1 and 100000");
    c.accept_unconverged = r.choice("unconverged", {"refuse", "accept"}, "refuse") == "accept";
    c.vertex_line_search = r.choice("line_search", {"vertex", "colour"}, "vertex") == "vertex";
    const long rings = r.get<long>("contact_start", 0);
    if (rings < 0 || rings > 1000) r.fail("contact_start", "must be between 0 and 1000 (rings)");
    c.contact_start_rings = static_cast<int>(rings);
    if (r.has("coarse")) {
      MapReader k = r.child("coarse");
      c.coarse_factor = k.in_range("factor", 4, 1e6, 8.0);
      c.coarse_every = k.get<long>("every", 1);
      if (c.coarse_every < 1 || c.coarse_every > 100000)
        k.fail("every", "must be between 1 and 100000 (sweeps)");
      c.coarse_refresh_step = k.choice("refresh", {"correction", "step"}, "correction") == "step";
      k.finish();
    }
  } else if (c.implicit) {
    c.tolerance = r.in_range("tolerance", 1e-12, 0.5, c.tolerance);
    c.max_iterations = r.get<long>("max_iterations", c.max_iterations);
    if (c.max_iterations < 1 || c.max_iterations > 100000)
      r.fail("max_iterations", "must be between 1 and 100000");
    const std::string preconditioner =
        r.choice("preconditioner", {"mass", "block_jacobi", "two_level"}, "mass");
    c.block_jacobi = preconditioner != "mass";
    c.two_level = preconditioner == "two_level";
    if (c.two_level) read_two_level_lattice(r, c);
    c.newton_tolerance = r.in_range("newton_tolerance", 1e-12, 0.5, c.newton_tolerance);
    c.newton_iterations = r.get<long>("newton_iterations", c.newton_iterations);
    if (c.newton_iterations < 1 || c.newton_iterations > 1000)
      r.fail("newton_iterations", "must be between 1 and 1000");
    c.friction_inside = r.choice("friction", {"after", "inside"}, "inside") == "inside";
    const std::string contact =
        r.choice("contact", {"barrier", "speculative", "at_start"}, "barrier");
    c.speculative_contact = contact == "speculative";
    c.barrier_contact = contact == "barrier";
    if (r.has("barrier_stiffness") && !c.barrier_contact)
      r.fail("barrier_stiffness", "applies only with 'contact: barrier'");
    c.barrier_stiffness = r.in_range("barrier_stiffness", 1, 1e8, c.barrier_stiffness);
    if (c.barrier_contact && !c.friction_inside)
      r.fail("friction",
             "must be 'inside' with 'contact: barrier' (the default: the barrier's friction is "
             "a potential in Newton's step); 'after' needs 'contact: speculative' or 'at_start'");
    for (const char* key : {"sweeps", "unconverged", "line_search", "contact_start", "coarse"})
      if (r.has(key) && !(c.two_level && std::string(key) == "coarse"))
        r.fail(key, std::string("applies only with 'integrator: vbd'") +
                        (std::string(key) == "coarse" ? " or 'preconditioner: two_level'" : ""));
  } else {
    for (const char* key :
         {"dt", "max_halvings", "tolerance", "max_iterations", "preconditioner", "newton_tolerance",
          "newton_iterations", "friction", "contact", "barrier_stiffness", "sweeps", "unconverged",
          "line_search", "contact_start", "coarse"})
      if (r.has(key))
        r.fail(key,
               "applies only with 'integrator: implicit' or 'vbd' (the explicit step follows cfl)");
  }
  r.finish();
  return c;
}

// Needs the thickness (the distance the sheet keeps from itself) and the explicit integrator
// (its contact forces and bound are taken per explicit step).
SelfCollisionConfig read_self_collision(MapReader& cloth, const ClothCase& c) {
  SelfCollisionConfig s;
  MapReader r = cloth.child("self_collision");
  s.enabled = r.get<bool>("enabled", false);
  s.skin = r.in_range("skin", 0, 1e3, s.skin);
  s.stiffness = r.in_range("stiffness", 1e-4, 0.5, s.stiffness);
  s.bound = r.in_range("bound", 0.01, 0.49, s.bound);
  s.hard_gap = r.in_range("hard_gap", 0, 0.9, s.hard_gap);
  r.finish();
  if (!s.enabled) return s;
  if (!(c.thickness > 0))
    cloth.fail("thickness",
               "must be above 0 with cloth.self_collision.enabled: it is the distance the sheet "
               "keeps from itself (e.g. a third of the sheet's edge length)");
  return s;
}

}  // namespace

std::shared_ptr<const ClothCase> read_cloth_case(const config::CaseConfig&, MapReader& root) {
  auto c = std::make_shared<ClothCase>();
  MapReader cloth = root.child("cloth");
  c->sheet = read_sheet(cloth);
  c->material = read_material(cloth.child("material"));
  c->gravity = cloth.vec3("gravity", c->gravity);
  c->cfl = cloth.in_range("cfl", 0.01, 1, c->cfl);
  c->integrator = read_integrator(cloth);
  for (auto& box : cloth.list("pinned")) {
    c->pinned.push_back(config::read_box(box));
    box.finish();
  }
  c->friction = cloth.in_range("friction", 0, 10, c->friction);
  for (auto& collider : cloth.list("colliders"))
    c->colliders.push_back(read_collider(collider, c->friction));
  c->thickness = cloth.in_range("thickness", 0, 1e3, c->thickness);
  c->self_collision = read_self_collision(cloth, *c);
  c->precision =
      cloth.choice("precision", {"mixed", "float64"}, c->integrator.implicit ? "float64" : "mixed");
  if (c->integrator.implicit && c->precision == "mixed")
    cloth.fail("precision",
               "must be float64 with 'integrator: implicit' (its Hessian products difference the "
               "gradient over a small probe, which float32 round-off would swamp)");
  cloth.finish();
  return c;
}

config::WorkloadSchema cloth_schema() {
  // No domain: the sheet's own bounds are what the ranks split.
  return {config::kTimeStepping & ~config::kDomain,
          [](const config::CaseConfig& c, MapReader& root) {
            return std::shared_ptr<const config::WorkloadSettings>(read_cloth_case(c, root));
          }};
}

}  // namespace apron::cloth
