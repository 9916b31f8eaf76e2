# The install layout (docs/operations.md "Install"): every path from
# GNUInstallDirs, one install component per part so that CPack
# (cmake/PcachePackage.cmake) makes one Debian package of each:
#
#   server   pcached, pcached.conf, the systemd unit, the init script, the
#            logrotate file, pcached(8), pcached.conf(5)
#   tools    pcachectl, pcache-snapshot, their man pages (1)
#   lib      libpcache.so.MAJOR: the engine (and util inside it)
#   storage  libpcache_storage.so.MAJOR: management layer, store, the store's
#            structural check, journal, persist
#   odbc     libpcache_odbc.so.MAJOR: the ODBC exporter (PCACHE_ODBC)
#   dev      public headers, the .so links, the static archives, pkg-config
#            files, the CMake package (find_package(pcache))
#   doc      docs/*.md, README.md; the Grafana dashboard and the alert rules
#            in share/pcache
#   module   cachedb_perf.so (opensips_module/CMakeLists.txt, when built)
#
# and each package's share/doc/<package>/copyright and changelog.gz.
#
# The shared libraries are made of the object files of the static component
# libraries (the hosts and the tests keep linking those), so there is one
# compilation of each source. The configuration file, the unit, the init
# script and the logrotate file are written at install time
# (cmake/install_etc.cmake) from the prefix the install runs with: `cmake
# --install build --prefix /usr` puts the configuration in /etc/pcache (not
# /usr/etc) and the unit names /usr/bin/pcached, whatever prefix the tree
# was configured with.
include(CMakePackageConfigHelpers)
# the components' imported targets are scoped to their folders: found again here
pkg_check_modules(PCI_LMDB REQUIRED IMPORTED_TARGET lmdb)
pkg_check_modules(PCI_ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(Threads REQUIRED)
if(TARGET pcache_odbc)
  pkg_check_modules(PCI_ODBC REQUIRED IMPORTED_TARGET odbc)
endif()

set(PCACHE_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/pcache")
set(PCACHE_SOVERSION "${PROJECT_VERSION_MAJOR}")

function(pcache_shared_library target output component)
  # ARGN: the static component libraries whose objects make it
  set(objs "")
  foreach(lib ${ARGN})
    list(APPEND objs "$<TARGET_OBJECTS:${lib}>")
  endforeach()
  add_library(${target} SHARED ${objs})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${output} VERSION ${PROJECT_VERSION}
    SOVERSION ${PCACHE_SOVERSION} LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib
    LINKER_LANGUAGE C)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  install(TARGETS ${target} EXPORT pcacheTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${component}
            NAMELINK_COMPONENT dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

# libpcache.so: the engine and the helpers it is built on
pcache_shared_library(pcache_shared pcache lib pcache pcache_util)
target_link_libraries(pcache_shared PRIVATE PkgConfig::XXHASH pthread)
target_include_directories(pcache_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src/engine/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src/util/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(pcache_shared PROPERTIES EXPORT_NAME pcache)

# libpcache_storage.so: management layer, snapshot store, its structural
# check, journal, persistence
pcache_shared_library(pcache_storage_shared pcache_storage storage
  pcache_mgmt pcache_store pcache_storecheck pcache_journal pcache_persist)
target_link_libraries(pcache_storage_shared PUBLIC pcache_shared
  PRIVATE PkgConfig::PCI_LMDB PkgConfig::PCI_ZSTD PkgConfig::XXHASH Threads::Threads m)
target_include_directories(pcache_storage_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src/mgmt/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/storage/store/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/storage/storecheck/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/storage/journal/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/storage/persist/include>)
set_target_properties(pcache_storage_shared PROPERTIES EXPORT_NAME storage)

set(PCACHE_HEADERS
  src/util/include/pcache_util.h src/engine/include/pcache.h src/mgmt/include/pcache_mgmt.h
  storage/store/include/pcache_store.h storage/storecheck/include/pcache_storecheck.h
  storage/journal/include/pcache_journal.h
  storage/persist/include/pcache_persist.h)
set(PCACHE_PC_LIBS_ODBC "")
if(TARGET pcache_odbc)
  pcache_shared_library(pcache_odbc_shared pcache_odbc odbc pcache_odbc)
  target_link_libraries(pcache_odbc_shared PUBLIC pcache_storage_shared
    PRIVATE PkgConfig::PCI_ODBC Threads::Threads)
  target_include_directories(pcache_odbc_shared INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/odbc/include>)
  set_target_properties(pcache_odbc_shared PROPERTIES EXPORT_NAME odbc)
  list(APPEND PCACHE_HEADERS odbc/include/pcache_odbc.h)
endif()

install(FILES ${PCACHE_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
# the static archives, one per shared library and of the same objects, so
# -lpcache_storage links either way (`pkg-config --static` users):
# libpcache.a (the engine; util is libpcache_util.a), libpcache_storage.a,
# libpcache_odbc.a
add_library(pcache_storage_static STATIC $<TARGET_OBJECTS:pcache_mgmt>
  $<TARGET_OBJECTS:pcache_store> $<TARGET_OBJECTS:pcache_storecheck>
  $<TARGET_OBJECTS:pcache_journal> $<TARGET_OBJECTS:pcache_persist>)
set_target_properties(pcache_storage_static PROPERTIES OUTPUT_NAME pcache_storage
  ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib LINKER_LANGUAGE C)
set(PCACHE_STATIC pcache pcache_util pcache_storage_static)
if(TARGET pcache_odbc)
  list(APPEND PCACHE_STATIC pcache_odbc)
endif()
foreach(lib ${PCACHE_STATIC})
  install(FILES $<TARGET_FILE:${lib}> DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
endforeach()

# pkg-config: pcache (engine), pcache-storage, pcache-odbc, written at
# install time with the prefix of the install (cmake/install_pc.cmake)
set(PCACHE_PCS pcache pcache-storage)
if(TARGET pcache_odbc)
  list(APPEND PCACHE_PCS pcache-odbc)
endif()
install(CODE "
  set(PCACHE_SRC \"${PROJECT_SOURCE_DIR}\")
  set(PCACHE_GEN \"${PROJECT_BINARY_DIR}/install-gen\")
  set(PCACHE_PCS \"${PCACHE_PCS}\")
  set(PCACHE_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(PCACHE_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/install_pc.cmake\")
" COMPONENT dev)

# CMake package: find_package(pcache) -> pcache::pcache, pcache::storage, pcache::odbc
install(EXPORT pcacheTargets NAMESPACE pcache:: DESTINATION ${PCACHE_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pcacheConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pcacheConfig.cmake INSTALL_DESTINATION ${PCACHE_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pcacheConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pcacheConfig.cmake
              ${PROJECT_BINARY_DIR}/pcacheConfigVersion.cmake
        DESTINATION ${PCACHE_CMAKEDIR} COMPONENT dev)

# the binaries
install(TARGETS pcached RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
install(TARGETS pcachectl pcache-snapshot RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT tools)

# /etc/pcache/pcached.conf and the unit, from the prefix of the install
set(PCACHE_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "where the unit goes: relative to the prefix (Debian: /lib/systemd/system for prefix /usr)")
install(CODE "
  set(PCACHE_SRC \"${PROJECT_SOURCE_DIR}\")
  set(PCACHE_GEN \"${PROJECT_BINARY_DIR}/install-gen\")
  set(PCACHE_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(PCACHE_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
  set(PCACHE_UNITDIR \"${PCACHE_SYSTEMD_UNITDIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/install_etc.cmake\")
" COMPONENT server)

# the man pages (cmake/PcacheMan.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/PcacheMan.cmake)

# the pcache user for systemd-sysusers (an image built with dpkg --root)
install(FILES packaging/debian/pcache.sysusers DESTINATION lib/sysusers.d
        RENAME pcache.conf COMPONENT server)

install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc
        FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE PATTERN "grafana" EXCLUDE
        PATTERN "prometheus" EXCLUDE)
# the Grafana dashboard and the Prometheus alert rules (docs/operations.md
# §5), under /usr/share/pcache: a container image that drops /usr/share/doc
# keeps them
install(FILES docs/grafana/pcache.json DESTINATION ${CMAKE_INSTALL_DATADIR}/pcache/grafana
        COMPONENT doc)
install(FILES docs/prometheus/pcache-alerts.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/pcache/prometheus COMPONENT doc)

# every package's /usr/share/doc/<package>: copyright and changelog.gz
# (Debian policy 12.5, 12.7), gzip'd at configure time
set(pcache_changelog_gz ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/packaging)
execute_process(COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/packaging/debian/changelog
                OUTPUT_FILE ${pcache_changelog_gz} RESULT_VARIABLE pcache_gz_rc)
if(NOT pcache_gz_rc EQUAL 0)
  message(FATAL_ERROR "gzip packaging/debian/changelog: ${pcache_gz_rc}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/packaging/debian/changelog)
set(pcache_doc_packages server:pcache-server tools:pcache-tools lib:libpcache0
    storage:libpcache-storage0 dev:libpcache-dev doc:pcache-doc)
if(TARGET pcache_odbc)
  list(APPEND pcache_doc_packages odbc:libpcache-odbc0)
endif()
get_property(pcache_module_built GLOBAL PROPERTY PCACHE_MODULE_BUILT)
if(pcache_module_built)
  list(APPEND pcache_doc_packages module:pcache-opensips-module)
endif()
foreach(cp ${pcache_doc_packages})
  string(REPLACE ":" ";" cp "${cp}")
  list(GET cp 0 comp)
  list(GET cp 1 pkg)
  install(FILES packaging/debian/copyright ${pcache_changelog_gz}
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${pkg} COMPONENT ${comp})
endforeach()
