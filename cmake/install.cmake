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

# What a program linking the archive needs besides it, as absolute paths or -l flags.
set(RS_DEP_LIBS ${CJSON_LINK_LIBRARIES} ${XXHASH_LIBRARY})
if(TARGET rs_opt)
  get_target_property(_rs_opt_deps rs_opt INTERFACE_LINK_LIBRARIES)
  foreach(d ${_rs_opt_deps})
    if(d STREQUAL "MPI::MPI_C")
      find_package(MPI COMPONENTS C QUIET) # opt/'s result, seen from here
      list(APPEND RS_DEP_LIBS ${MPI_C_LIBRARIES})
    elseif(d STREQUAL "CUDA::cudart")
      find_package(CUDAToolkit QUIET)
      list(APPEND RS_DEP_LIBS ${CUDA_cudart_LIBRARY})
    elseif(d MATCHES "^/" AND NOT d MATCHES "::")
      list(APPEND RS_DEP_LIBS ${d})
    endif()
  endforeach()
endif()
list(APPEND RS_DEP_LIBS ${CMAKE_DL_LIBS} pthread m)
if(RS_HAVE_CUDA)
  list(APPEND RS_DEP_LIBS stdc++) # nvcc's objects are C++
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
set(RS_PC_LIBS "")
foreach(d ${RS_DEP_LIBS})
  if(d MATCHES "^/" OR d MATCHES "^-")
    string(APPEND RS_PC_LIBS " ${d}")
  else()
    string(APPEND RS_PC_LIBS " -l${d}")
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
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/reshardConfigVersion.cmake VERSION ${RS_VERSION}
                                 COMPATIBILITY SameMinorVersion)

install(TARGETS reshard_lib ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
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
install(FILES ${CMAKE_BINARY_DIR}/reshard.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
