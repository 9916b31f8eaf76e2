# Run by `cmake --install` (component dev, cmake/PcacheInstall.cmake): writes
# the pkg-config files with the prefix of THIS install, so a staged or
# re-prefixed install (cmake --install --prefix P) names its own paths.
# In: PCACHE_SRC, PCACHE_GEN (a scratch folder of the build tree), PCACHE_PCS (names), PCACHE_LIBDIR, PCACHE_INCLUDEDIR,
# PROJECT_VERSION; CMAKE_INSTALL_PREFIX as cmake --install sets it.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${PCACHE_${dir}}")
    set(PCACHE_FULL_${dir} "${PCACHE_${dir}}")
  else()
    set(PCACHE_FULL_${dir} "${CMAKE_INSTALL_PREFIX}/${PCACHE_${dir}}")
  endif()
endforeach()
foreach(pc ${PCACHE_PCS})
  configure_file("${PCACHE_SRC}/cmake/${pc}.pc.in" "${PCACHE_GEN}/${pc}.pc.installed"
                 @ONLY)
  file(INSTALL "${PCACHE_GEN}/${pc}.pc.installed"
       DESTINATION "${PCACHE_FULL_LIBDIR}/pkgconfig" RENAME "${pc}.pc")
endforeach()
