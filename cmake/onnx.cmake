# tilebsp::onnx, the ONNX importer (<tilebsp/onnx/...>, src/onnx/): defined when ONNX's C++ library is installed
# (Debian: libonnx-dev libprotobuf-dev), as tilebsp::mpi is when MPI is. Its public headers hold no protobuf types;
# ONNX and protobuf are private dependencies of the library.
option(TILEBSP_BUILD_ONNX "Build tilebsp::onnx and the tilebsp tool when ONNX's library is found" ON)
if(TILEBSP_BUILD_ONNX)
  find_package(Protobuf QUIET)
  if(Protobuf_FOUND)
    find_package(ONNX CONFIG QUIET)
  endif()
endif()
if(TILEBSP_BUILD_ONNX AND TARGET onnx AND TARGET onnx_proto)
  file(GLOB _tilebsp_onnx_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/onnx/*.cpp)
  # Pulled in with add_subdirectory, it is built only when something links it: a project that does not use ONNX
  # does not compile the importer (a header-only build of it takes minutes).
  set(_tilebsp_onnx_all)
  if(NOT _tilebsp_top_level)
    set(_tilebsp_onnx_all EXCLUDE_FROM_ALL)
  endif()
  add_library(tilebsp_onnx STATIC ${_tilebsp_onnx_all} ${_tilebsp_onnx_sources})
  add_library(tilebsp::onnx ALIAS tilebsp_onnx)
  set_target_properties(tilebsp_onnx PROPERTIES EXPORT_NAME onnx POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(tilebsp_onnx PRIVATE onnx onnx_proto protobuf::libprotobuf)
  target_include_directories(tilebsp_onnx PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(_tilebsp_top_level)
    # Our own build: the operators' maps compiled for TILEBSP_MARCH, as the samples are (a package for other hosts
    # sets TILEBSP_MARCH to its baseline); installed, it links tilebsp::compiled.
    target_link_libraries(tilebsp_onnx PUBLIC $<BUILD_INTERFACE:tilebsp_ops_native> $<INSTALL_INTERFACE:tilebsp::compiled>
                                       PRIVATE $<BUILD_INTERFACE:tilebsp_warnings>)
  elseif(TARGET tilebsp_compiled)
    target_link_libraries(tilebsp_onnx PUBLIC tilebsp_compiled)
  else()
    target_link_libraries(tilebsp_onnx PUBLIC tilebsp::tilebsp)
  endif()
endif()
