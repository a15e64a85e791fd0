# dedup_component(): a component's shared library, its installation and its
# pkg-config file.  A component (backends/<dir>) builds its sources once as
# the OBJECT library <TARGET>_objects and the STATIC library <TARGET>, then
# calls
#
#   dedup_component(TARGET <static target> NAME <name> HEADER <file>
#                   DESCRIPTION <text> [LINK <libraries>...]
#                   [REQUIRES_PRIVATE <pkg-config packages>...]
#                   [LIBS_PRIVATE <linker flags>...])
#
# which adds libdedup_<name>.so from the same objects, linked against
# libdedup.so and LINK and exporting dedup_* only (src/libdedup.map, as
# libdedup.so), and installs both libraries, include/dedup/<name>.h and
# dedup-<name>.pc (Requires: dedup, the component's own dependencies private),
# so that a consumer builds with `pkg-config --cflags --libs dedup-<name>`.
function(dedup_component)
  cmake_parse_arguments(C "" "TARGET;NAME;HEADER;DESCRIPTION"
    "LINK;REQUIRES_PRIVATE;LIBS_PRIVATE" ${ARGN})
  set(shared ${C_TARGET}_shared)
  add_library(${shared} SHARED $<TARGET_OBJECTS:${C_TARGET}_objects>)
  set_target_properties(${C_TARGET} ${shared} PROPERTIES OUTPUT_NAME dedup_${C_NAME})
  set_target_properties(${shared} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  target_link_options(${shared} PRIVATE
    "LINKER:--version-script=${PROJECT_SOURCE_DIR}/src/libdedup.map")
  # Every dependency named: a library missing from LINK fails here, not in
  # the consumer (the sanitizers' runtimes are the executable's, so not then).
  if(NOT DEDUP_SANITIZE AND NOT DEDUP_TSAN)
    target_link_options(${shared} PRIVATE "LINKER:--no-undefined")
  endif()
  set_property(TARGET ${shared} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/src/libdedup.map)
  target_link_libraries(${shared} PRIVATE dedup_shared ${C_LINK})

  install(TARGETS ${C_TARGET} ${shared}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${C_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dedup)
  file(RELATIVE_PATH DEDUP_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REPLACE ";" " " DEDUP_PC_REQUIRES_PRIVATE "${C_REQUIRES_PRIVATE}")
  string(REPLACE ";" " " DEDUP_PC_LIBS_PRIVATE "${C_LIBS_PRIVATE}")
  set(DEDUP_PC_NAME ${C_NAME})
  set(DEDUP_PC_DESCRIPTION "${C_DESCRIPTION}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/dedup-component.pc.in
    ${PROJECT_BINARY_DIR}/dedup-${C_NAME}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/dedup-${C_NAME}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  set_property(GLOBAL APPEND PROPERTY DEDUP_COMPONENTS ${C_NAME})
endfunction()
