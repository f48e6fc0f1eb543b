# mc_store_bench's command line: --version, --help, and refusals of bad flags and workloads
# (a live run against a master is python/tests/e2e/test_bench_harness.py's).
include(${CMAKE_CURRENT_LIST_DIR}/cli_run.cmake)

run(0 ${BENCH} --version)
if(NOT out STREQUAL "mc_store_bench ${VERSION}\n")
  message(FATAL_ERROR "--version printed '${out}'")
endif()
run(0 ${BENCH} --help)
foreach(flag role master protocol local_hostname workloads procs duration pool_bytes segment_size
             json)
  if(NOT out MATCHES "--${flag} ")
    message(FATAL_ERROR "--help does not list --${flag}\n${out}")
  endif()
endforeach()

foreach(bad "--workloads=fly:4k" "--workloads=put:0" "--workloads=put:4k:0" "--workloads=put:4k:2000"
            "--workloads=put:4k:1:gpu" "--workloads=put" "--procs=0" "--procs=65" "--duration=0"
            "--role=other" "--pool_bytes=0" "--nosuchflag")
  run(2 ${BENCH} ${bad})
  if(err STREQUAL "")
    message(FATAL_ERROR "${bad}: refused without a message")
  endif()
endforeach()
run(2 ${BENCH} --role=holder --segment_size=0)
