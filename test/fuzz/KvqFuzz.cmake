#===- test/fuzz/KvqFuzz.cmake - a libFuzzer target with its ctest run ----===#
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# kvq_add_fuzzer(<target> SOURCES <file>... CORPUS <dir>...
#                [LINK <lib>...] [INCLUDES <dir>...]
#                [INSTRUMENT <object library>...]
#                [NOT_INSTRUMENTED <file name>...] [TEST <name>]
#                [SECONDS <n>] [MAX_LEN <bytes>])
#
# Only in the sanitizer build with clang, native (libFuzzer needs
# -fsanitize=fuzzer and runs on the host): builds <target> from SOURCES
# (instrumented for coverage) and registers the ctest test <name> (default
# <target>, label "fuzz") that runs it for SECONDS (default 10) over the
# checked-in CORPUS directories through run_fuzzer.sh, which also takes the
# longer runs (`./kvq.sh fuzz [SECONDS]`, docs/RUNTIME.md "Fuzzing").
# INSTRUMENT links a copy of each object library compiled with the same
# flags plus coverage instrumentation, so libFuzzer sees the branches of the
# code under test and not only the harness's (the original objects stay as
# they are for everything else). Fuzzers with the same INSTRUMENT list share
# their copies (one of the runtime costs a minute of compile time).
# NOT_INSTRUMENTED names sources of those libraries whose branches do not
# depend on the input (registration, pipeline assembly): their original
# objects are linked instead of a copy, which saves their compile time twice
# over (the passes' Pipelines.cpp and Registration.cpp: ~60 s of CPU).
#
#===----------------------------------------------------------------------===#
include_guard(GLOBAL)

set(KVQ_FUZZ_ENABLED OFF)
if(KVQ_SANITIZE AND CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND
   NOT CMAKE_CROSSCOMPILING)
  set(KVQ_FUZZ_ENABLED ON)
endif()

# Links into `target` a copy of object library `lib` compiled with coverage
# instrumentation (same sources, include directories, definitions, options
# and per-source settings, and the same dependencies).
function(_kvq_fuzz_instrument target lib)
  # Named by the whole list: a copy's link interface leaves out the other
  # libraries copied with it (below), so only the same list can share it.
  get_target_property(copied ${target} KVQ_FUZZ_INSTRUMENT)
  get_target_property(skipped ${target} KVQ_FUZZ_NOT_INSTRUMENTED)
  list(JOIN copied "_" set)
  if(skipped)
    list(JOIN skipped "_" skip_set)
    string(APPEND set "_but_${skip_set}")
  endif()
  string(MAKE_C_IDENTIFIER "kvq_fuzz_cov_${lib}_of_${set}" copy)
  get_target_property(srcs ${lib} SOURCES)
  get_target_property(dir ${lib} SOURCE_DIR)
  list(TRANSFORM srcs PREPEND ${dir}/ REGEX "^[^/$]")
  # The library's own objects of the sources left out.
  set(kept_srcs)
  foreach(name IN LISTS skipped)
    string(REPLACE "." "\\." name_regex "${name}")
    set(matching ${srcs})
    list(FILTER matching INCLUDE REGEX "/${name_regex}$")
    if(matching)
      set_property(TARGET ${target} APPEND PROPERTY KVQ_FUZZ_NOT_INSTRUMENTED_FOUND
                   ${name})
    endif()
    list(FILTER srcs EXCLUDE REGEX "/${name_regex}$")
    list(APPEND kept_srcs "/${name_regex}\\.o")
  endforeach()
  if(kept_srcs)
    list(JOIN kept_srcs "|" kept_regex)
    target_sources(${target} PRIVATE
      "$<FILTER:$<TARGET_OBJECTS:${lib}>,INCLUDE,${kept_regex}>")
  endif()
  if(TARGET ${copy})
    target_link_libraries(${target} PRIVATE ${copy})
    return()
  endif()
  # Per-source settings live in the library's directory: copy them here.
  foreach(src IN LISTS srcs)
    foreach(prop COMPILE_DEFINITIONS COMPILE_OPTIONS INCLUDE_DIRECTORIES)
      get_source_file_property(value ${src} DIRECTORY ${dir} ${prop})
      if(value)
        set_source_files_properties(${src} PROPERTIES ${prop} "${value}")
      endif()
    endforeach()
  endforeach()
  add_library(${copy} OBJECT ${srcs})
  target_include_directories(${copy} PUBLIC
    $<TARGET_PROPERTY:${lib},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${copy} PRIVATE
    $<TARGET_PROPERTY:${lib},COMPILE_DEFINITIONS>)
  target_compile_options(${copy} PRIVATE
    $<TARGET_PROPERTY:${lib},COMPILE_OPTIONS> -fsanitize=fuzzer-no-link)
  get_target_property(deps ${lib} MANUALLY_ADDED_DEPENDENCIES)
  if(deps)
    add_dependencies(${copy} ${deps})
  endif()
  # What the library's users link. add_mlir_library's obj.X holds the
  # objects of archive X, whose interface has the right MLIR libraries
  # (libMLIR.so, not the component archives obj.X lists); the archives of
  # libraries copied here too are left out.
  set(archive ${lib})
  if(lib MATCHES "^obj\\.(.*)$")
    if(TARGET ${CMAKE_MATCH_1})
      set(archive ${CMAKE_MATCH_1})
    endif()
  endif()
  get_target_property(libs ${archive} INTERFACE_LINK_LIBRARIES)
  list(TRANSFORM copied REPLACE "^obj\\." "")
  if(libs)
    list(REMOVE_ITEM libs ${copied})
    target_link_libraries(${copy} PUBLIC ${libs})
  endif()
  target_link_libraries(${target} PRIVATE ${copy})
