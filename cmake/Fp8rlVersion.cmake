# Writes the version header with the current git revision (script mode, run at every build so
# that `fp8rl --version` names the commit it was built from, not the one CMake first saw):
#   cmake -DSOURCE_DIR=… -DGIT=… -DVERSION=… -DINPUT=version.hpp.in -DOUTPUT=version.hpp -P …
# configure_file leaves OUTPUT untouched when its text would not change, so an unchanged
# revision rebuilds nothing.
set(FP8RL_VERSION "${VERSION}")
set(FP8RL_GIT_DESCRIBE "unknown")
if(GIT)
  execute_process(COMMAND "${GIT}" describe --always --dirty
    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE describe
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND describe)
    set(FP8RL_GIT_DESCRIBE "${describe}")
  endif()
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
