get_filename_component(libdir ${LIB} DIRECTORY)
execute_process(
  COMMAND ${CC} -std=c11 -Wall -Wextra -Werror -I${INC} ${SRC} -L${libdir} -ltransfer_engine
          -Wl,-rpath,${libdir} -o ${OUT}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a plain C11 build against transfer_engine_c.h failed:\n${err}")
endif()
execute_process(COMMAND ${OUT} RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the third-party build ran with status ${rc}:\n${err}")
endif()
