# The headers every test compiles (GoogleTest, GoogleMock, Abseil's status
# and strings, protobuf's message runtime), precompiled once per
# configuration and reused by every tandem_cc_test target: they are a third
# to a half of a test source's compile time, which is most of the test
# command's (deploy/test.sh builds the tests twice). GCC checks that the
# header was built with compatible flags and parses the headers instead
# when it was not (-Winvalid-pch warns), so this never changes a result.
option(TANDEM_TEST_PCH "Precompile the tests' common headers" ON)
function(tandem_test_pch)
  if(TARGET tandem_test_pch)
    return()
  endif()
  # An executable, so that the header is compiled with the tests' own
  # position-independence flags (-fPIE beside -fPIC would void it).
  add_executable(tandem_test_pch ${PROJECT_SOURCE_DIR}/cmake/test_pch.cc)
  target_compile_options(tandem_test_pch PRIVATE -pthread)
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
# Adds one GoogleTest binary and registers its tests with ctest under the labels
# (default: unit). Discovery runs before the tests, not at build time.
function(tandem_cc_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
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
  # the kernels of the other papers, behind the worker's own validation) are
  # the "core" unit tests: what the sanitizer stage of deploy/test.sh builds
  # (target tandem_core_unit_tests) and runs, so that the stage covers every
  # component on the federation's path without compiling the Eigen-heavy
  # kernels a second time.
  file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  add_executable(${T_NAME} ${T_SRCS})
  if("unit" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY TANDEM_UNIT_TEST_TARGETS ${T_NAME})
  endif()
  if("unit" IN_LIST T_LABELS AND NOT _rel MATCHES "^ml/(kernels|worker|eco)(/|$)")
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
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
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
