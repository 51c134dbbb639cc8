# Writes OUT (a header defining GDTE_BUILD_REVISION, the source tree's `git describe`) only when
# the revision changed, so that a build recompiles gdte_info only then.
#   cmake -DSRC=<repo> -DOUT=<header> -P gen_revision.cmake
set(rev "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    set(rev "")
  endif()
endif()
if(rev STREQUAL "")
  set(rev "unknown (not built from a git checkout)")
endif()
set(text "/* Written by tools/gen_revision.cmake at build time. */\n#define GDTE_BUILD_REVISION \"${rev}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
