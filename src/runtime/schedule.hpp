// Events every `every` simulated seconds (output series, checkpoints by simulated time), at
// t = k * every. The next event is computed from the time, never accumulated: an interval far
// below the time step, or a time far beyond the interval, still moves it past the current time
// (one event per step at most), where `next += every` would spin or never catch up.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace apron {

class TimeSchedule {
 public:
  TimeSchedule() = default;
  // The first event after `time` (or at it, when `at_time` holds); every <= 0: never due.
  TimeSchedule(double every, double time, bool at_time = false) : every_(every) {
    if (every_ > 0) next_ = at_time ? time : next_after(time);
  }
  static TimeSchedule resumed(double every, double next) {
    TimeSchedule s;
    s.every_ = every;
    s.next_ = next;
    return s;
  }

  bool enabled() const { return every_ > 0; }
  // Within a millionth of the interval, so that rounding in t = sum of dt does not skip an
  // event (a tolerance relative to t would grow with it and skip events late in long runs).
  bool due(double time) const { return every_ > 0 && time >= next_ - kSlack * every_; }
  // After an event at `time`: the next multiple of `every` beyond it.
  void passed(double time) {
    if (every_ > 0) next_ = next_after(time);
  }
  double next() const { return next_; }

 private:
  double next_after(double time) const {
    const double next = (std::floor(time / every_ + kSlack) + 1) * every_;
    return next > time ? next : std::nextafter(time, std::numeric_limits<double>::infinity());
  }

  static constexpr double kSlack = 1e-6;  // of an interval
  double every_ = 0;
  double next_ = 0;
};

}  // namespace apron
