# Install rules: headers, the exported targets (tilebsp::tilebsp, header-only; tilebsp::compiled, the library, when
# it is built), tilebspConfig.cmake and its version file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY include/tilebsp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET tilebsp_compiled)
  # A package with a library in it is architecture dependent: its CMake files go to the library directory.
  set(_tilebsp_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tilebsp)
  install(TARGETS tilebsp tilebsp_compiled EXPORT tilebspTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  set(_tilebsp_arch_independent)
else()
  set(_tilebsp_cmake_dir ${CMAKE_INSTALL_DATADIR}/tilebsp/cmake)
  install(TARGETS tilebsp EXPORT tilebspTargets)
  set(_tilebsp_arch_independent ARCH_INDEPENDENT)
endif()
install(EXPORT tilebspTargets NAMESPACE tilebsp:: DESTINATION ${_tilebsp_cmake_dir})
if(TARGET tilebsp_mpi)  # tilebsp::mpi, imported only where the consumer finds MPI too
  set_target_properties(tilebsp_mpi PROPERTIES EXPORT_NAME mpi)
  install(TARGETS tilebsp_mpi EXPORT tilebspMpiTargets)
  install(EXPORT tilebspMpiTargets NAMESPACE tilebsp:: DESTINATION ${_tilebsp_cmake_dir})
endif()

if(TARGET tilebsp_onnx AND TARGET tilebsp_compiled)  # tilebsp::onnx and the tilebsp tool, with the compiled library
  install(TARGETS tilebsp_onnx EXPORT tilebspOnnxTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT tilebspOnnxTargets NAMESPACE tilebsp:: DESTINATION ${_tilebsp_cmake_dir})
  if(TARGET tilebsp_cli)
    install(TARGETS tilebsp_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endif()
configure_package_config_file(cmake/tilebspConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tilebspConfig.cmake
  INSTALL_DESTINATION ${_tilebsp_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tilebspConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ${_tilebsp_arch_independent})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tilebspConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tilebspConfigVersion.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/tilebspDependencies.cmake
        DESTINATION ${_tilebsp_cmake_dir})
