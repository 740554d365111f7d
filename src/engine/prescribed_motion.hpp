// Rigid motion prescribed by a case for a solid (a piston wave maker, a flap, a gate lifted at t0):
// a sinusoidal translation, a piecewise-linear translation from a table file, or a rotation about
// an axis (oscillating or at a constant rate). Read from `motion: {...}` beside a solid; the
// workloads that move solids (SPH walls, cloth colliders) ask it for the pose at a time.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "config/yaml_reader.hpp"

namespace apron {

// x(t) = rotation (x0 - pivot) + pivot + translation, for a point x0 of the solid at rest.
struct RigidPose {
  std::array<double, 9> rotation{1, 0, 0, 0, 1, 0, 0, 0, 1};  // row-major
  std::array<double, 3> pivot{0, 0, 0};
  std::array<double, 3> translation{0, 0, 0};

  std::array<double, 3> apply(const std::array<double, 3>& x0) const;
};

// The velocity field of a rigid motion at one time: v(x) = linear + angular x (x - centre) at a
// point x of the solid where it is then; and its acceleration field, a(x) = linear_acceleration +
// angular_acceleration x r + angular x (angular x r), r = x - centre.
struct RigidVelocity {
  std::array<double, 3> linear{0, 0, 0};
  std::array<double, 3> angular{0, 0, 0};  // [rad/s]
  std::array<double, 3> centre{0, 0, 0};
  std::array<double, 3> linear_acceleration{0, 0, 0};
  std::array<double, 3> angular_acceleration{0, 0, 0};  // [rad/s^2]
};

// A function of time with its first two derivatives.
struct Signal {
  double value = 0, rate = 0, acceleration = 0;
};

struct PrescribedMotion {
  enum class Kind { none, sinusoid, table, rotation };
  Kind kind = Kind::none;
  double start = 0;  // the motion begins at this time; before it the solid rests
  // An oscillation's amplitude rises from 0 to full over `ramp` seconds after the start (half a
  // cosine): a wave maker started so sends a wave train without the abrupt start's transients.
  double ramp = 0;
  // sinusoid: translation amplitude sin(2 pi (t - start) / period + phase)
  std::array<double, 3> amplitude{0, 0, 0};
  double period = 0, phase = 0;  // phase in radians
  // table: (time, dx, dy, dz) rows, times increasing; held at the ends
  std::string file;
  std::vector<std::array<double, 4>> rows;
  // rotation: about `axis` through `pivot`, angle_amplitude sin(2 pi (t - start) / period) when
  // period > 0, else rate (t - start); radians
  std::array<double, 3> axis{0, 0, 1}, pivot{0, 0, 0};
  double angle_amplitude = 0, rate = 0;

  bool moves() const { return kind != Kind::none; }
  // The oscillation's sin(2 pi t / period + phase) - sin(phase), ramped, `since` after the start.
  Signal oscillation_at(double since) const;
  RigidPose at(double t) const;
  // The time derivative of at(t) (a table's: its segment's slope; zero before the start) and its
  // own (a table's: zero, its kinks' impulses left out).
  RigidVelocity velocity_at(double t) const;
};

// Reads `motion` of a solid's mapping, if present: {type: sinusoid, amplitude: [x, y, z],
// period, phase_degrees, start, ramp} | {type: table, file, start} | {type: rotation, axis, pivot,
// amplitude_degrees and period (and ramp), or rate_degrees, start}. A table's file: one row per
// line, "t dx dy dz" (commas or spaces; '#' comments), times strictly increasing; errors name the
// file and line.
PrescribedMotion read_motion(config::MapReader& solid);

}  // namespace apron
