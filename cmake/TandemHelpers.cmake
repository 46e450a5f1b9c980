# The headers every test compiles (GoogleTest, GoogleMock, Abseil's status
# and strings, protobuf's message runtime), precompiled once per
# configuration and reused by every tandem_cc_test target: they are a third
# to a half of a test source's compile time, which is most of the test
# command's (deploy/test.sh builds the tests twice). GCC checks that the
# header was built with compatible flags and parses the headers instead
# when it was not (-Winvalid-pch warns), so this never changes a result.
option(TANDEM_TEST_PCH "Precompile the tests' common headers" ON)
# OFF: the core unit tests (below) are not built in this tree. deploy/test.sh
# builds and runs them once, in its ASan+UBSan stage, and turns them off in
# its Release stage, which builds and runs everything else (the ML worker
# family's unit tests, integration, adversarial, faults, python, bench,
# packaging, docker): a unit test then runs under the sanitizers, where a
# memory or UB error shows, not a second time at -O3.
option(TANDEM_CORE_UNIT_TESTS "Build the core unit tests (tandem_core_unit_tests)" ON)
# Test sources compile at a lower optimization level than the code they
# test: a test source is mostly GoogleTest macros, fixtures and assertions,
# whose code generation (at -O3, or ASan+UBSan-instrumented at -O1) is most
# of the suite's compile time, while the libraries and daemons under test
# keep the configuration's level (-O3 in Release, -O1 under the
# sanitizers). One ASan+UBSan test source (report_store_test.cc, without
# the PCH): 51 s at -O1, 34 s at -O0. Empty: the configuration's level.
if(TANDEM_SANITIZERS)
  set(_test_opt_default -O0)
elseif(CMAKE_BUILD_TYPE STREQUAL "Release")
  set(_test_opt_default -O1)
else()
  set(_test_opt_default "")
endif()
set(TANDEM_TEST_OPT "${_test_opt_default}" CACHE STRING
    "Optimization flag of the test sources (the libraries keep the build type's)")
function(tandem_test_pch)
  if(TARGET tandem_test_pch)
    return()
  endif()
  # An executable, so that the header is compiled with the tests' own
  # position-independence flags (-fPIE beside -fPIC would void it).
  add_executable(tandem_test_pch ${PROJECT_SOURCE_DIR}/cmake/test_pch.cc)
  target_compile_options(tandem_test_pch PRIVATE -pthread ${TANDEM_TEST_OPT})
  target_link_libraries(tandem_test_pch PRIVATE GTest::gmock GTest::gtest absl::status
    absl::statusor absl::strings absl::time absl::synchronization protobuf::libprotobuf)
  target_precompile_headers(tandem_test_pch PRIVATE
    <functional> <map> <memory> <string> <vector>
    <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
    <absl/strings/string_view.h> <absl/synchronization/mutex.h> <absl/time/time.h>
    <google/protobuf/message.h> <google/protobuf/generated_message_reflection.h>
    <google/protobuf/repeated_field.h> <gmock/gmock.h> <gtest/gtest.h>)
endfunction()

