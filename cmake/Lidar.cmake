# The lidar libraries behind the LAZ and E57 readers (io/laz_reader.cpp, io/e57_reader.cpp):
# LASzip (LAZ, compressed LAS) and libE57Format (ASTM E57, with Xerces-C). apron_find_lidar()
# makes the interface target apron_lidar, which carries the libraries found and the definitions
# APRON_HAVE_LASZIP / APRON_HAVE_E57 that switch the readers on; a build without them refuses
# .laz and .e57 files with a message naming what to install.
#
# Each library, in this order:
# 1. a user's installed copy (find_package): LASzip through cmake/FindLASzip.cmake (LASzip installs
#    no CMake package), libE57Format through its own E57FormatConfig.cmake (an installed LASzip
#    3.5.0 lacks cmake/patches' fixes: forged files can crash it). Pass
#    -DCMAKE_DISABLE_FIND_PACKAGE_LASzip=ON (or _E57Format) to build the pinned release instead;
# 2. the pinned release source, from the local tarball (APRON_LASZIP_TARBALL /
#    APRON_E57_TARBALL; default: ../shared/vendor next to the checkout) or its release URL, its
#    SHA256 checked, built here as one static library of its sources: only the library (neither
#    project's own CMake runs, so none of their tests, tools, LTO or global flags come along), with
#    the compiler and flags of the including build, so the sanitizer and fuzz builds link it too.
#    libE57Format needs Xerces-C 3.2 (Debian: libxerces-c-dev); without it E57 stays off.
# APRON_LASZIP / APRON_E57 (default ON): OFF leaves the format refused.
include_guard(GLOBAL)
include(FetchContent)
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")  # FindLASzip.cmake

option(APRON_LASZIP "Read LAZ through LASzip (installed, else the pinned release built here)" ON)
option(APRON_E57 "Read E57 through libE57Format (installed, else the pinned release built here)" ON)

set(APRON_LASZIP_VERSION 3.5.0)
set(APRON_LASZIP_SHA256 229be53d504f095400fe2d684abda0ee13ac150087cfcb26c026979e6bf47c73)
set(APRON_LASZIP_URL "https://github.com/LASzip/LASzip/archive/refs/tags/${APRON_LASZIP_VERSION}.tar.gz")
set(APRON_E57_VERSION 3.4.0)
set(APRON_E57_SHA256 85f4ec3a2613e40fd0c2b65793995733683efd0c0234951a1a303b37940e4ed3)
set(APRON_E57_URL "https://github.com/asmaloney/libE57Format/archive/refs/tags/v${APRON_E57_VERSION}.tar.gz")

# The shared vendor directory beside the checkouts, found relative to this file (as for Kokkos).
foreach(_lib LASZIP E57)
  if(_lib STREQUAL "LASZIP")
    set(_file LASzip-${APRON_LASZIP_VERSION}.tar.gz)
  else()
    set(_file libE57Format-${APRON_E57_VERSION}.tar.gz)
  endif()
  get_filename_component(_vendored "${CMAKE_CURRENT_LIST_DIR}/../../shared/vendor/${_file}" ABSOLUTE)
  set(_default "")
  if(EXISTS "${_vendored}")
    set(_default "${_vendored}")
  endif()
  set(APRON_${_lib}_TARBALL "${_default}" CACHE FILEPATH
    "Local ${_file} to build instead of downloading it (empty: download)")
endforeach()

# _apron_fetch_source(NAME PREFIX [PATCH]): extracts the pinned source of NAME (its tarball
# checked against APRON_<PREFIX>_SHA256), applies cmake/patches/PATCH if given, and sets
# <name>_SOURCE_DIR in the caller.
set(_apron_lidar_cmake_dir "${CMAKE_CURRENT_LIST_DIR}")
function(_apron_fetch_source name prefix)
  set(tarball "${APRON_${prefix}_TARBALL}")
  if(tarball)
    if(NOT EXISTS "${tarball}")
      message(FATAL_ERROR "apron: APRON_${prefix}_TARBALL=${tarball} does not exist")
    endif()
    # Checked here as well as by FetchContent, whose mismatch error is buried in a sub-build log.
    file(SHA256 "${tarball}" actual)
    if(NOT actual STREQUAL APRON_${prefix}_SHA256)
      message(FATAL_ERROR "apron: ${tarball} is not the pinned ${name} release: its SHA256 is "
        "${actual}, expected ${APRON_${prefix}_SHA256}")
    endif()
    set(url "${tarball}")
  else()
    set(url "${APRON_${prefix}_URL}")
  endif()
  message(STATUS "apron: building ${name} ${APRON_${prefix}_VERSION} from ${url}")
  set(patch "")
  if(ARGC GREATER 2)
    set(patch PATCH_COMMAND "${CMAKE_COMMAND}"
      -DPATCH_FILE=${_apron_lidar_cmake_dir}/patches/${ARGV2}
      -P "${_apron_lidar_cmake_dir}/apply-patch.cmake")
  endif()
  FetchContent_Declare(${name} URL "${url}" URL_HASH SHA256=${APRON_${prefix}_SHA256}
                       DOWNLOAD_EXTRACT_TIMESTAMP FALSE ${patch})
  # Populate only: the library is defined below from its sources, not by the project's CMake.
  FetchContent_GetProperties(${name})
  string(TOLOWER ${name} lname)
  if(NOT ${lname}_POPULATED)
    FetchContent_Populate(${name})
  endif()
  set(${lname}_SOURCE_DIR "${${lname}_SOURCE_DIR}" PARENT_SCOPE)
