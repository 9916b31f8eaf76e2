# The man pages, generated at build time from the Markdown manuals in docs/
# by pandoc (cmake/man_page.cmake), so they say what the docs say:
#   pcached(8)          docs/pcached.md §1-§6 (processes, configuration,
#                       RESP, JSON-RPC, pcachectl, install and systemd)
#   pcached.conf(5)     docs/pcached.md §2 (every key, the Redis names)
#   pcachectl(1)        docs/pcached.md §5
#   pcache-snapshot(1)  docs/pcache-snapshot.md
# Installed (gzip'd) in MANDIR/manN with the component of their program.
# Without pandoc (Debian package pandoc, .ci/deps.sh) they are not built
# and configure says so.
find_program(PCACHE_PANDOC pandoc)
find_program(PCACHE_GZIP gzip)
if(NOT PCACHE_PANDOC OR NOT PCACHE_GZIP)
  message(STATUS "man pages: not built (no pandoc: apt-get install pandoc)")
  return()
endif()
set(PCACHE_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(PCACHE_MAN_PAGES "")
function(pcache_man name section component src from to whatis synopsis seealso)
  set(out ${PCACHE_MAN_DIR}/${name}.${section})
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/${src})
  add_custom_command(OUTPUT ${out}.gz
    COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}/${src} -DSRC_REL=${rel}
            "-DFROM=${from}" "-DTO=${to}" -DNAME=${name} -DSECTION=${section}
            "-DWHATIS=${whatis}" "-DSYNOPSIS=${synopsis}" "-DSEEALSO=${seealso}"
            -DVERSION=${PROJECT_VERSION} -DPANDOC=${PCACHE_PANDOC} -DGZIP=${PCACHE_GZIP}
            -DOUT=${out} -P ${PROJECT_SOURCE_DIR}/cmake/man_page.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/${src} ${PROJECT_SOURCE_DIR}/cmake/man_page.cmake
    COMMENT "man page ${name}(${section}) from ${src}" VERBATIM)
  install(FILES ${out}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
          COMPONENT ${component})
  set(PCACHE_MAN_PAGES ${PCACHE_MAN_PAGES} ${out}.gz PARENT_SCOPE)
endfunction()

pcache_man(pcached 8 server docs/pcached.md "## 1. Processes" "## 7. Benchmark"
  "the pcache standalone server: RESP, JSON-RPC and an LMDB snapshot store"
  "pcached [-c FILE] [--check] [--KEY=VALUE]... | --help | --help-keys | --version"
  "pcached.conf(5), pcachectl(1), pcache-snapshot(1), systemd.service(5), redis-cli(1)")
pcache_man(pcached.conf 5 server docs/pcached.md "## 2. Configuration" "## 3. The RESP door"
  "configuration file of pcached (/etc/pcache/pcached.conf)" ""
  "pcached(8), pcachectl(1)")
pcache_man(pcachectl 1 tools docs/pcached.md "## 5. pcachectl" "## 6. Installing"
  "call one pcached management command over JSON-RPC"
  "pcachectl [-s SOCKET | [-H HOST] -p PORT] METHOD [ARG | NAME=VALUE]..."
  "pcached(8), pcached.conf(5)")
pcache_man(pcache-snapshot 1 tools docs/pcache-snapshot.md "## Synopsis" ""
  "inspect, verify, dump, compare, compact and move pcache snapshot stores offline" ""
  "pcached(8), pcached.conf(5)")
add_custom_target(man ALL DEPENDS ${PCACHE_MAN_PAGES})
