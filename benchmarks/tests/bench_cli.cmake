# The bench's command line: --version, --help, text output, and refusals of bad flags.
include(${CMAKE_CURRENT_LIST_DIR}/cli_run.cmake)

run(0 ${BENCH} --version)
if(NOT out STREQUAL "mooncake_transfer_bench ${VERSION}\n")
  message(FATAL_ERROR "--version printed '${out}'")
endif()
run(0 ${BENCH} --help)
foreach(flag mode metadata_server local_server_name segment_id protocol operation buffer_size
             block_size batch_size threads duration rounds report_limits json)
  if(NOT out MATCHES "--${flag} ")
    message(FATAL_ERROR "--help does not list --${flag}\n${out}")
  endif()
endforeach()

# Text output with limits: one line per round and the median ratio.
run(0 ${BENCH} --duration=0.3 --rounds=2 --limits_duration=0.1 --block_size=16k --buffer_size=1m)
if(NOT out MATCHES "round 1    : [0-9.]+ GB/s" OR NOT out MATCHES "round 2    : "
   OR NOT out MATCHES "ratio      : [0-9.]+ of tcp pump \\(median of rounds\\)")
  message(FATAL_ERROR "text output with limits malformed:\n${out}")
endif()

# Text output of a short run without limits: the throughput and latency lines are there.
run(0 ${BENCH} --duration=0.5 --block_size=16k --buffer_size=1m --noreport_limits)
if(NOT out MATCHES "throughput : [0-9.]+ GB/s" OR NOT out MATCHES "latency    : p50 [0-9.]+ us, p99 [0-9.]+ us")
  message(FATAL_ERROR "text output malformed:\n${out}")
endif()
if(out MATCHES "ratio")
  message(FATAL_ERROR "--noreport_limits still printed ratios:\n${out}")
endif()

# Bad input: each gets exit status 2 and a message naming the problem.
run(2 ${BENCH} --mode=sideways)
if(NOT err MATCHES "--mode")
  message(FATAL_ERROR "no message for a bad --mode: ${err}")
endif()
run(2 ${BENCH} --operation=erase)
run(2 ${BENCH} --block_size=0)
run(2 ${BENCH} --block_size=2m --buffer_size=1m)
run(2 ${BENCH} --threads=0)
run(2 ${BENCH} --rounds=0)
run(2 ${BENCH} --rounds=65)
run(2 ${BENCH} --batch_size=-3)
run(2 ${BENCH} --duration=-1)
run(2 ${BENCH} --block_size=lots)
run(2 ${BENCH} --no_such_flag=1)
if(NOT err MATCHES "no_such_flag")
  message(FATAL_ERROR "unknown flag not named: ${err}")
endif()
run(2 ${BENCH} --mode=initiator)
if(NOT err MATCHES "segment_id")
  message(FATAL_ERROR "initiator without --segment_id not explained: ${err}")
endif()
# A target that does not exist: a clear failure, not a hang.
run(1 ${BENCH} --mode=initiator --segment_id=127.0.0.1:1 --duration=0.2 --noreport_limits
    --buffer_size=1m --block_size=64k)
if(NOT err MATCHES "127.0.0.1:1")
  message(FATAL_ERROR "unreachable target not named: ${err}")
endif()

run(0 ${LIMITS} --json --duration=0.2 --block_size=64k --buffer_size=4m)
string(JSON mem GET "${out}" memcpy_gbps)
string(JSON pump GET "${out}" tcp_pump_gbps)
if(mem STREQUAL "0" OR pump STREQUAL "0")
  message(FATAL_ERROR "mc_limits measured nothing: ${out}")
endif()
run(2 ${LIMITS} --block_size=0)
message(STATUS "ok")
