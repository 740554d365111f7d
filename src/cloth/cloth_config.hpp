// The cloth workload's own section of a case file (its schema, registered with the workload):
// `cloth` holds the sheet (a generated grid or a mesh file), the material of the Cosserat
// surface, what holds it (pinned vertices) and what it meets (colliders).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/case_config.hpp"
#include "config/mesh_shape.hpp"
#include "engine/prescribed_motion.hpp"
#include "kernels/cloth/mesh.hpp"
#include "kernels/common/box.hpp"

namespace apron::cloth {

// Where the sheet comes from: a grid (GridSpec, in the z = 0 plane centred on the origin, then
// moved to `centre`) or a triangle mesh file (OBJ, PLY, OFF), scaled and offset.
struct SheetConfig {
  bool from_file = false;
  GridSpec grid;
  std::array<double, 3> centre{0, 0, 0};
  std::string file;
  double scale = 1;
  std::array<double, 3> offset{0, 0, 0};
};

// Material of the surface (energy.hpp's Material) and its motion, mu r_tt + gamma r_t + K r = mu F.
struct MaterialConfig {
  double density = 0.1;    // mu: mass per unit area [kg/m^2]
  double stretch = 100;    // zeta [N/m]
  double bend = 1e-4;      // xi [N m]
  double coupling = 0;     // phi, the stretch-bend ("wrinkling") term [N]
  double hourglass = 0.1;  // h: hourglass control, relative to stretch (energy.hpp)
  double damping = 0;      // gamma [kg/(m^2 s)]
};

// A collider: an analytic sphere, box or floor, or a closed triangle mesh (a body, a table) placed
// by the case and moved rigidly by `motion` (the kinds SPH's moving solids take).
struct ColliderConfig {
  std::string kind;  // sphere | box | floor | mesh
  std::array<double, 3> centre{}, lo{}, hi{};
  double radius = 0, height = 0;
  config::MeshShape mesh;   // kind mesh
  PrescribedMotion motion;  // kind mesh
  double friction = 0;      // Coulomb coefficient (cloth.friction unless the collider sets one)
};

// The time integrator. "explicit": symplectic Euler at cfl x the stability limit of the sheet's
// fastest waves on its shortest edge. "implicit": backward Euler (kernels/cloth/implicit.hpp) at a
// step the user sets from the motion, by Newton's method with a line search on the step's
// incremental potential until the force residual is `newton_tolerance` times the first one (at
// most `newton_iterations`), each linear system solved by conjugate gradients until its residual
// is `tolerance` times its first (at most `max_iterations`), preconditioned by the masses ("mass")
// or by the Hessian's probed diagonal blocks ("block_jacobi"). "vbd": the same backward-Euler step
// solved by vertex block descent (Chen et al. 2024): Gauss-Seidel sweeps over the probing colours,
// each vertex moved by its own 3x3 block of M' + dt^2 H, until the residual is `tolerance` (stored
// as newton_tolerance) of its scale, at most `sweeps`; `implicit` is true for it too. A vbd step
// still above its tolerance after `sweeps` ends the run (exit 1), unless `unconverged: accept`
// (accept_unconverged): then it is taken as the published method takes it (a fixed number of
// sweeps, the residual left), its residual in the diagnostics and the count said at the end.
// `max_halvings` (implicit and vbd, default 0: off): a step whose solve does not reach its
// tolerance (a vbd step in `sweeps` sweeps, Newton's in `newton_iterations` or where its line
// search stalls) is taken again from its start in two halves, a half that does not converge in two
// quarters, and so on up to dt / 2^max_halvings (the rest of the step at the shortest length
// reached); only the shortest length's solve refuses (or accepts) as above. Outputs stay on the
// dt grid.
// `friction` (implicit only): "inside" (the default) puts the colliders' Coulomb friction in the
// step's potential (kernels/cloth/implicit.hpp's friction_force: smoothed Coulomb, the normal
// impulse lagged from the step's start, friction_predict's stiffness to the apex for the rows
// Newton's step would carry through it), so that the solve sees which rows stick; "after" takes
// it from the impulse that held each row after the frictionless solve.
// `line_search` (vbd only): "vertex" backtracks each vertex's move on its own share of the
// potential (its inertia and the energies of its 2-ring, which no other vertex of its colour
// touches), "colour" one step length for the whole colour on the whole potential.
// `contact_start` (vbd only, rings, 0 = off): the free vertices within that many rings of one
// held on a collider start the sweeps with their fall into it cut by (1 - d / rings).
// `coarse` (vbd only, off when absent): a Galerkin coarse correction of the sweeps' iterate on
// multilinear hat functions over a lattice of the rest positions, `factor` shortest edges apart,
// before every `every`-th sweep (src/cloth/cloth_coarse.cpp), its operator probed and factored
// at each correction (`refresh: correction`) or at a step's first only (`refresh: step`).
// `preconditioner: two_level` (implicit): Newton's conjugate gradients preconditioned by the
// block-Jacobi blocks plus, added, the same lattice's Galerkin correction P Ac^-1 P^T
// (src/cloth/cloth_two_level.cpp); `coarse: {factor, refresh: newton | step}` sets its lattice
// and whether Ac is probed once a (sub-)step (the default) or at every Newton iteration;
// `solve: auto | banded | dense` how Ac^-1 is applied: by the host's banded triangular solves, or
// as one dense product on the device with Ac^-1 formed there at each build (auto: dense where the
// device is a GPU, whose CG would otherwise wait for the host's sequential solves).
struct IntegratorConfig {
  bool implicit = false;
  bool vbd = false;
  long sweeps = 100;
  bool accept_unconverged = false;   // vbd only
  int max_halvings = 0;              // an unconverged step retried at dt / 2^k
  bool vertex_line_search = true;    // vbd only
  int contact_start_rings = 0;       // vbd only
  double coarse_factor = 0;          // vbd only; 0: no coarse correction
  long coarse_every = 1;             // vbd only: a correction before every this many sweeps
  bool coarse_refresh_step = false;  // vbd only: the coarse operator probed once a step
  double dt = 0;                     // implicit only [s]
  double tolerance = 1e-3;
  long max_iterations = 100;
  bool block_jacobi = false;  // the probed diagonal blocks (two_level's smoother too)
  bool two_level = false;     // blocks plus the coarse lattice's correction (coarse_factor)
  enum class CoarseSolve { automatic, banded, dense } coarse_solve = CoarseSolve::automatic;
  double newton_tolerance = 1e-2;
  long newton_iterations = 20;
  bool friction_inside = true;       // implicit only: friction in the step's potential
  bool barrier_contact = true;       // implicit only: contact as a barrier in the step's potential
  bool speculative_contact = false;  // implicit only: rows reaching a collider within the step held
  double barrier_stiffness = 1e4;    // with barrier_contact: kappa_i dt^2 / m_i (dt configured)
};

// The sheet against itself (kernels/cloth/self_contact.hpp): non-adjacent primitives closer than
// cloth.thickness repel with k/2 (t - d)^2, k = stiffness x the mean vertex mass / dt^2 (so that
// the contact's frequency stays well inside the explicit step's limit), and no vertex moves more
// than `bound` x (its distance to the nearest primitive - the hard gap) in a step, so that no two
// non-adjacent parts ever come closer than hard_gap x thickness. The pair list holds pairs
// within thickness + skin and is rebuilt when a vertex has moved skin / 2.
struct SelfCollisionConfig {
  bool enabled = false;
  double skin = 0;  // [m]; 0: cloth.thickness
  double stiffness = 0.05;
  double bound = 0.4;
  double hard_gap = 0.5;  // relative to the thickness
};

struct ClothCase : config::WorkloadSettings {
  SheetConfig sheet;
  MaterialConfig material;
  std::array<double, 3> gravity{0, 0, -9.81};
  double cfl = 0.5;  // dt = cfl x the explicit stability limit of the sheet's waves
  IntegratorConfig integrator;
  std::vector<Box> pinned;  // vertices whose rest position lies inside one are held there
  std::vector<ColliderConfig> colliders;
  double friction = 0.3;  // Coulomb coefficient at colliders that set none
  double thickness = 0;   // contact offset from collider surfaces [m]
  SelfCollisionConfig self_collision;
  // The internal forces' arithmetic past the strains (energy.hpp's GradientPrecision): "mixed"
  // (float32 where relative accuracy is enough, 1.6x faster on a GPU; the explicit default) or
  // "float64" (the implicit integrator's only choice).
  std::string precision = "mixed";
};

std::shared_ptr<const ClothCase> read_cloth_case(const config::CaseConfig& c,
                                                 config::MapReader& root);
config::WorkloadSchema cloth_schema();

inline const ClothCase& cloth_case(const config::CaseConfig& c) {
  return c.settings_as<ClothCase>();
}

}  // namespace apron::cloth
