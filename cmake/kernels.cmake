# tilebsp::compiled: the library's front (Tensor, Graph, the lowering, compile, the Engine, the profile, the report
# and the operators' entry points, src/*.cpp) built for baseline x86-64, and one set of the operators' kernels
# (src/kernels/) per instruction-set level in TILEBSP_KERNEL_ISAS. The entry points forward to the best set the CPU
# runs (src/dispatch.cpp, docs/11).
#
# Each level's objects are linked into one relocatable object whose only global symbol is its table
# (tilebsp_kernels_<level>): every inline function and template instance the level compiled (tilebsp's, the
# standard library's) stays local to it. Otherwise the linker would keep one copy of each, perhaps the AVX-512 one,
# for all callers. --force-group-allocation turns COMDAT groups into plain sections first, so that the final link
# cannot discard a level's copy in favour of another file's, and GCC's -fno-gnu-unique makes the static variables of
# inline functions weak symbols that can be made local (STB_GNU_UNIQUE ones cannot). What the process shares (the
# log, the warning handler) is defined once in the front (src/core.cpp).

set(_tilebsp_all_levels avx512 avx2 generic)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(_tilebsp_x86 ON)
  set(_tilebsp_march_avx512 -march=x86-64-v4)
  set(_tilebsp_march_avx2 -march=x86-64-v3)
  set(_tilebsp_march_generic -march=x86-64)
else()
  set(_tilebsp_x86 OFF)  # one set, for whatever the compiler targets (aarch64: the generic kernels)
  set(_tilebsp_all_levels generic)
endif()