# tandem_cc_test(NAME name SRCS a.cc... DEPS lib... [LABELS unit|integration|adversarial|gpu]) (one label)
#                [TIMEOUT s] [PROPERTIES name value...] (more ctest properties of its tests)
# Adds one GoogleTest binary and registers its tests with ctest under the labels
# (default: unit). Discovery runs before the tests, not at build time.
function(tandem_cc_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;PROPERTIES" ${ARGN})
  if(NOT TANDEM_BUILD_TESTS)
    return()
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # Unit tests outside the ML worker family (ml/kernels, ml/worker, ml/eco:
  # the kernels of the other papers, behind the worker's own validation) and
  # the simulator (server/sim: tandem-sim, no deployed party runs it) are
  # the "core" unit tests: what the sanitizer stage of deploy/test.sh builds
  # (target tandem_core_unit_tests) and runs, so that the stage covers every
  # component on the federation's path without compiling the Eigen-heavy
  # kernels a second time.
  file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(_core FALSE)
  if("unit" IN_LIST T_LABELS AND NOT _rel MATCHES "^(ml/(kernels|worker|eco)|server/sim)(/|$)")
    set(_core TRUE)
  endif()
  if(_core AND NOT TANDEM_CORE_UNIT_TESTS)
    return()  # the sanitizer stage builds and runs it
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  if(TANDEM_TEST_OPT)
    target_compile_options(${T_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TANDEM_TEST_OPT}>)
  endif()
  if("unit" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY TANDEM_UNIT_TEST_TARGETS ${T_NAME})
  endif()
  if(_core)
    set_property(GLOBAL APPEND PROPERTY TANDEM_CORE_UNIT_TEST_TARGETS ${T_NAME})
  endif()
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} tandem_base_testing GTest::gmock GTest::gtest_main)
  if(TANDEM_TEST_PCH)
    tandem_test_pch()
    # -pthread (_REENTRANT) on every test, as gRPC's users get it: one
    # header for all.
    target_compile_options(${T_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-pthread>)
    target_precompile_headers(${T_NAME} REUSE_FROM tandem_test_pch)
  endif()
  # gtest_discover_tests passes PROPERTIES on as a flat list, so a second
  # label would read as a property name (and TIMEOUT be lost): the first
  # label goes with the discovered tests, and the whole list is set by an
  # include that runs after their discovery, on the list of their names it
  # leaves in ${T_NAME}_TESTS.
  list(GET T_LABELS 0 _first_label)
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
    PROPERTIES LABELS ${_first_label} TIMEOUT ${T_TIMEOUT} ${T_PROPERTIES})
  list(LENGTH T_LABELS _num_labels)
  if(_num_labels GREATER 1)
    set(_labels_file "${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_labels.cmake")
    file(WRITE "${_labels_file}"
      "if(DEFINED ${T_NAME}_TESTS)\n"
      "  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES LABELS \"${T_LABELS}\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_labels_file}")
  endif()
endfunction()

# tandem_cc_benchmark(NAME name SRCS a.cc... DEPS lib...)
# Adds one Google Benchmark binary and a ctest entry (label bench) that runs it
# once with a minimal time, so benchmarks keep compiling and running. The
# figures themselves come from running the binary by hand (bench/README.md).
function(tandem_cc_benchmark)
  cmake_parse_arguments(B "" "NAME" "SRCS;DEPS;ARGS" ${ARGN})
  if(NOT TANDEM_BUILD_BENCHMARKS)
    return()
  endif()
  add_executable(${B_NAME} ${B_SRCS})
  target_link_libraries(${B_NAME} PRIVATE ${B_DEPS} benchmark::benchmark benchmark::benchmark_main)
  if(TANDEM_BUILD_TESTS)
    add_test(NAME ${B_NAME}.smoke COMMAND ${B_NAME} --benchmark_min_time=0.001 ${B_ARGS})
    set_tests_properties(${B_NAME}.smoke PROPERTIES LABELS bench TIMEOUT 600)
  endif()
endfunction()

# tandem_collect_static_closure(<target> <archives_var> <third_party_var>)
# The project's static libraries <target> links, directly or through other
# project targets (<archives_var>, <target> first), and the third-party
# items they link (<third_party_var>: imported targets such as absl::status
# or TBB::tbb, and plain library names), each once. What libtandem_client.a
# merges and what its users link besides it (client/CMakeLists.txt,
# cmake/TandemInstall.cmake). Call it after every target <target> reaches
# is defined; a link item with a generator expression other than
# $<LINK_ONLY:...> stops the configuration (it could not be resolved here).
function(tandem_collect_static_closure root out_archives out_third)
  set(todo ${root})
  set(seen)
  set(archives)
  set(third)
  while(todo)
    list(POP_FRONT todo t)
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(imported ${t} IMPORTED)
    if(imported)
      list(APPEND third ${t})
      continue()
    endif()
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND archives ${t})
    endif()
    set(deps)
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(l ${t} ${prop})
      if(l)
        list(APPEND deps ${l})
      endif()
    endforeach()
    foreach(d ${deps})
      if(d MATCHES "^::@")
        continue()  # CMake's marker of a dependency added from another directory
      endif()
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" d "${d}")
      if(d MATCHES "\\$<")
        message(FATAL_ERROR "tandem_collect_static_closure: ${t} links '${d}'")
      endif()
      if(TARGET ${d})
        list(APPEND todo ${d})
      elseif(NOT d IN_LIST third)
        list(APPEND third ${d})
      endif()
    endforeach()
  endwhile()
  list(REMOVE_DUPLICATES third)
  set(${out_archives} ${archives} PARENT_SCOPE)
  set(${out_third} ${third} PARENT_SCOPE)
endfunction()
