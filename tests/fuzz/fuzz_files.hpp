// For the fuzz targets whose parsers read files: a private folder per process, on tmpfs where
// there is one, and the input written into it.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace apron::fuzz {

// The folder of this process (one target per process: `target` names it on the first call),
// removed with everything in it when the process exits.
inline const std::filesystem::path& work_dir(const char* target) {
  namespace fs = std::filesystem;
  struct Folder {
    fs::path path;
    ~Folder() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Folder folder{[target] {
    std::error_code ec;
    const fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("apron_" + std::string(target) + "_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }()};
  return folder.path;
}

// Writes the input bytes to `path`; a file that cannot be written is the harness's failure.
inline void write_input(const std::filesystem::path& path, const std::uint8_t* data,
                        std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

}  // namespace apron::fuzz