endfunction()

# A NOT_INSTRUMENTED name that is no source of the INSTRUMENT libraries is
# a mistake (it would leave the file instrumented without a word).
function(_kvq_fuzz_check_not_instrumented target)
  get_target_property(skipped ${target} KVQ_FUZZ_NOT_INSTRUMENTED)
  get_target_property(found ${target} KVQ_FUZZ_NOT_INSTRUMENTED_FOUND)
  get_target_property(copied ${target} KVQ_FUZZ_INSTRUMENT)
  list(JOIN copied ", " copied)
  foreach(name IN LISTS skipped)
    if(NOT name IN_LIST found)
      message(FATAL_ERROR "kvq_add_fuzzer(${target}): NOT_INSTRUMENTED "
              "${name} is not a source of ${copied}")
    endif()
  endforeach()
endfunction()

function(kvq_add_fuzzer target)
  if(NOT KVQ_FUZZ_ENABLED)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 F "" "TEST;SECONDS;MAX_LEN"
                        "SOURCES;CORPUS;LINK;INCLUDES;INSTRUMENT;NOT_INSTRUMENTED")
  if(NOT F_SOURCES OR NOT F_CORPUS)
    message(FATAL_ERROR "kvq_add_fuzzer(${target}): SOURCES and CORPUS needed")
  endif()
  if(NOT F_TEST)
    set(F_TEST ${target})
  endif()
  if(NOT F_SECONDS)
    set(F_SECONDS 10)
  endif()

  add_executable(${target} ${F_SOURCES})
  target_compile_options(${target} PRIVATE -fsanitize=fuzzer)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  target_include_directories(${target} PRIVATE ${F_INCLUDES})
  target_link_libraries(${target} PRIVATE ${F_LINK})
  # The libraries may be defined after this call (dialect/ and passes/ come
  # after test/): copy them once the top-level directory is complete.
  set_property(TARGET ${target} PROPERTY KVQ_FUZZ_INSTRUMENT ${F_INSTRUMENT})
  set_property(TARGET ${target} PROPERTY KVQ_FUZZ_NOT_INSTRUMENTED
               ${F_NOT_INSTRUMENTED})
  foreach(lib IN LISTS F_INSTRUMENT)
    # (EVAL: a deferred call's arguments are otherwise read when it runs.)
    cmake_language(EVAL CODE "cmake_language(DEFER DIRECTORY
      [[${PROJECT_SOURCE_DIR}]] CALL _kvq_fuzz_instrument [[${target}]]
      [[${lib}]])")
  endforeach()
  if(F_NOT_INSTRUMENTED)
    cmake_language(EVAL CODE "cmake_language(DEFER DIRECTORY
      [[${PROJECT_SOURCE_DIR}]] CALL _kvq_fuzz_check_not_instrumented
      [[${target}]])")
  endif()

  set(extra)
  if(F_MAX_LEN)
    set(extra -max_len=${F_MAX_LEN})
  endif()
  add_test(NAME ${F_TEST}
    COMMAND sh ${PROJECT_SOURCE_DIR}/test/fuzz/run_fuzzer.sh ${F_SECONDS}
            $<TARGET_FILE:${target}> ${PROJECT_BINARY_DIR}/fuzz/${target}
            ${F_CORPUS} ${extra})
  set_tests_properties(${F_TEST} PROPERTIES LABELS fuzz)
endfunction()
