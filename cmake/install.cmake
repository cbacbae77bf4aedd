# Install rules: headers, the exported INTERFACE target, tilebspConfig.cmake and its version file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY include/tilebsp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tilebsp EXPORT tilebspTargets)
install(EXPORT tilebspTargets NAMESPACE tilebsp:: DESTINATION ${CMAKE_INSTALL_DATADIR}/tilebsp/cmake)
if(TARGET tilebsp_mpi)  # tilebsp::mpi, imported only where the consumer finds MPI too
  set_target_properties(tilebsp_mpi PROPERTIES EXPORT_NAME mpi)
  install(TARGETS tilebsp_mpi EXPORT tilebspMpiTargets)
  install(EXPORT tilebspMpiTargets NAMESPACE tilebsp:: DESTINATION ${CMAKE_INSTALL_DATADIR}/tilebsp/cmake)
endif()

configure_package_config_file(cmake/tilebspConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tilebspConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_DATADIR}/tilebsp/cmake)
# Header-only and architecture independent.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tilebspConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tilebspConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tilebspConfigVersion.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/tilebspDependencies.cmake
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tilebsp/cmake)
