# Writes one man page from the Markdown manual it is part of (cmake -P, run
# by the build: cmake/PcacheMan.cmake), so the page cannot drift from the
# docs: the section of SRC from the heading FROM up to (not including) the
# heading TO (empty: to the end), after a NAME and SYNOPSIS of its own,
# through pandoc to roff, gzip'd as Debian wants.
# In: SRC, FROM, TO, NAME (page name), SECTION, WHATIS (the NAME line's
# text), SYNOPSIS (one line, may be empty), SEEALSO, VERSION, PANDOC, GZIP, OUT.
file(READ "${SRC}" text)
if(NOT FROM STREQUAL "")
  string(FIND "${text}" "${FROM}" a)
  if(a EQUAL -1)
    message(FATAL_ERROR "${SRC}: no heading '${FROM}' for ${NAME}(${SECTION})")
  endif()
  string(SUBSTRING "${text}" ${a} -1 text)
endif()
if(NOT TO STREQUAL "")
  string(FIND "${text}" "${TO}" b)
  if(b EQUAL -1)
    message(FATAL_ERROR "${SRC}: no heading '${TO}' for ${NAME}(${SECTION})")
  endif()
  string(SUBSTRING "${text}" 0 ${b} text)
endif()
set(head "## NAME\n\n${NAME} - ${WHATIS}\n\n")
if(NOT SYNOPSIS STREQUAL "")
  string(APPEND head "## SYNOPSIS\n\n    ${SYNOPSIS}\n\n")
endif()
set(tail "\n## SEE ALSO\n\n${SEEALSO}\n\nThe Markdown source of this page: ${SRC_REL} (installed under /usr/share/doc/pcache).\n")
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
file(WRITE "${OUT}.md" "${head}${text}${tail}")
string(TOUPPER "${NAME}" title)
execute_process(
  COMMAND "${PANDOC}" -f markdown -t man -s --shift-heading-level-by=-1
          -M "title=${title}" -M "section=${SECTION}" -M "header=pcache manual"
          -M "footer=pcache ${VERSION}" -o "${OUT}" "${OUT}.md"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pandoc failed for ${NAME}(${SECTION})")
endif()
execute_process(COMMAND "${GZIP}" -9nf "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip failed for ${NAME}(${SECTION})")
endif()
