#include "engine/prescribed_motion.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace apron {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Rodrigues' rotation by `angle` about the unit `axis`.
std::array<double, 9> axis_rotation(const std::array<double, 3>& axis, double angle) {
  const double c = std::cos(angle), s = std::sin(angle), t = 1 - c;
  const double x = axis[0], y = axis[1], z = axis[2];
  return {t * x * x + c,     t * x * y - s * z, t * x * z + s * y, t * x * y + s * z, t * y * y + c,
          t * y * z - s * x, t * x * z - s * y, t * y * z + s * x, t * z * z + c};
}

// sin(omega t + phase) - sin(phase): zero at t = 0.
Signal oscillation(double omega, double since, double phase) {
  const double angle = omega * since + phase;
  return {std::sin(angle) - std::sin(phase), omega * std::cos(angle),
          -omega * omega * std::sin(angle)};
}

// The signal times the ramp 0.5 (1 - cos(pi t / ramp)) up to t = ramp (1 after; none for ramp 0):
// the product rule for its derivatives. The ramp starts with zero value and slope, so a ramped
// motion starts with zero velocity.
Signal ramped(const Signal& f, double since, double ramp) {
  if (!(since < ramp)) return f;
  const double w = kPi / ramp, c = std::cos(w * since), s = std::sin(w * since);
  const Signal r{0.5 * (1 - c), 0.5 * w * s, 0.5 * w * w * c};
  return {r.value * f.value, r.rate * f.value + r.value * f.rate,
          r.acceleration * f.value + 2 * r.rate * f.rate + r.value * f.acceleration};
}

std::array<double, 3> table_translation(const std::vector<std::array<double, 4>>& rows, double t) {
  if (t <= rows.front()[0]) return {rows.front()[1], rows.front()[2], rows.front()[3]};
  if (t >= rows.back()[0]) return {rows.back()[1], rows.back()[2], rows.back()[3]};
  std::size_t i = 1;
  while (rows[i][0] < t) ++i;
  const auto &a = rows[i - 1], &b = rows[i];
  const double w = (t - a[0]) / (b[0] - a[0]);
  return {a[1] + w * (b[1] - a[1]), a[2] + w * (b[2] - a[2]), a[3] + w * (b[3] - a[3])};
}

std::array<double, 3> table_velocity(const std::vector<std::array<double, 4>>& rows, double t) {
  if (t < rows.front()[0] || t >= rows.back()[0]) return {0, 0, 0};
  std::size_t i = 1;
  while (rows[i][0] <= t) ++i;
  const auto &a = rows[i - 1], &b = rows[i];
  const double dt = b[0] - a[0];
  return {(b[1] - a[1]) / dt, (b[2] - a[2]) / dt, (b[3] - a[3]) / dt};
}

std::vector<std::array<double, 4>> read_table(config::MapReader& r, const std::string& file) {
  std::ifstream in(file);
  if (!in) r.fail("file", "cannot open the motion table '" + file + "'");
  std::vector<std::array<double, 4>> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    for (char& ch : line)
      if (ch == ',') ch = ' ';
    std::istringstream words(line);
    std::array<double, 4> row;
    std::string extra;
    if (!(words >> row[0])) continue;  // a blank or comment line
    const std::string place = file + ":" + std::to_string(number);
    if (!(words >> row[1] >> row[2] >> row[3]) || (words >> extra))
      r.fail("file", place + ": a row is 't dx dy dz' (4 numbers)");
    for (double v : row)
      if (!std::isfinite(v)) r.fail("file", place + ": a value is not a finite number");
    if (!rows.empty() && !(row[0] > rows.back()[0]))
      r.fail("file", place + ": time " + std::to_string(row[0]) +
                         " does not increase (the row before is at " +
                         std::to_string(rows.back()[0]) + "); sort the rows by time");
    // Interpolation takes differences of neighbouring rows: they must be finite too.
    if (!rows.empty())
      for (int k = 0; k < 4; ++k)
        if (!std::isfinite(row[k] - rows.back()[k]))
          r.fail("file", place + ": the step from the row before overflows a double");
    rows.push_back(row);
  }
  if (rows.size() < 2) r.fail("file", file + ": a motion table needs at least 2 rows");
  return rows;
}

}  // namespace

std::array<double, 3> RigidPose::apply(const std::array<double, 3>& x0) const {
  std::array<double, 3> out;
  for (int i = 0; i < 3; ++i) {
    out[i] = pivot[i] + translation[i];
    for (int k = 0; k < 3; ++k) out[i] += rotation[3 * i + k] * (x0[k] - pivot[k]);
  }
  return out;
}