endfunction()

# Vendored code keeps its own warnings (it is not ours to fix); -w silences them under -Werror.
function(_apron_vendored_library target)
  add_library(${target} STATIC ${ARGN})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_STANDARD 17
                                             CXX_EXTENSIONS OFF)
  target_compile_options(${target} PRIVATE -w)
endfunction()

function(_apron_laszip out)
  find_package(LASzip QUIET)
  if(LASzip_FOUND)
    message(STATUS "apron: LASzip from ${LASzip_LIBRARY}")
    set(${out} LASzip::LASzip PARENT_SCOPE)
    return()
  endif()
  # The patch: forged VLRs and layer sizes crashed LASzip or sized huge allocations (fuzzing).
  _apron_fetch_source(LASzip LASZIP laszip-${APRON_LASZIP_VERSION}-forged-files.patch)
  set(src "${laszip_SOURCE_DIR}/src")
  # The library's own source list (src/CMakeLists.txt), without its dlopen wrapper (dll/).
  _apron_vendored_library(apron_laszip
    ${src}/mydefs.cpp ${src}/lasmessage.cpp ${src}/arithmeticdecoder.cpp
    ${src}/arithmeticencoder.cpp ${src}/arithmeticmodel.cpp ${src}/integercompressor.cpp
    ${src}/lasindex.cpp ${src}/lasinterval.cpp ${src}/lasquadtree.cpp
    ${src}/lasreaditemcompressed_v1.cpp ${src}/lasreaditemcompressed_v2.cpp
    ${src}/lasreaditemcompressed_v3.cpp ${src}/lasreaditemcompressed_v4.cpp ${src}/lasreadpoint.cpp
    ${src}/laswriteitemcompressed_v1.cpp ${src}/laswriteitemcompressed_v2.cpp
    ${src}/laswriteitemcompressed_v3.cpp ${src}/laswriteitemcompressed_v4.cpp
    ${src}/laswritepoint.cpp ${src}/laszip.cpp ${src}/laszip_dll.cpp)
  target_compile_definitions(apron_laszip PRIVATE LASZIPDLL_EXPORTS UNORDERED HAVE_UNORDERED_MAP=1)
  target_include_directories(apron_laszip PRIVATE ${src})
  target_include_directories(apron_laszip SYSTEM PUBLIC ${laszip_SOURCE_DIR}/dll
                                                        ${laszip_SOURCE_DIR}/include/laszip)
  set(${out} apron_laszip PARENT_SCOPE)
endfunction()

function(_apron_e57 out)
  find_package(E57Format 3 CONFIG QUIET)
  if(E57Format_FOUND)
    message(STATUS "apron: libE57Format from ${E57Format_DIR}")
    set(${out} E57Format PARENT_SCOPE)
    return()
  endif()
  find_package(XercesC 3.2 QUIET)
  if(NOT XercesC_FOUND)
    message(STATUS "apron: E57 off: libE57Format needs Xerces-C 3.2 (Debian: libxerces-c-dev)")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  _apron_fetch_source(E57Format E57)
  file(GLOB sources "${e57format_SOURCE_DIR}/src/*.cpp")
  _apron_vendored_library(apron_e57format ${sources})
  # What the project's CMake would generate: a static library exports nothing.
  set(gen "${CMAKE_CURRENT_BINARY_DIR}/e57format-generated")
  file(WRITE "${gen}/E57Export.h.in"
    "#pragma once\n#define E57_DLL\n#define E57_NO_EXPORT\n#define E57_DEPRECATED [[deprecated]]\n")
  configure_file("${gen}/E57Export.h.in" "${gen}/E57Export.h" COPYONLY)
  target_compile_definitions(apron_e57format PRIVATE
    REVISION_ID="E57Format-${APRON_E57_VERSION}-apron" E57_VALIDATION_LEVEL=1 CRCPP_USE_CPP11
    CRCPP_BRANCHLESS)
  target_include_directories(apron_e57format PRIVATE ${e57format_SOURCE_DIR}/src
                                                     ${e57format_SOURCE_DIR}/extern/CRCpp/inc)
  target_include_directories(apron_e57format SYSTEM PUBLIC ${e57format_SOURCE_DIR}/include ${gen})
  target_link_libraries(apron_e57format PRIVATE XercesC::XercesC)
  set(${out} apron_e57format PARENT_SCOPE)
endfunction()

function(apron_find_lidar)
  add_library(apron_lidar INTERFACE)
  if(APRON_LASZIP)
    _apron_laszip(laszip)
    target_link_libraries(apron_lidar INTERFACE ${laszip})
    target_compile_definitions(apron_lidar INTERFACE APRON_HAVE_LASZIP=1)
  endif()
  if(APRON_E57)
    _apron_e57(e57)
    if(e57)
      target_link_libraries(apron_lidar INTERFACE ${e57})
      target_compile_definitions(apron_lidar INTERFACE APRON_HAVE_E57=1)
    endif()
  endif()
endfunction()
