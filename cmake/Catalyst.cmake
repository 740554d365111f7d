# ParaView Catalyst (the legacy vtkCPProcessor API that Debian 12's ParaView 5.11 packages) for
# in-situ visualisation. AUTO: on when ParaView is found; ON: required; OFF: never looked for.
# Only io/catalyst_adaptor.cpp sees ParaView; without it io/catalyst_off.cpp takes its place and
# nothing else changes.
set(APRON_ENABLE_CATALYST AUTO CACHE STRING "In-situ visualisation with ParaView Catalyst: AUTO, ON or OFF")
set_property(CACHE APRON_ENABLE_CATALYST PROPERTY STRINGS AUTO ON OFF)
set(APRON_CATALYST OFF)

if(NOT APRON_ENABLE_CATALYST STREQUAL "OFF")
  # ParaView's CMake package needs these found first (Debian: libfreetype-dev libglew-dev
  # libxml2-dev libx11-dev libnetcdf-dev); without them it fails half-way with a wall of text.
  find_package(Freetype QUIET)
  find_package(GLEW QUIET)
  find_package(LibXml2 QUIET)
  find_package(X11 QUIET)
  find_package(netCDF QUIET)
  # ParaView's config looks for Python with its development files; it must be the interpreter
  # ParaView was built against (Debian's /usr/bin/python3), not whichever python3 is first on
  # PATH, or two libpythons end up in one process. Its targets carry their own Python link.
  find_package(ParaView 5.9 QUIET COMPONENTS Catalyst PythonCatalyst)
  if(ParaView_FOUND)
    # ParaView asks its VTK only for the modules those components name, which leaves the link
    # interfaces of some modules they pull in (hdf5, xdmf3, netcdf) without their packages.
    find_package(VTK QUIET PATHS "${ParaView_DIR}/vtk" NO_DEFAULT_PATH
                 COMPONENTS CommonDataModel IOParallelXML ParallelMPI hdf5 xdmf3 netcdf)
  endif()
  if(ParaView_FOUND AND VTK_FOUND)
    set(APRON_CATALYST ON)
    message(STATUS "apron: ParaView Catalyst ${ParaView_VERSION} (in-situ visualisation)")
  elseif(APRON_ENABLE_CATALYST STREQUAL "ON")
    message(FATAL_ERROR
      "APRON_ENABLE_CATALYST=ON but ParaView was not found (Debian: apt-get install paraview-dev "
      "python3-paraview libutfcpp-dev liblz4-dev libdouble-conversion-dev libboost-dev "
      "libfreetype-dev libglew-dev libxml2-dev libnetcdf-dev libx11-dev; or scripts/install-deps.sh)")
  else()
    message(STATUS "apron: no ParaView found: built without Catalyst (in-situ visualisation)")
  endif()
endif()
