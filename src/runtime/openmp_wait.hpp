// How the OpenMP backend's idle threads wait between parallel regions.
//
// libgomp's idle threads spin for GOMP_SPINCOUNT iterations (300,000 by default: a few hundred
// microseconds) after each parallel region before they sleep. apron runs thousands of short
// regions per step (every Thrust call is one). On a node where other programs also run, the
// spinning threads hold the cores that the team's descheduled threads need, so every region's
// barrier waits for the scheduler (the bunny analysis took 83-1027 ms instead of 32-38 ms beside
// two busy processes). A short spin keeps the fast hand-over between regions on an idle node and
// gives the core back quickly on a busy one (bench/NOTES.md, "OpenMP waiting").
#pragma once

namespace apron {

// The spin count apron sets when the user chose none.
inline constexpr const char* kDefaultSpinCount = "10000";

// libgomp reads its settings once, when it is loaded, so the default can only be given by
// starting the program again with it in the environment: this does that (execv of
// /proc/self/exe with the same arguments), before MPI starts, when the build is the OpenMP
// backend and the user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT. Returns if it did not
// (or could not) restart.
void default_openmp_waiting(char** argv);

// What governs the waiting in this process, for `apron info`.
const char* openmp_waiting_source();

}  // namespace apron
