# Finds tilebsp's dependencies; used by the build and by the installed tilebspConfig.cmake.
find_package(Boost 1.71 REQUIRED)  # header-only: Hana
find_package(xtl QUIET)
find_package(xsimd 8 REQUIRED)
# Debian's xsimd 8 package exports a link to a target named "xtl" without looking for it (xtl is only needed
# for xsimd's optional xtl complex support). Without xtl, drop that dangling link so consumers still link.
if(TARGET xsimd AND NOT TARGET xtl)
  get_target_property(_tilebsp_xsimd_libs xsimd INTERFACE_LINK_LIBRARIES)
  if(_tilebsp_xsimd_libs STREQUAL "xtl")
    set_property(TARGET xsimd PROPERTY INTERFACE_LINK_LIBRARIES "")
  endif()
endif()
find_package(Threads REQUIRED)
