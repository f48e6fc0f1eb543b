# Installs the build tree into PREFIX, checks what the install holds, builds SRC against it and
# runs it. Any step that fails stops the test with its output.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed:\n${out}${err}")
endif()

# The public headers are installed, and nothing internal is.
foreach(h error.h export.h transfer_engine.h rpc_channel.h store.h store_dummy.h)
  if(NOT EXISTS ${PREFIX}/${INCDIR}/mooncake/${h})
    message(FATAL_ERROR "public header mooncake/${h} is not installed")
  endif()
endforeach()
if(EXISTS ${PREFIX}/${INCDIR}/mooncake/common)
  message(FATAL_ERROR "internal headers (mooncake/common/) were installed")
endif()
foreach(lib libmooncake_core.so libmooncake_common.so libtransfer_engine.so)
  if(NOT EXISTS ${PREFIX}/${LIBDIR}/${lib})
    message(FATAL_ERROR "${lib} is not installed in ${LIBDIR}")
  endif()
endforeach()

# nm's defined symbol names of one ELF file (-D: the dynamic table only).
function(mc_defined_symbols out file)
  execute_process(COMMAND ${NM} --defined-only ${ARGN} ${file}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm ${file} failed:\n${err}")
  endif()
  string(REGEX MATCHALL "[^ \n]+\n" lines "${text}")
  string(REGEX REPLACE "\n" "" names "${lines}")
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# Exports: the common library only our own names, the core only public mc_ ones (MC_API), the
# compat library none of ours.
set(libdir ${PREFIX}/${LIBDIR})
mc_defined_symbols(common_syms ${libdir}/libmooncake_common.so -D)
mc_defined_symbols(core_syms ${libdir}/libmooncake_core.so -D)
mc_defined_symbols(compat_syms ${libdir}/libtransfer_engine.so -D)
foreach(s ${common_syms})
  if(NOT s MATCHES "^mc_")
    message(FATAL_ERROR "libmooncake_common.so exports ${s}, not one of our names")
  endif()
endforeach()
foreach(s ${core_syms})
  if(NOT s MATCHES "^mc_[a-z0-9]" OR s MATCHES "^mc__")
    message(FATAL_ERROR "libmooncake_core.so exports ${s}, which is not public API")
  endif()
endforeach()
foreach(s ${compat_syms})
  if(s MATCHES "^mc_")
    message(FATAL_ERROR "libtransfer_engine.so exports our internal ${s}")
  endif()
endforeach()
list(FIND core_syms mc_engine_create has_create)
list(FIND common_syms mc__malloc has_malloc)
if(has_create EQUAL -1 OR has_malloc EQUAL -1)
  message(FATAL_ERROR "export lists unreadable (mc_engine_create: ${has_create}, mc__malloc: ${has_malloc})")
endif()

# The link model: the common code is in libmooncake_common.so only. No other installed artifact
# defines any of its functions (hidden or not), so a process loading several of them has one
# allocator and one log setting; and the HTTP metadata store is not in the core.
file(GLOB installed_bins ${PREFIX}/${BINDIR}/*)
foreach(f ${libdir}/libmooncake_core.so ${libdir}/libtransfer_engine.so ${installed_bins})
  mc_defined_symbols(syms ${f})
  foreach(s ${common_syms})
    list(FIND syms ${s} hit)
    if(NOT hit EQUAL -1)
      message(FATAL_ERROR "${f} carries its own copy of the common code (${s})")
    endif()
  endforeach()
endforeach()
mc_defined_symbols(core_all ${libdir}/libmooncake_core.so)
list(FILTER core_all INCLUDE REGEX "^mc__http_kv_store")
if(core_all)
  message(FATAL_ERROR "the HTTP metadata store is in libmooncake_core.so: ${core_all}")
endif()

# The installed binaries run from the prefix, finding our libraries through their RUNPATH.
foreach(b mooncake_master mooncake_client mooncake_http_metadata_server)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
                          ${PREFIX}/${BINDIR}/${b} --version
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^${b} ")
    message(FATAL_ERROR "installed ${b} --version: status ${rc}, '${out}${err}'")
  endif()
endforeach()

set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs mooncake
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config cannot read the installed mooncake.pc:\n${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
set(exe ${PREFIX}/install_consumer)
execute_process(
  COMMAND ${CC} -std=c11 -Wall -Wextra -Werror -pedantic ${SRC} ${flags}
          -Wl,-rpath,${PREFIX}/${LIBDIR} -o ${exe}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a plain C11 build against the installed headers failed (${flags}):\n${err}")
endif()
execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed-library program exited with ${rc}:\n${out}${err}")
endif()
message(STATUS "${out}")