# The level TILEBSP_MARCH compiles for on this host ("host" in TILEBSP_KERNEL_ISAS).
function(_tilebsp_host_level out)
  if(NOT _tilebsp_x86)
    set(${out} generic PARENT_SCOPE)
    return()
  endif()
  set(march "native")
  if(DEFINED TILEBSP_MARCH)
    set(march "${TILEBSP_MARCH}")
  endif()
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-march=${march}")
  check_cxx_source_compiles("#if !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__))
#error no AVX-512
#endif
int main() {}" TILEBSP_HOST_AVX512)
  check_cxx_source_compiles("#if !(defined(__AVX2__) && defined(__FMA__))
#error no AVX2
#endif
int main() {}" TILEBSP_HOST_AVX2)
  if(TILEBSP_HOST_AVX512)
    set(${out} avx512 PARENT_SCOPE)
  elseif(TILEBSP_HOST_AVX2)
    set(${out} avx2 PARENT_SCOPE)
  else()
    set(${out} generic PARENT_SCOPE)
  endif()
endfunction()

# TILEBSP_KERNEL_ISAS as levels, highest first: "all" is every level, "host" the level TILEBSP_MARCH gives here.
function(tilebsp_kernel_levels out)
  set(levels)
  foreach(word IN LISTS TILEBSP_KERNEL_ISAS)
    if(word STREQUAL "all")
      list(APPEND levels ${_tilebsp_all_levels})
    elseif(word STREQUAL "host")
      _tilebsp_host_level(host)
      list(APPEND levels ${host})
    elseif(word IN_LIST _tilebsp_all_levels)
      list(APPEND levels ${word})
    else()
      message(FATAL_ERROR "TILEBSP_KERNEL_ISAS: '${word}' is not one of all, host, ${_tilebsp_all_levels}")
    endif()
  endforeach()
  set(sorted)
  foreach(level IN LISTS _tilebsp_all_levels)
    if(level IN_LIST levels)
      list(APPEND sorted ${level})
    endif()
  endforeach()
  if(NOT sorted)
    message(FATAL_ERROR "TILEBSP_KERNEL_ISAS is empty")
  endif()
  set(${out} ${sorted} PARENT_SCOPE)
endfunction()

# tilebsp_add_compiled_library(<name> [EXCLUDE_FROM_ALL] [OPTIONS <flags>...]): the library, with the kernel sets of
# TILEBSP_KERNEL_ISAS, static, or shared with TILEBSP_SHARED_LIBRARY. OPTIONS: compile options of its own files (our
# warnings). Its file is libtilebsp.a or libtilebsp.so.<major>.<minor> (the SONAME: 0.x releases may change the ABI
# at each minor version), whose dynamic symbols are its API alone: everything is compiled with hidden visibility
# but what TILEBSP_API marks (config.hpp: every definition the headers declare for the library, TILEBSP_INLINE, and
# the operators' entry points), so that neither its inline functions nor the standard library's instances it holds
# interpose on a program's.
function(tilebsp_add_compiled_library name)
  cmake_parse_arguments(arg "EXCLUDE_FROM_ALL" "" "OPTIONS" ${ARGN})
  set(exclude)
  if(arg_EXCLUDE_FROM_ALL)
    set(exclude EXCLUDE_FROM_ALL)
  endif()
  tilebsp_kernel_levels(levels)
  file(GLOB front CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cpp)
  file(GLOB kernels CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/*.cpp)
  set(objects)
  set(have)
  foreach(level IN LISTS levels)
    set(set_target ${name}_kernels_${level})
    add_library(${set_target} OBJECT ${exclude} ${kernels})
    target_link_libraries(${set_target} PRIVATE tilebsp::tilebsp)
    target_compile_options(${set_target} PRIVATE ${arg_OPTIONS})
    target_compile_definitions(${set_target} PRIVATE TILEBSP_COMPILED TILEBSP_KERNELS_VARIANT=${level})
    target_compile_options(${set_target} PRIVATE ${_tilebsp_march_${level}} $<$<CXX_COMPILER_ID:GNU>:-fno-gnu-unique>)
    if(TILEBSP_SHARED_LIBRARY)
      set_target_properties(${set_target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    endif()
    set(object ${CMAKE_CURRENT_BINARY_DIR}/${set_target}.o)
    add_custom_command(OUTPUT ${object}
      COMMAND ${CMAKE_LINKER} -r --force-group-allocation -o ${object}.all.o $<TARGET_OBJECTS:${set_target}>
      COMMAND ${CMAKE_OBJCOPY} --keep-global-symbol=tilebsp_kernels_${level} ${object}.all.o ${object}
      COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DOBJECT=${object} -DTABLE=tilebsp_kernels_${level}
              -P ${PROJECT_SOURCE_DIR}/cmake/check_kernel_set.cmake
      DEPENDS ${set_target} $<TARGET_OBJECTS:${set_target}>
      COMMENT "Linking the ${level} kernels of ${name}"
      COMMAND_EXPAND_LISTS VERBATIM)
    list(APPEND objects ${object})
    string(TOUPPER ${level} upper)
    list(APPEND have TILEBSP_KERNELS_${upper})
  endforeach()
  set_source_files_properties(${objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  if(TILEBSP_SHARED_LIBRARY)
    add_library(${name} SHARED ${exclude} ${front} ${objects})
    set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                          VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
    # Every symbol the library uses is defined in it or in the libraries it links: a missing definition fails here,
    # not in a program that links it.
    target_link_options(${name} PRIVATE LINKER:--no-undefined LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/tilebsp.map)
    set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/tilebsp.map)
  else()
    add_library(${name} STATIC ${exclude} ${front} ${objects})
  endif()
  set_target_properties(${name} PROPERTIES OUTPUT_NAME tilebsp)
  target_link_libraries(${name} PUBLIC tilebsp::tilebsp)
  target_compile_options(${name} PRIVATE ${arg_OPTIONS})
  target_compile_definitions(${name} PUBLIC TILEBSP_COMPILED PRIVATE ${have})
  if(_tilebsp_x86)
    target_compile_options(${name} PRIVATE ${_tilebsp_march_generic})
  endif()
  set(TILEBSP_KERNEL_LEVELS ${levels} PARENT_SCOPE)
endfunction()
