// Output files are written under a temporary name and renamed when complete, so a reader never
// sees a half-written file and a crash never destroys the previous version.
#pragma once

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace apron::io {

inline std::filesystem::path temporary_name(const std::filesystem::path& path) {
  return path.string() + ".tmp";
}

inline void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  const auto tmp = temporary_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp.string() + ": cannot open for writing");
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(tmp.string() + ": write failed (disk full?)");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace apron::io
