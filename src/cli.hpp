// The command line of apron (usage: `apron --help`). Returns the process exit status: 0 success,
// 1 run-time failure, 2 bad input, 3 stopped early with a checkpoint.
#pragma once

namespace apron {

int run_cli(int argc, char** argv);

}  // namespace apron
