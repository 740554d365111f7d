// TimeSchedule (src/runtime/schedule.hpp): events at multiples of the interval, computed from the
// time, so that no interval, however small against the time, stops it from advancing.
#include <gtest/gtest.h>

#include "runtime/schedule.hpp"

namespace apron {
namespace {

TEST(TimeSchedule, EventsAtMultiplesWithinRoundingOfTheStepSum) {
  TimeSchedule s(0.05, 0.0);
  int events = 0;
  double t = 0;
  for (int step = 1; step <= 1000; ++step) {
    t += 0.001;  // 50 steps per event; the sum of dt is not exactly a multiple
    if (s.due(t)) {
      ++events;
      EXPECT_NEAR(t, 0.05 * events, 1e-9) << "step " << step;
      s.passed(t);
      EXPECT_NEAR(s.next(), 0.05 * (events + 1), 1e-12);
    }
  }
  EXPECT_EQ(events, 20);
}

TEST(TimeSchedule, TinyIntervalGivesOneEventPerStepAndAlwaysAdvances) {
  TimeSchedule s(1e-20, 0.0);
  double t = 0;
  for (int step = 1; step <= 100; ++step) {
    t += 1e-4;
    ASSERT_TRUE(s.due(t));
    s.passed(t);
    ASSERT_GT(s.next(), t) << "the next event must lie beyond the time that passed";
  }
}

TEST(TimeSchedule, TimeFarBeyondTheIntervalCatchesUpAtOnce) {
  auto s = TimeSchedule::resumed(0.1, 0.1);  // e.g. a checkpoint claiming t = 1e9
  ASSERT_TRUE(s.due(1e9));
  s.passed(1e9);
  EXPECT_GT(s.next(), 1e9);
  EXPECT_LE(s.next(), 1e9 + 0.1 + 1e-6);
  EXPECT_FALSE(s.due(1e9));
}

TEST(TimeSchedule, DisabledIsNeverDue) {
  TimeSchedule s(0, 0);
  EXPECT_FALSE(s.enabled());
  EXPECT_FALSE(s.due(1e300));
  EXPECT_TRUE(TimeSchedule(0.1, 0.0, true).due(0.0));
  EXPECT_FALSE(TimeSchedule(0.1, 0.0).due(0.0));
}

}  // namespace
}  // namespace apron
