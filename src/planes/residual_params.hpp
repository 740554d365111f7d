// The residual round's settings, one struct that the case file's `planes:` section fills
// (PlanesConfig) and the detector reads (DetectorParams).
#pragma once

#include <cstdint>

namespace apron::planes {

// A second round over the points that the first left on no plane and outside every plane's
// band (band times its rms; the whole plane, not only its rectangle): their own octree, votes and
// peaks give candidate planes (from the octree's minimum of points on). A face whose octree nodes
// also held a neighbouring face (a box's side beside its top or the floor) holds its nodes alone
// once the neighbour's points are gone, but few enough of them pass that its clusters hold too
// few points: a candidate's inliers are the points on no plane within its band and its
// rectangle, grown over `passes` (below), and it is a plane when they are at least the detector's
// min_plane_points (or, with the points its band shares with other planes, as many, most of
// them its own). Two candidates on one plane, their rectangles touching, are one. One on a
// first-round plane (the detector's merge angle and distance) adds its points to it; the others are
// new planes. On by default: without it the stairs' box sides and treads next to boxes are
// missed (13-15 of 21 required planes against 21 of 21); on one H200 it costs about 4 ms at 20M
// points and 2.7 ms at 1M (bench/NOTES.md).
struct ResidualParams {
  bool on = true;   // false: one round, as in the paper (`planes.residual_pass`)
  double band = 3;  // `residual_band`
  // Its clusters and candidates no thicker than `noise` times the first round's noise (the
  // median of its planes' rms): with the surfaces' points gone, nodes cut by the cloud's bounding
  // box hold slabs of outliers only, thin enough to pass the node test, and curved or cluttered
  // surfaces give tilted clusters about twice the noise thick (`residual_noise`).
  double noise = 1.5;
  // A candidate's rectangle (its clusters' spread at first, then its inliers' extents) widened by
  // this of its half-widths on each side; its band: `band` times the larger of its rms and the
  // first round's noise (`residual_widen`).
  double widen = 0.5;
  // Its peaks need this fraction of the detector's min_votes: a face's few clusters there, each
  // alone in its cell, vote less than the first round's many (the candidates' inliers decide;
  // `residual_votes`).
  double votes = 0.15;
  // The candidates' inliers taken this many times, each time within the rectangle of those taken
  // before, widened (a face's clusters cover part of it: the inliers grow over the rest;
  // `residual_passes`).
  int passes = 3;
  // A candidate's inliers over its rectangle at least this times the first round's median (a
  // surface's sampling density against outliers spread in a band; `residual_density`).
  double density = 0.1;
  // A candidate also takes the points of a first-round plane that lie outside that plane's band:
  // its clusters took them although they lie off its fit (a box side's strip in the floor's or
  // the box top's nodes), and they leave it when the candidate is a plane
  // (`residual_reclaim`; false: the points on a first-round plane stay on it).
  bool reclaim = true;
  // The round's octree is built from at most about this many of its points (every k-th in the
  // octree's order, k the same on every rank; 0: all of them). It only seeds the candidates,
  // whose inliers are then taken from all the points: above a million points the residual
  // points are mostly outliers, which cost the octree's coarse levels their whole count each
  // (`residual_octree_points`).
  std::uint64_t octree_points = 500000;
  // The round's octree tests its nodes for clusters from this level on (the first round's
  // first_level where deeper; the levels above are not run: they would only drop the nodes of
  // too few points). Each tested level costs its launches and one wait whatever its points, and
  // the coarse nodes of the round's points hold mostly outliers, but 5 moved the largest normal
  // error of matched planes both ways by up to 1 degree over 51 scenes (bench/NOTES.md): 2, the
  // first round's, by default
  // (`residual_first_level`).
  int first_level = 2;
  // The round's octree trims its nodes' fits this many times (OctreeParams::trim_passes; -1:
  // the first round's). Each pass is two launches a tested level, whatever the level's points
  // (`residual_trim_passes`).
  int trim_passes = -1;
};

}  // namespace apron::planes
