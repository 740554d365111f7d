# cmake -DPATCH_FILE=<file.patch> -P apply-patch.cmake, run in the source tree to patch (-p1).
# FetchContent runs its PATCH_COMMAND again whenever that command changes, on a tree it does not
# extract again, so a plain `patch` would fail on the second run. This applies the patch only when
# it is not in the tree yet, and says which file and which tree when it fits neither way.
cmake_minimum_required(VERSION 3.16)
if(NOT PATCH_FILE OR NOT EXISTS "${PATCH_FILE}")
  message(FATAL_ERROR "apply-patch.cmake: PATCH_FILE '${PATCH_FILE}' does not exist")
endif()
find_program(APRON_PATCH_PROGRAM patch)
if(NOT APRON_PATCH_PROGRAM)
  message(FATAL_ERROR "apply-patch.cmake: the 'patch' program is needed to apply ${PATCH_FILE} "
    "(Debian: apt-get install patch)")
endif()

# Already applied: the reverse patch fits exactly. -f: never ask; --dry-run: touch nothing.
execute_process(
  COMMAND "${APRON_PATCH_PROGRAM}" -p1 -R -f -s --dry-run -i "${PATCH_FILE}"
  RESULT_VARIABLE reverse_rc OUTPUT_QUIET ERROR_QUIET)
if(reverse_rc EQUAL 0)
  message(STATUS "apron: ${PATCH_FILE} is already applied in ${CMAKE_CURRENT_SOURCE_DIR}")
  return()
endif()

# Check first, so a patch that does not fit leaves the tree untouched (no half-applied hunks).
execute_process(
  COMMAND "${APRON_PATCH_PROGRAM}" -p1 -N -f --dry-run -i "${PATCH_FILE}"
  RESULT_VARIABLE check_rc OUTPUT_VARIABLE check_out ERROR_VARIABLE check_out)
if(NOT check_rc EQUAL 0)
  message(FATAL_ERROR "apron: ${PATCH_FILE} does not apply to ${CMAKE_CURRENT_SOURCE_DIR} "
    "(not the release the patch was made for?):\n${check_out}")
endif()
execute_process(
  COMMAND "${APRON_PATCH_PROGRAM}" -p1 -N -f --no-backup-if-mismatch -i "${PATCH_FILE}"
  RESULT_VARIABLE apply_rc OUTPUT_VARIABLE apply_out ERROR_VARIABLE apply_out)
if(NOT apply_rc EQUAL 0)
  message(FATAL_ERROR "apron: applying ${PATCH_FILE} failed:\n${apply_out}")
endif()
message(STATUS "apron: applied ${PATCH_FILE}")
