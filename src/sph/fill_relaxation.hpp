// The fill of fluid next to walls the particle lattice does not align with (a tilted mesh tank).
//
// Lattice points kept where their cell's centre is on the fluid side leave a mean gap of dx/2 to
// such a wall (the right volume of water), but the gap of each point is anywhere in [0, dx): the
// points closest to the wall sit closer than dx to its boundary particles, too dense, and are
// kicked off it at the start. Kept dx/2 off the wall instead, the gaps are dx/2 to 3dx/2 and the
// water slumps about a spacing to close them. The relaxation keeps the first fill's particles and
// pushes apart every pair closer than dx (position-based, Jacobi), moving only the fluid particles
// near a wall: the overlap spreads over the layers next to it instead of being kicked out.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/box.hpp"
#include "kernels/common/vec.hpp"

namespace apron::sph {

struct FillRelaxation {
  double spacing = 0;     // dx: pairs closer than this are pushed apart
  double wall_reach = 0;  // fluid particles with a boundary particle this near may move
  int iterations = 0;

  // A point's final place depends on the points no further than this from it, so a rank that
  // relaxes the points within this margin of its box places its own points exactly as one rank
  // relaxing all of them would.
  double reach() const { return wall_reach + 2 * spacing * iterations; }
};

// `iterations` Jacobi sweeps: each movable fluid particle moves by the mean over its pairs closer
// than dx of the push that would part that pair to dx (half of it against another movable
// particle, all of it against a boundary or a still fluid particle). Deterministic for a given
// set of points: pairs are summed in the order of the fluid ids and the walls' coordinates.
void relax_fill(const FillRelaxation& r, const std::vector<Vec4>& walls,
                const std::vector<std::int64_t>& id, std::vector<Vec4>& fluid);

}  // namespace apron::sph
