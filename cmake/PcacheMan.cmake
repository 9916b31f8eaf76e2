# The man pages: hand-written troff in docs/man/ (NAME, SYNOPSIS,
# DESCRIPTION, OPTIONS, FILES, ENVIRONMENT, EXIT STATUS, EXAMPLES, SEE
# ALSO), short enough to read; the long manuals stay in docs/ (the doc
# package). The build fills in the version and gzips them as Debian wants:
#   pcached(8), pcached.conf(5)       server component
#   pcachectl(1), pcache-snapshot(1)  tools component
# tests/install/test_man.sh renders each at 80 columns and fails on any
# troff warning, a missing section, or an option, key or verb the programs
# list that its page lacks.
find_program(PCACHE_GZIP gzip REQUIRED)
set(PCACHE_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(PCACHE_MAN_PAGES "")
function(pcache_man page section component)
  set(src ${PROJECT_SOURCE_DIR}/docs/man/${page}.${section}.in)
  set(out ${PCACHE_MAN_DIR}/${page}.${section})
  configure_file(${src} ${out} @ONLY)
  add_custom_command(OUTPUT ${out}.gz
    COMMAND ${PCACHE_GZIP} -9nkf ${out}
    DEPENDS ${out} COMMENT "man page ${page}(${section})" VERBATIM)
  install(FILES ${out}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
          COMPONENT ${component})
  set(PCACHE_MAN_PAGES ${PCACHE_MAN_PAGES} ${out}.gz PARENT_SCOPE)
endfunction()

pcache_man(pcached 8 server)
pcache_man(pcached.conf 5 server)
pcache_man(pcachectl 1 tools)
pcache_man(pcache-snapshot 1 tools)
add_custom_target(man ALL DEPENDS ${PCACHE_MAN_PAGES})
