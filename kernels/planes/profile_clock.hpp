#pragma once
// The planes' step profiler: with APRON_OCTREE_PROFILE set, steps timed on the host, each after a
// device synchronisation (which slows the run: for finding where the time goes, not for
// figures), collected into one line for stderr: printed by the caller (take), or at the clock's
// end under its label. Unset: nothing is synchronised or timed.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/common/backend.hpp"

namespace apron::planes {

class ProfileClock {
 public:
  explicit ProfileClock(const char* label = nullptr)
      : on_(std::getenv("APRON_OCTREE_PROFILE") != nullptr), label_(label) {}
  ProfileClock(const ProfileClock&) = delete;
  ProfileClock& operator=(const ProfileClock&) = delete;
  ~ProfileClock() {
    if (on_ && label_ && !line_.empty()) std::fprintf(stderr, "%s ms:%s\n", label_, line_.c_str());
  }
  bool on() const { return on_; }
  void start() {
    if (!on_) return;
    device_synchronize();
    last_ = now();
    line_.clear();
  }
  // " step milliseconds" since the last start or lap.
  void lap(const char* step) {
    if (!on_) return;
    device_synchronize();
    const double t = now();
    append(" %s %.3f", step, 1e3 * (t - last_));
    last_ = t;
  }
  // " what=value", a count beside the times.
  void note(const char* what, std::size_t value) {
    if (on_) append(" %s=%zu", what, value);
  }
  // The line so far, which starts anew.
  std::string take() {
    std::string line;
    line.swap(line_);
    return line;
  }

 private:
  template <class... Args>
  void append(const char* format, Args... args) {
    char buf[96];
    std::snprintf(buf, sizeof buf, format, args...);
    line_ += buf;
  }
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  bool on_;
  const char* label_;
  double last_ = 0;
  std::string line_;
};

}  // namespace apron::planes
