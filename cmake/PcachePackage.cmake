# CPack: one Debian package per install component (cmake/PcacheInstall.cmake)
#
#   pcache-server           pcached, /etc/pcache/pcached.conf (a conffile,
#                           0640 root:pcache), the unit (enabled by postinst,
#                           deb-systemd-helper), /etc/init.d/pcached (without
#                           systemd), /etc/logrotate.d/pcache-server, the pcache
#                           system user and /var/lib/pcache (postinst;
#                           sysusers.d too), man 8/5
#   pcache-tools            pcachectl, pcache-snapshot, man 1
#   libpcache0              libpcache.so.0 (the engine)
#   libpcache-storage0      libpcache_storage.so.0
#   libpcache-odbc0         libpcache_odbc.so.0 (PCACHE_ODBC)
#   libpcache-dev           headers, .so links, static archives, pkg-config,
#                           the CMake package
#   pcache-doc              docs/*.md, README.md, the Grafana dashboard and
#                           the alert rules (/usr/share/pcache)
#   pcache-opensips-module  cachedb_perf.so (when built)
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr
#   cmake --build build -j2 && (cd build && cpack -G DEB)
#
# Each package has its own Description (a synopsis line, then the body) and
# /usr/share/doc/<package>/copyright and changelog.gz (PcacheInstall.cmake).
# Dependencies on other Debian packages come from dpkg-shlibdeps (the
# libraries the binaries link); between these packages they are exact
# versions. tests/install/test_packages.sh builds them and installs them into
# a scratch root.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pcache)
set(CPACK_PACKAGE_VENDOR "pcache")
set(CPACK_PACKAGE_CONTACT "pcache maintainers <pcache@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPackDeb would put that one line
# above every package's own description, as every package's synopsis. Each
# CPACK_COMPONENT_<C>_DESCRIPTION below is "synopsis\nbody".
# A package installs under /usr whatever prefix the tree was configured
# with: CPack runs the install with prefix /usr into its staging DESTDIR, so
# the install-time rules put the configuration in /etc (not /usr/etc) and
# the unit names /usr/bin/pcached. (Configure with -DCMAKE_INSTALL_PREFIX=/usr
# for the multiarch library directory, /usr/lib/x86_64-linux-gnu.)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(comps server tools lib storage dev doc)
if(TARGET pcache_odbc_shared)
  list(APPEND comps odbc)
endif()
get_property(pcache_module_built GLOBAL PROPERTY PCACHE_MODULE_BUILT)
if(pcache_module_built)
  list(APPEND comps module)
endif()
set(CPACK_COMPONENTS_ALL ${comps})
set(v "${PROJECT_VERSION}")
set(d ${PROJECT_SOURCE_DIR}/packaging/debian)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME pcache-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser, init-system-helpers")
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS "pcache-tools (= ${v})")
set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "pcache-doc")
set(CPACK_COMPONENT_SERVER_DESCRIPTION "shared-memory key-value cache server for Redis clients
pcached serves a shared-memory cache to Redis clients (RESP: strings and
counters) from forked worker processes, keeps it in an LMDB snapshot store
with a write-ahead journal, and is managed over JSON-RPC (pcachectl).
The package runs it as the pcache user, under systemd (pcached.service) or
with /etc/init.d/pcached where systemd does not run.")
set(PCACHE_CONFFILE "/etc/pcache/pcached.conf
/etc/init.d/pcached
/etc/logrotate.d/pcache-server")
configure_file(${d}/server.conffiles.in ${PROJECT_BINARY_DIR}/packaging/conffiles @ONLY)
# the control scripts under the names dpkg wants, executable
foreach(s postinst prerm postrm)
  file(COPY ${d}/server.${s} DESTINATION ${PROJECT_BINARY_DIR}/packaging/scripts
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                        WORLD_READ WORLD_EXECUTE)
  file(RENAME ${PROJECT_BINARY_DIR}/packaging/scripts/server.${s}
       ${PROJECT_BINARY_DIR}/packaging/${s})
endforeach()
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${PROJECT_BINARY_DIR}/packaging/postinst ${PROJECT_BINARY_DIR}/packaging/prerm
  ${PROJECT_BINARY_DIR}/packaging/postrm ${PROJECT_BINARY_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME pcache-tools)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "command-line tools for the pcache server and its stores
pcachectl calls pcached's management commands over JSON-RPC (statistics,
save, load, flush); pcache-snapshot inspects, verifies, dumps, compacts and
salvages pcache snapshot stores offline.")
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libpcache0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_LIB_DESCRIPTION "shared-memory multi-process key-value table (library)
libpcache is the pcache engine: a key-value table in shared memory that
forked processes read without locks and write concurrently (seqlock
buckets, a slab arena, growth without stopping traffic, TTLs).")
set(CPACK_DEBIAN_STORAGE_PACKAGE_NAME libpcache-storage0)
set(CPACK_DEBIAN_STORAGE_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_STORAGE_DESCRIPTION "persistence for the pcache table (library)
libpcache_storage keeps a pcache table on disk: the LMDB snapshot store,
the write-ahead journal, the persistence policies and the management
command layer (perf_* commands).")
set(CPACK_COMPONENT_STORAGE_DEPENDS lib)
set(CPACK_DEBIAN_ODBC_PACKAGE_NAME libpcache-odbc0)
set(CPACK_DEBIAN_ODBC_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_ODBC_DESCRIPTION "SQL export for the pcache table (library)
libpcache_odbc copies pcache collections to and from SQL databases
(SQLite, PostgreSQL, MariaDB) through unixODBC.")
set(CPACK_COMPONENT_ODBC_DEPENDS storage)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libpcache-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "development files for the pcache libraries
Headers, static libraries, pkg-config files (pcache, pcache-storage,
pcache-odbc) and the CMake package (find_package(pcache)) of libpcache
and its storage and ODBC libraries.")
set(CPACK_COMPONENT_DEV_DEPENDS lib storage)
if(TARGET pcache_odbc_shared)
  set(CPACK_COMPONENT_DEV_DEPENDS lib storage odbc)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libxxhash-dev, liblmdb-dev, libzstd-dev")
set(CPACK_DEBIAN_DOC_PACKAGE_NAME pcache-doc)
set(CPACK_DEBIAN_DOC_PACKAGE_SECTION doc)
set(CPACK_DEBIAN_DOC_PACKAGE_ARCHITECTURE all)
set(CPACK_COMPONENT_DOC_DESCRIPTION "documentation and monitoring files for pcache
The manuals (pcached, operations, the snapshot tool, the on-disk formats)
in /usr/share/doc/pcache, and for monitoring pcached: a Grafana dashboard
(/usr/share/pcache/grafana/pcache.json) and Prometheus alert rules
(/usr/share/pcache/prometheus/pcache-alerts.yml).")
set(CPACK_DEBIAN_MODULE_PACKAGE_NAME pcache-opensips-module)
set(CPACK_COMPONENT_MODULE_DESCRIPTION "pcache cache backend for OpenSIPS (cachedb_perf)
The OpenSIPS cachedb module cachedb_perf: a pcache table shared by the
OpenSIPS worker processes, persisted in a pcache snapshot store.")
set(CPACK_DEBIAN_MODULE_PACKAGE_DEPENDS "opensips")

include(CPack)
