# ctest: install the build into a fresh prefix, build a consumer project against it as a user would
# (a fresh build folder, CMAKE_PREFIX_PATH only: the prefix, and EXTRA_PREFIX such as torch's), run
# its program APP from the repository's root and match what it prints against the regex in the
# project's expected-output.regex.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DPROJECT=tests/consumer[/torch]
#         -DAPP=my_app [-DEXTRA_PREFIX=...] -P run.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
foreach(stray _kernelop kernelop.py)
  file(GLOB at_root "${WORK_DIR}/prefix/${stray}*")
  if(at_root)
    message(FATAL_ERROR "the install put ${at_root} at the prefix's root")
  endif()
endforeach()
# (Not through run(): its ARGN would split the prefix list at the ';'.)
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/${PROJECT}" -B "${WORK_DIR}/build" -G Ninja
                "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix;${EXTRA_PREFIX}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${PROJECT} failed (${rc}):\n${out}\n${err}")
endif()
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
execute_process(COMMAND "${WORK_DIR}/build/${APP}" WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${APP} failed (${rc}):\n${out}\n${err}")
endif()
message("${out}")
file(READ "${SOURCE_DIR}/${PROJECT}/expected-output.regex" expect)
string(STRIP "${expect}" expect)
if(NOT out MATCHES "${expect}")
  message(FATAL_ERROR "unexpected output:\n${out}\nnot matching:\n${expect}")
endif()
