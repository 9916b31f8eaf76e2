/*
 * version.c - the library's version: the one version source of the
 * project is CMake's project(VERSION), passed to this file alone as
 * PCACHE_VERSION_STRING (src/engine/CMakeLists.txt); every binary prints
 * what the library it runs with answers here.
 */
#include "pc_int.h"

#ifndef PCACHE_VERSION_STRING
#error "PCACHE_VERSION_STRING is defined by src/engine/CMakeLists.txt"
#endif

const char *pcache_version(void)
{
    return PCACHE_VERSION_STRING;
}
