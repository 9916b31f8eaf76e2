# Run by `cmake --install` (component server, cmake/PcacheInstall.cmake):
# writes pcached.conf, pcached.service, the init script (init.d/pcached)
# and the logrotate file (logrotate.d/pcache-server) with the full paths of
# THIS install's prefix, by the rules of GNUInstallDirs: prefix /usr puts the
# configuration in /etc, prefix / too, any other prefix P in P/etc.
# In: PCACHE_SRC, PCACHE_GEN (a scratch folder of the build tree), PCACHE_BINDIR, PCACHE_SYSCONFDIR, PCACHE_UNITDIR (relative
# or absolute, as configured); CMAKE_INSTALL_PREFIX as cmake --install
# (or CPack) sets it; file(INSTALL) adds $ENV{DESTDIR}.
function(pcache_full out rel kind)
  if(IS_ABSOLUTE "${rel}")
    set(full "${rel}")
  elseif(kind STREQUAL "etc" AND (CMAKE_INSTALL_PREFIX STREQUAL "/usr"
                                 OR CMAKE_INSTALL_PREFIX STREQUAL "/"))
    set(full "/${rel}")
  elseif(CMAKE_INSTALL_PREFIX STREQUAL "/")
    set(full "/usr/${rel}")
  else()
    set(full "${CMAKE_INSTALL_PREFIX}/${rel}")
  endif()
  set(${out} "${full}" PARENT_SCOPE)
endfunction()

pcache_full(CMAKE_INSTALL_FULL_BINDIR "${PCACHE_BINDIR}" bin)
pcache_full(CMAKE_INSTALL_FULL_SYSCONFDIR "${PCACHE_SYSCONFDIR}" etc)
pcache_full(unitdir "${PCACHE_UNITDIR}" lib)

configure_file("${PCACHE_SRC}/src/server/pcached.service"
               "${PCACHE_GEN}/pcached.service.installed" @ONLY)
file(INSTALL "${PCACHE_GEN}/pcached.service.installed"
     DESTINATION "${unitdir}" RENAME pcached.service)
file(INSTALL "${PCACHE_SRC}/src/server/pcached.conf"
     DESTINATION "${CMAKE_INSTALL_FULL_SYSCONFDIR}/pcache")
configure_file("${PCACHE_SRC}/packaging/debian/pcached.init"
               "${PCACHE_GEN}/pcached.init.installed" @ONLY)
file(INSTALL "${PCACHE_GEN}/pcached.init.installed"
     DESTINATION "${CMAKE_INSTALL_FULL_SYSCONFDIR}/init.d" RENAME pcached
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                      WORLD_READ WORLD_EXECUTE)
file(INSTALL "${PCACHE_SRC}/packaging/debian/pcache-server.logrotate"
     DESTINATION "${CMAKE_INSTALL_FULL_SYSCONFDIR}/logrotate.d" RENAME pcache-server)
