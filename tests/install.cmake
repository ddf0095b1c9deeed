# The installed library as a user meets it (tests/install_pc.sh): install into
# a temporary prefix, then compile, link and run a program with pkg-config.
find_program(ZEROC_PKG_CONFIG pkg-config)
if(ZEROC_PKG_CONFIG)
  add_test(NAME install_pkgconfig
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install_pc.sh ${PROJECT_BINARY_DIR} ${CMAKE_INSTALL_LIBDIR}
            ${CMAKE_C_COMPILER})
  set_tests_properties(install_pkgconfig PROPERTIES LABELS unit TIMEOUT 300)
  # the static archive, linked with pkg-config --static and with CMake's zeroc::zeroc_static
  add_test(NAME install_static
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install_static.sh ${PROJECT_BINARY_DIR} ${CMAKE_INSTALL_LIBDIR}
            ${CMAKE_C_COMPILER})
  set_tests_properties(install_static PROPERTIES LABELS unit TIMEOUT 600)
endif()

# The shared library exports the public API and nothing else (tests/exports.sh).
add_test(NAME exports
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/exports.sh $<TARGET_FILE:zeroc> ${CMAKE_C_COMPILER}
          ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
set_tests_properties(exports PROPERTIES LABELS unit TIMEOUT 60)

# The layers of src/ point down (scripts/layers: no include of, and no call
# into, a layer above; the order is in docs/architecture.md), and no files of
# src/ form a circle (--cycles); no function of src/ or apps/ is over 150 lines.
add_test(NAME layers COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/layers
                             ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME layers_cycles COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/layers --cycles
                                    ${PROJECT_SOURCE_DIR})
set_tests_properties(layers_cycles PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME funclen COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/funclen
                              ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/apps)
set_tests_properties(funclen PROPERTIES LABELS unit TIMEOUT 60)
