# install.cmake - `cmake --install`: the library libreshard.a (core, ref, oracle, opt and props in one
# archive), the public headers include/reshard/*.h, the reshard CLI, a CMake package
# (find_package(reshard) -> imported target reshard::reshard) and a pkg-config file (reshard.pc).
# Both package files are relocatable: they find the prefix from where they were installed, so
# `cmake --install build --prefix DIR` works for any DIR.
include(GNUInstallDirs)
set(RS_VERSION 0.1.0)

# One archive from the layers' objects (CUDA objects included when opt was built with them).
set(RS_BUNDLE rs_core rs_ref rs_oracle)
foreach(t rs_opt rs_props)
  if(TARGET ${t})
    list(APPEND RS_BUNDLE ${t})
  endif()
endforeach()
set(RS_BUNDLE_OBJECTS)
foreach(t ${RS_BUNDLE})
  list(APPEND RS_BUNDLE_OBJECTS $<TARGET_OBJECTS:${t}>)
endforeach()
add_library(reshard_lib STATIC ${RS_BUNDLE_OBJECTS})
set_target_properties(reshard_lib PROPERTIES OUTPUT_NAME reshard LINKER_LANGUAGE C)
add_dependencies(reshard_lib ${RS_BUNDLE})

# The core library libreshard_core.a: layouts, shard orders, plans and planners, the reference
# executor and the oracle (core/, ref/, oracle/): no transport (MPI, NCCL), no CUDA, no opt/ or
# props/. A program that only computes layouts or plans links this and needs cJSON and xxHash only
# (find_package(reshard COMPONENTS core) -> reshard::core; pkg-config reshard-core).
add_library(reshard_core_lib STATIC $<TARGET_OBJECTS:rs_core> $<TARGET_OBJECTS:rs_ref> $<TARGET_OBJECTS:rs_oracle>)
set_target_properties(reshard_core_lib PROPERTIES OUTPUT_NAME reshard_core LINKER_LANGUAGE C)
add_dependencies(reshard_core_lib rs_core rs_ref rs_oracle)

# What a program linking the archive needs besides it. The core's needs (cJSON, xxHash, libm) are
# RS_DEP_LIBS; the transports' (MPI, CUDA's runtime, NCCL: opt/ only) are RS_PRIVATE_LIBS, which
# the CMake package finds on the consumer's machine (find_dependency) and reshard.pc lists under
# Libs.private (pkg-config --static), so that nothing asks for them who links the core only.
set(RS_DEP_LIBS ${CJSON_LINK_LIBRARIES} ${XXHASH_LIBRARY})
set(RS_PRIVATE_LIBS)
set(RS_PKG_MPI 0)
set(RS_PKG_CUDA 0)
set(RS_PKG_NCCL 0)
if(TARGET rs_opt)
  get_target_property(_rs_opt_deps rs_opt INTERFACE_LINK_LIBRARIES)
  foreach(d ${_rs_opt_deps})
    if(d STREQUAL "MPI::MPI_C")
      find_package(MPI COMPONENTS C QUIET) # opt/'s result, seen from here
      list(APPEND RS_PRIVATE_LIBS ${MPI_C_LIBRARIES})
      set(RS_PKG_MPI 1)
    elseif(d STREQUAL "CUDA::cudart")
      find_package(CUDAToolkit QUIET)
      list(APPEND RS_PRIVATE_LIBS ${CUDA_cudart_LIBRARY})
      set(RS_PKG_CUDA 1)
    elseif(d MATCHES "^/" AND NOT d MATCHES "::")
      list(APPEND RS_PRIVATE_LIBS ${d})
      if(d MATCHES "nccl")
        set(RS_PKG_NCCL 1)
      endif()
    endif()
  endforeach()
endif()
list(APPEND RS_DEP_LIBS ${CMAKE_DL_LIBS} pthread m)
if(RS_HAVE_CUDA)
  list(APPEND RS_PRIVATE_LIBS stdc++) # nvcc's objects are C++ (opt/ only)
endif()
# instrumented builds: a program linking the archive needs the same runtime
if(RS_SANITIZE OR RS_FUZZ)
  list(APPEND RS_DEP_LIBS -fsanitize=address,undefined)
endif()
if(RS_COVERAGE)
  list(APPEND RS_DEP_LIBS --coverage)
endif()
list(REMOVE_DUPLICATES RS_DEP_LIBS)
# pkg-config form: a library file as itself, a bare name as -lNAME
function(rs_pc_form out)
  set(r "")
  foreach(d ${ARGN})
    if(d MATCHES "^/" OR d MATCHES "^-")
      string(APPEND r " ${d}")
    else()
      string(APPEND r " -l${d}")
    endif()
  endforeach()
  set(${out} "${r}" PARENT_SCOPE)
endfunction()
rs_pc_form(RS_PC_LIBS ${RS_DEP_LIBS})
rs_pc_form(RS_PC_PRIVATE_LIBS ${RS_PRIVATE_LIBS})
# the CMake package names NCCL by its file name, found again beside CUDA's runtime
set(RS_NCCL_NAME "")
foreach(d ${RS_PRIVATE_LIBS})
  if(d MATCHES "nccl")
    get_filename_component(RS_NCCL_NAME ${d} NAME)
  endif()
endforeach()

set(RS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/reshard)
# the way back from the package files to the prefix (the lib dir may be lib/<multiarch>)
file(RELATIVE_PATH RS_CONFIG_UP /rs/${RS_CMAKE_DIR} /rs)
file(RELATIVE_PATH RS_PC_UP /rs/${CMAKE_INSTALL_LIBDIR}/pkgconfig /rs)
string(REGEX REPLACE "/$" "" RS_CONFIG_UP "${RS_CONFIG_UP}")
string(REGEX REPLACE "/$" "" RS_PC_UP "${RS_PC_UP}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/reshardConfig.cmake.in ${CMAKE_BINARY_DIR}/reshardConfig.cmake @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/reshard.pc.in ${CMAKE_BINARY_DIR}/reshard.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/reshard-core.pc.in ${CMAKE_BINARY_DIR}/reshard-core.pc @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/reshardConfigVersion.cmake VERSION ${RS_VERSION}
                                 COMPATIBILITY SameMinorVersion)

install(TARGETS reshard_lib reshard_core_lib ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/reshard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
if(TARGET reshard)
  # the CLI finds the libraries it was linked with (MPI, CUDA) from the installed place too
  set_target_properties(reshard PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS reshard RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # the corpora `reshard conform` runs by default, where the installed CLI looks for them
  # (bin/../share/reshard/fixtures): an installed CLI never reads the source tree
  if(TARGET rs_conform)
    install(DIRECTORY ${CMAKE_SOURCE_DIR}/fixtures/ DESTINATION ${CMAKE_INSTALL_DATADIR}/reshard/fixtures
            PATTERN fuzz EXCLUDE)
  endif()
endif()
install(FILES ${CMAKE_BINARY_DIR}/reshardConfig.cmake ${CMAKE_BINARY_DIR}/reshardConfigVersion.cmake
        DESTINATION ${RS_CMAKE_DIR})
install(FILES ${CMAKE_BINARY_DIR}/reshard.pc ${CMAKE_BINARY_DIR}/reshard-core.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
