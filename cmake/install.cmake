# install.cmake — `cmake --install BUILD --prefix P`: rlx.h, librlx.a and
# librlx.so (soname versioned), the rlx program, a CMake package
# (find_package(rlx): rlx::rlx, rlx::rlx_static) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Inside the build the targets read include/ from the source tree; once
# installed, from P/include.
foreach(t rlx_static rlx_shared)
  set_property(TARGET ${t} PROPERTY INTERFACE_INCLUDE_DIRECTORIES
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
set_target_properties(rlx_shared PROPERTIES EXPORT_NAME rlx)
set_target_properties(rlx_static PROPERTIES EXPORT_NAME rlx_static)

install(FILES include/rlx.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS rlx_static rlx_shared EXPORT rlxTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS rlx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(RLX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)
install(EXPORT rlxTargets NAMESPACE rlx:: DESTINATION ${RLX_CMAKE_DIR})
configure_package_config_file(cmake/rlxConfig.cmake.in ${PROJECT_BINARY_DIR}/rlxConfig.cmake
  INSTALL_DESTINATION ${RLX_CMAKE_DIR})
# Before 1.0 a minor version may change the API, as the soname says.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rlxConfig.cmake ${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
  DESTINATION ${RLX_CMAKE_DIR})

# rlx.pc finds its prefix from its own folder, so the installed tree may move.
file(RELATIVE_PATH RLX_PC_UP /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" RLX_PC_UP "${RLX_PC_UP}")
set(RLX_PC_PRIVATE "-lm -pthread")
set(RLX_PC_CUDA "")
if(RLX_HAVE_CUDA)
  # The host code nvcc makes of the .cu files needs the C++ runtime (static
  # guards) in a C program that links librlx.a.
  target_link_libraries(rlx_static INTERFACE stdc++)
  set(RLX_PC_CUDA " and CUDA")
  string(APPEND RLX_PC_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt -l${CMAKE_DL_LIBS} -lstdc++")
endif()
configure_file(cmake/rlx.pc.in ${PROJECT_BINARY_DIR}/rlx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rlx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
