# The install layout and the packages (tests/install/, docs/operations.md):
#   test_install   a staged `cmake --install --prefix /usr` (and /opt/pcache):
#                  the layout, the unit's paths, find_package(pcache) and
#                  pkg-config from a project outside the tree
#   test_packages  cpack's .deb packages: contents, dependencies, maintainer
#                  scripts, a dpkg --root install that starts pcached
#   test_fresh_debian  the README's commands on a fresh Debian 12 (below)
# Label install. In a sanitizer tree they skip: its libraries carry the ASan
# runtime, which an outside program does not load first.
set(pc_install_mode "")
if(PCACHE_SANITIZE)
  set(pc_install_mode sanitize)
endif()
add_test(NAME test_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/test_install.sh
                                   ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${pc_install_mode})
set_tests_properties(test_install PROPERTIES LABELS install TIMEOUT 300 SKIP_RETURN_CODE 77)

# test_cli: --help / --version of every tool, pcachectl's strict numbers and
# default socket (seconds: also in the unit loop)
add_test(NAME test_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/test_cli.sh
                               ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${PROJECT_VERSION})
set_tests_properties(test_cli PROPERTIES LABELS "install;unit" TIMEOUT 60)

# test_check: pcached --check refuses what the start refuses (each case is
# run both ways), and creates nothing
add_test(NAME test_check COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/test_check.sh
                                 $<TARGET_FILE:pcached>)
set_tests_properties(test_check PROPERTIES LABELS "install;server" TIMEOUT 300 SKIP_RETURN_CODE 77)

# test_man: the man pages render at 80 columns without a troff warning, have
# the standard sections, stay short, and cover every option, key (with its
# default) and verb the programs list (skipped without man-db)
add_test(NAME test_man COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/test_man.sh ${PROJECT_BINARY_DIR}
                               ${PROJECT_SOURCE_DIR})
set_tests_properties(test_man PROPERTIES LABELS "install;unit" TIMEOUT 60 SKIP_RETURN_CODE 77)

# test_packages: cpack's .deb packages, dpkg --root into a scratch root (the
# maintainer scripts with DPKG_ROOT), the installed pcached started with the
# installed configuration, purge. Minutes: label install only.
add_test(NAME test_packages COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/test_packages.sh
                                    ${PROJECT_BINARY_DIR} ${pc_install_mode})
set_tests_properties(test_packages PROPERTIES LABELS install TIMEOUT 900 SKIP_RETURN_CODE 77
                                              RUN_SERIAL TRUE)

# test_fresh_debian: the README's run command and install row, as written
# (read from README.md), on a minimal Debian 12 made by debootstrap, in a
# chroot: redis-cli against the run command's pcached; the packages
# installed, started by the init script (no systemd there), SET, restart,
# GET, logrotate, purge; the maintainer scripts under an emulated systemd.
# Root and the Debian archive needed (else SKIPPED). About 10 minutes from
# nothing, less with the cache of the base root and the downloaded .deb
# files (PCACHE_FRESH_CACHE, default /var/cache/pcache-tests). Label
# install and fresh (ctest -L fresh).
add_test(NAME test_fresh_debian COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/test_fresh_debian.sh
                                        ${PROJECT_SOURCE_DIR} ${pc_install_mode})
set_tests_properties(test_fresh_debian PROPERTIES LABELS "install;fresh" TIMEOUT 2400
                                                  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
