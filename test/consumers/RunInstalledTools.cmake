# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest driver of kvq-installed-tools (test/consumers/CMakeLists.txt):
#   cmake -DPREFIX=<installed kvq> -DBUILD_DIR=<kvq build> -DSOURCE_DIR=<kvq>
#         -DVERSION=<KVQ_VERSION_STRING> -P RunInstalledTools.cmake
# Runs what `cmake --install` put in PREFIX/bin the way a user would, with
# no LD_LIBRARY_PATH: each tool must load its libraries (its RUNPATH), print
# the version the build was made with and do one small real job; the
# generated reference docs and only the public runtime headers must be
# installed.
cmake_minimum_required(VERSION 3.20)
set(bin ${PREFIX}/bin)
set(model ${SOURCE_DIR}/models/stories260K/stories260K.bin)
set(scratch ${PREFIX}/../installed-tools)
file(REMOVE_RECURSE ${scratch})
file(MAKE_DIRECTORY ${scratch})

# Runs TOOL ARGS... with a clean loader environment; fails unless it exits 0
# and its stdout matches every EXPECT regex.
function(run_tool tool)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "INPUT" "ARGS;EXPECT")
  set(input)
  if(arg_INPUT)
    set(input INPUT_FILE ${arg_INPUT})
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
            ${bin}/${tool} ${arg_ARGS}
    ${input} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(JOIN arg_ARGS " " shown)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installed ${tool} ${shown} failed (${rc}):\n${out}\n${err}")
  endif()
  foreach(re IN LISTS arg_EXPECT)
    if(NOT out MATCHES "${re}")
      message(FATAL_ERROR "installed ${tool} ${shown}: output does not "
                          "match '${re}':\n${out}\n${err}")
    endif()
  endforeach()
  message(STATUS "ok: ${tool} ${shown}")
endfunction()

string(REPLACE "+" "\\+" version_re "${VERSION}")
foreach(tool kvq-opt kvq-import kvq-run kvq-lsp-server kvq-eval kvq-bench)
  if(NOT EXISTS ${bin}/${tool})
    message(FATAL_ERROR "${tool} is not installed in ${bin}")
  endif()
  # Every library resolves, and none from the build tree.
  execute_process(COMMAND ldd ${bin}/${tool} OUTPUT_VARIABLE libs
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR libs MATCHES "not found")
    message(FATAL_ERROR "installed ${tool} does not find its libraries:\n${libs}")
  endif()
  string(REGEX MATCHALL "=> [^ \t\n]+" paths "${libs}")
  foreach(path IN LISTS paths)
    string(SUBSTRING "${path}" 3 -1 path)
    string(FIND "${path}" "${BUILD_DIR}/" in_build)
    string(FIND "${path}" "${PREFIX}/" in_prefix)
    if(in_build EQUAL 0 AND NOT in_prefix EQUAL 0)
      message(FATAL_ERROR "installed ${tool} loads ${path} from the build "
                          "tree:\n${libs}")
    endif()
  endforeach()
  run_tool(${tool} ARGS --version EXPECT "^${tool} .*${version_re}")
endforeach()

# kvq-opt: the example graph configured and lowered to runtime calls.
run_tool(kvq-opt
  ARGS ${SOURCE_DIR}/examples/decoder_layer.mlir
       "--kvq-configure-caches=method=kivi bits=2" --kvq-to-llvm
  EXPECT "llvm.call @kvq_cache_create" "llvm.call @kvq_cache_attend")

# kvq-import: the shipped checkpoint as MLIR, then checked by kvq-opt.
run_tool(kvq-import ARGS ${model} -o ${scratch}/stories260K.mlir)
run_tool(kvq-opt
  ARGS ${scratch}/stories260K.mlir --kvq-quantize-kv-cache=method=kivi
  EXPECT "func.func @decode" "!kvq.cache<layers = 5")

# kvq-run: compile the model with a 2-bit KIVI cache (JIT) and generate.
run_tool(kvq-run ARGS ${model} --steps 4 --method kivi
  EXPECT "\\[kivi\\] Once upon a time" "\\(4 tokens")

# kvq-eval: a run on the stored K/V of the same model.
set(data ${SOURCE_DIR}/test/data/stories260K)
run_tool(kvq-eval
  ARGS --keys ${data}/k0.npy --values ${data}/v0.npy --method kivi --bits 2
  EXPECT "kivi")

# kvq-lsp-server: initialize, shutdown, exit over stdin (JSON-RPC).
set(lsp_in ${scratch}/lsp-input.txt)
file(WRITE ${lsp_in} "")
foreach(msg
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"processId\":null,\"rootUri\":null,\"capabilities\":{}}}"
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"shutdown\"}"
    "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}")
  string(LENGTH "${msg}" n)
  file(APPEND ${lsp_in} "Content-Length: ${n}\r\n\r\n${msg}")
endforeach()
run_tool(kvq-lsp-server INPUT ${lsp_in}
  EXPECT "\"id\":1" "\"capabilities\"" "\"definitionProvider\":true")

# The generated reference.
foreach(pair "KvqDialect.md|kvq" "KvqOps.md|kvq.cache_attend"
             "KvqPasses.md|-kvq-configure-caches")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 doc)
  list(GET pair 1 needle)
  set(path ${PREFIX}/share/doc/kvq/${doc})
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "${doc} is not installed (${path})")
  endif()
  file(READ ${path} text)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${path} does not mention '${needle}'")
  endif()
  message(STATUS "ok: ${path}")
endforeach()

# The runtime's public headers are the C ABI and the config fields it names;
# the rules, limits and entry-point list stay kvq's own.
foreach(header runtime.h runtime_metal.h config_fields.h)
  if(NOT EXISTS ${PREFIX}/include/kvq/${header})
    message(FATAL_ERROR "kvq/${header} is not installed")
  endif()
endforeach()
foreach(header config_rules.h config_limits.h entry_points.def)
  if(EXISTS ${PREFIX}/include/kvq/${header})
    message(FATAL_ERROR "kvq/${header} is installed: it is internal")
  endif()
endforeach()
message(STATUS "ok: public runtime headers only")
