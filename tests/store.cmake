# The snapshot store's tests (storage/). Included by tests/CMakeLists.txt.
# test_store_*.c (integration/, one program per subject: round trips,
# reading without loading, concurrency, corruption, opening) and
# test_store_crash.c (crash/) are registered by the test_*.c glob there;
# they also link the store and the SIP-like data generator, and the
# integration ones share store_testlib.c (the format's byte tables, raw
# LMDB access, the fixtures).
#
# test_store_crash SIGKILLs a saving child PCACHE_CRASH_ITERS times (default
# 200) and checks the store after each kill; RUN_SERIAL so the kills land in
# saves whose timing is not disturbed by other tests. Its timeout scales with
# the iteration count seen at configure time.
set(pc_store_tests test_store_roundtrip test_store_read test_store_race test_store_corrupt
                   test_store_open test_store_golden test_store_salvage)
foreach(name ${pc_store_tests} test_store_crash)
  if(TARGET ${name})
    target_link_libraries(${name} PRIVATE pcache_storecheck pcache_store pcache_sipgen)
  endif()
endforeach()
if(TEST test_store_crash)
  set(pc_crash_iters 200)
  if(DEFINED ENV{PCACHE_CRASH_ITERS} AND "$ENV{PCACHE_CRASH_ITERS}" MATCHES "^[0-9]+$")
    set(pc_crash_iters $ENV{PCACHE_CRASH_ITERS})
  endif()
  math(EXPR pc_crash_timeout "${pc_crash_iters} + 300")
  set_tests_properties(test_store_crash PROPERTIES TIMEOUT ${pc_crash_timeout} RUN_SERIAL TRUE
                                                   LABELS "crash;store")
endif()
foreach(name ${pc_store_tests})
  if(TARGET ${name})
    target_sources(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support/store_testlib.c)
    set_tests_properties(${name} ${pc_parts_of_${name}} PROPERTIES LABELS "integration;store")
  endif()
endforeach()
# test_store_golden reads the golden stores of every format version.
if(TARGET test_store_golden)
  target_compile_definitions(test_store_golden
                             PRIVATE PCACHE_GOLDEN_DIR="${CMAKE_CURRENT_SOURCE_DIR}/integration/golden")
endif()
# test_store_corrupt's stale block is also checked through pcache-snapshot verify.
if(TARGET test_store_corrupt AND TARGET pcache-snapshot)
  target_compile_definitions(test_store_corrupt
                             PRIVATE PCACHE_SNAPSHOT_BIN="$<TARGET_FILE:pcache-snapshot>")
  add_dependencies(test_store_corrupt pcache-snapshot)
endif()
# The journal's tests (written beside the store) link its library when the
# storage/ build made one; test_journal*.c share journal_testlib.c
# (fixtures, the random sequence and the table comparison). They look
# inside the journal (the codec, the rings, the handle's per-process
# state) through its white-box interface, pcache_journal_testing.
foreach(name test_journal test_journal_race test_journal_faults test_journal_kill)
  if(TARGET ${name} AND TARGET pcache_journal)
    target_link_libraries(${name} PRIVATE pcache_journal_testing pcache_storecheck)
  endif()
endforeach()
foreach(name test_journal test_journal_race test_journal_faults test_journal_kill)
  if(TARGET ${name} AND TARGET pcache_journal)
    target_sources(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support/journal_testlib.c)
  endif()
endforeach()
# The persistence policies' test links the policy layer; test_store_corrupt
# hands the persistence open path a damaged store.
foreach(name test_persist test_store_corrupt)
  if(TARGET ${name} AND TARGET pcache_persist)
    target_link_libraries(${name} PRIVATE pcache_persist)
  endif()
endforeach()

# Damaged LMDB pages of a real store, made by a real pcached
# (tests/integration/store_damage.py, issue 18): verify, every verb of
# pcache-snapshot and pcached itself on each damaged copy, salvage.
if(TARGET pcached AND TARGET pcache-snapshot)
  add_test(NAME test_store_damage
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/store_damage.py)
  set_tests_properties(test_store_damage PROPERTIES TIMEOUT 900 LABELS "integration;store"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PCACHE_SNAPSHOT=$<TARGET_FILE:pcache-snapshot>;PYTHONDONTWRITEBYTECODE=1")
endif()
