# FindLASzip: a LASzip the user installed (it installs headers and a library, no CMake package).
# Sets LASzip_FOUND and LASzip_LIBRARY and makes the imported target LASzip::LASzip, whose
# include directory holds laszip_api.h. Hints: LASzip_ROOT or CMAKE_PREFIX_PATH.
find_path(LASzip_INCLUDE_DIR laszip_api.h PATH_SUFFIXES laszip)
find_library(LASzip_LIBRARY NAMES laszip laszip3)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LASzip REQUIRED_VARS LASzip_LIBRARY LASzip_INCLUDE_DIR)
mark_as_advanced(LASzip_INCLUDE_DIR LASzip_LIBRARY)
if(LASzip_FOUND AND NOT TARGET LASzip::LASzip)
  add_library(LASzip::LASzip UNKNOWN IMPORTED)
  set_target_properties(LASzip::LASzip PROPERTIES IMPORTED_LOCATION "${LASzip_LIBRARY}"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${LASzip_INCLUDE_DIR}")
endif()
