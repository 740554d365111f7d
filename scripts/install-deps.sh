#!/usr/bin/env bash
# Installs the Debian 12 packages apron needs to build and test, skipping what is present.
# Runs apt-get as root, through sudo otherwise.
set -euo pipefail
packages=(build-essential cmake git pkg-config python3
          libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools libyaml-cpp-dev
          libgtest-dev libbenchmark-dev libthrust-dev
          python3-h5py python3-numpy python3-paraview  # checkpoint and ParaView tests
          python3-yaml        # the conformance suite's specs (tests/conformance)
          python3-pip         # laspy, lazrs and pye57, which Debian does not package (below)
          libxerces-c-dev     # libE57Format's XML parser (E57 point clouds, cmake/Lidar.cmake)
          python3-matplotlib  # jobs/scaling draws its plots with it
          clang-14 libclang-rt-14-dev libomp-14-dev  # the fuzz targets (tests/fuzz, libFuzzer)
          slurm-wlm munge     # the jobs/ tests start a one-node SLURM cluster
          # In-situ visualisation (ParaView Catalyst); ParaView's CMake package needs the -dev
          # packages after it, Xvfb gives the Catalyst tests' screenshots a display.
          paraview-dev libutfcpp-dev liblz4-dev libdouble-conversion-dev libboost-dev
          libfreetype-dev libglew-dev libxml2-dev libnetcdf-dev libx11-dev xvfb xauth)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "apron: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "apron: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The tests' Python (the first python3 on PATH, which CMake also finds) reads HDF5 with h5py,
# the conformance specs with PyYAML, writes the LAS and LAZ test files with laspy (the reference
# writer; lazrs is its LAZ backend) and the E57 ones with pye57 (libE57Format's binding).
if ! python3 -c "import h5py, numpy, yaml, laspy, lazrs, pye57" 2>/dev/null; then
  echo "apron: installing h5py, numpy, PyYAML, laspy, lazrs and pye57 for $(command -v python3)"
  # Debian's own Python refuses pip installs unless told (PEP 668); laspy is pure Python on numpy,
  # lazrs and pye57 come as binary wheels.
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet h5py numpy pyyaml laspy lazrs pye57
fi
