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