Signal PrescribedMotion::oscillation_at(double since) const {
  return ramped(oscillation(2 * kPi / period, since, phase), since, ramp);
}

RigidPose PrescribedMotion::at(double t) const {
  RigidPose pose;
  const double since = std::max(0.0, t - start);
  switch (kind) {
    case Kind::none:
      break;
    case Kind::sinusoid: {
      const double s = t < start ? 0 : oscillation_at(since).value;
      for (int d = 0; d < 3; ++d) pose.translation[d] = amplitude[d] * s;
      break;
    }
    case Kind::table:
      pose.translation = table_translation(rows, t);
      break;
    case Kind::rotation: {
      const double angle =
          period > 0 ? angle_amplitude * oscillation_at(since).value : rate * since;
      pose.rotation = axis_rotation(axis, angle);
      pose.pivot = pivot;
      break;
    }
  }
  return pose;
}

RigidVelocity PrescribedMotion::velocity_at(double t) const {
  RigidVelocity v;
  if (t < start) return v;
  const double since = t - start;
  switch (kind) {
    case Kind::none:
      break;
    case Kind::sinusoid: {
      const Signal s = oscillation_at(since);
      for (int d = 0; d < 3; ++d) {
        v.linear[d] = amplitude[d] * s.rate;
        v.linear_acceleration[d] = amplitude[d] * s.acceleration;
      }
      break;
    }
    case Kind::table:
      v.linear = table_velocity(rows, t);
      break;
    case Kind::rotation: {
      const Signal s = period > 0 ? oscillation_at(since) : Signal{};
      const double angle_rate = period > 0 ? angle_amplitude * s.rate : rate;
      const double angle_acceleration = angle_amplitude * s.acceleration;
      for (int d = 0; d < 3; ++d) {
        v.angular[d] = angle_rate * axis[d];
        v.angular_acceleration[d] = angle_acceleration * axis[d];
      }
      v.centre = pivot;
      break;
    }
  }
  return v;
}

PrescribedMotion read_motion(config::MapReader& solid) {
  PrescribedMotion m;
  if (!solid.has("motion")) return m;
  config::MapReader r = solid.child("motion");
  const std::string type = r.choice("type", {"sinusoid", "table", "rotation"});
  m.start = r.get<double>("start", 0.0);
  if (!std::isfinite(m.start) || m.start < 0) r.fail("start", "must be a time >= 0");
  if (type == "sinusoid") {
    m.kind = PrescribedMotion::Kind::sinusoid;
    m.amplitude = r.vec3("amplitude");
    m.period = r.positive("period");
    m.phase = r.get<double>("phase_degrees", 0.0) * kPi / 180;
  } else if (type == "table") {
    m.kind = PrescribedMotion::Kind::table;
    m.file = config::resolve_input_path(r, "file", r.get<std::string>("file"), "motion table");
    m.rows = read_table(r, m.file);
  } else {
    m.kind = PrescribedMotion::Kind::rotation;
    m.axis = r.vec3("axis");
    const double length =
        std::sqrt(m.axis[0] * m.axis[0] + m.axis[1] * m.axis[1] + m.axis[2] * m.axis[2]);
    if (!(length > 0) || !std::isfinite(length)) r.fail("axis", "must be a non-zero vector");
    for (double& a : m.axis) a /= length;
    m.pivot = r.vec3("pivot");
    if (r.has("rate_degrees") == r.has("amplitude_degrees"))
      r.fail("rate_degrees",
             "give either rate_degrees (a constant rate, degrees per second) or "
             "amplitude_degrees with period (an oscillation), not both or none");
    if (r.has("rate_degrees")) {
      m.rate = r.get<double>("rate_degrees") * kPi / 180;
    } else {
      m.angle_amplitude = r.get<double>("amplitude_degrees") * kPi / 180;
      m.period = r.positive("period");
    }
  }
  if (r.has("ramp")) {
    if (m.period == 0)
      r.fail("ramp", "only an oscillation (a sinusoid, a rotation with a period) ramps up");
    m.ramp = r.get<double>("ramp");
    if (!std::isfinite(m.ramp) || m.ramp < 0) r.fail("ramp", "must be a time >= 0 [s]");
  }
  r.finish();
  return m;
}

}  // namespace apron
