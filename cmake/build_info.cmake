# build_info.cmake — what rlx_system_info() (`rlx --version`) says about
# the build: the git commit at configure time (not at every commit: that
# would relink every program), the build type, sanitizers, the CUDA
# architectures. Definitions of src/runtime/system_info.c alone, so a new
# value recompiles that one file.
find_package(Git QUIET)
set(RLX_GIT_COMMIT unknown)
if(GIT_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${PROJECT_SOURCE_DIR} describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE RLX_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT RLX_GIT_COMMIT)
    set(RLX_GIT_COMMIT unknown)
  endif()
endif()
set(RLX_INFO_DEFS RLX_GIT_COMMIT="${RLX_GIT_COMMIT}" RLX_BUILD_TYPE="${CMAKE_BUILD_TYPE}")
if(RLX_SANITIZE)
  list(APPEND RLX_INFO_DEFS RLX_BUILD_SANITIZE=1)
endif()
if(RLX_HAVE_CUDA)
  string(REPLACE ";" " " RLX_CUDA_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")  # one definition, not a list
  list(APPEND RLX_INFO_DEFS RLX_CUDA_ARCHS="${RLX_CUDA_ARCHS}")
endif()
set(RLX_INFO_DIRS ${PROJECT_SOURCE_DIR})
if(RLX_BUILD_TESTS)
  list(APPEND RLX_INFO_DIRS ${PROJECT_SOURCE_DIR}/tests)  # the fuzz build compiles the sources again
endif()
set_source_files_properties(src/runtime/system_info.c DIRECTORY ${RLX_INFO_DIRS}
  PROPERTIES COMPILE_DEFINITIONS "${RLX_INFO_DEFS}")
