# Install rules, the SDK's CMake package config and pkg-config file, and the
# Debian packages (CPack DEB) of one build tree:
#
#   component    package               what
#   aggregator   tandem-aggregator     the daemon, unit tandem-aggregator@.service,
#                                      /etc/tandem/aggregator-{leader,helper}.textproto
#   coordinator  tandem-coordinator    the daemon, its unit, /etc/tandem/coordinator.flags
#   worker       tandem-worker         the daemon, its unit, /etc/tandem/worker.flags
#   tools        tandem-tools          tandem-client, -sim, -status, -admin, -train,
#                                      tandem-make-certs
#   sdk          libtandem-client0     libtandem_client.so.0
#   sdk_dev      libtandem-client-dev  headers, libtandem_client.{so,a}, tandem-client{,-static}.pc,
#                                      find_package(tandem) (tandemConfig.cmake)
#   python       python3-tandem        the `tandem` package (TANDEM_BUILD_PYTHON)
#
#   cmake --install build --component sdk --component sdk_dev --prefix /opt/x
#   (cd build && cpack -G DEB -B debs)       # every package, into build/debs
#
# The packages target Debian 12 (the build's libraries): Depends come from
# dpkg-shlibdeps (CPACK_DEBIAN_PACKAGE_SHLIBDEPS), so a package names the
# Debian libraries its binaries load. Daemon units and their hardening:
# deploy/packaging/systemd; what the packages do at install:
# deploy/packaging/postinst and README.md.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_pkg ${PROJECT_SOURCE_DIR}/deploy/packaging)
set(_docdir ${CMAKE_INSTALL_DATAROOTDIR}/doc)

# --- daemons and tools ---------------------------------------------------
install(TARGETS tandem-aggregator RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT aggregator)
install(TARGETS tandem-coordinator RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT coordinator)
install(TARGETS tandem-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT worker)
install(TARGETS tandem-client tandem-sim tandem-status tandem-admin tandem-train
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/make-certs.sh DESTINATION ${CMAKE_INSTALL_BINDIR}
  RENAME tandem-make-certs COMPONENT tools)

# Configuration under /etc/tandem (absolute: /etc whatever the prefix; a
# `cmake --install` of these components needs root or DESTDIR) and the
# units under <prefix>/lib/systemd/system.
set(_conffiles_aggregator /etc/tandem/aggregator-leader.textproto
  /etc/tandem/aggregator-helper.textproto)
set(_conffiles_coordinator /etc/tandem/coordinator.flags)
set(_conffiles_worker /etc/tandem/worker.flags)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/leader.textproto DESTINATION /etc/tandem
  RENAME aggregator-leader.textproto COMPONENT aggregator)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/helper.textproto DESTINATION /etc/tandem
  RENAME aggregator-helper.textproto COMPONENT aggregator)
install(FILES ${_pkg}/etc/coordinator.flags DESTINATION /etc/tandem COMPONENT coordinator)
install(FILES ${_pkg}/etc/worker.flags DESTINATION /etc/tandem COMPONENT worker)
install(FILES ${_pkg}/systemd/tandem-aggregator@.service DESTINATION lib/systemd/system
  COMPONENT aggregator)
install(FILES ${_pkg}/systemd/tandem-coordinator.service DESTINATION lib/systemd/system
  COMPONENT coordinator)
install(FILES ${_pkg}/systemd/tandem-worker.service DESTINATION lib/systemd/system
  COMPONENT worker)
foreach(c aggregator coordinator worker tools)
  install(FILES ${_pkg}/README.md DESTINATION ${_docdir}/tandem-${c} COMPONENT ${c})
endforeach()

# --- the client SDK --------------------------------------------------------
if(TANDEM_BUILD_SDK_SHARED)
  install(TARGETS tandem_client_shared
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT sdk NAMELINK_COMPONENT sdk_dev)
  install(FILES ${CMAKE_BINARY_DIR}/client/sdk/libtandem_client.a
    DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT sdk_dev)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/tandem
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT sdk_dev FILES_MATCHING PATTERN "*.h")
  install(FILES ${PROJECT_SOURCE_DIR}/examples/cpp_app/CMakeLists.txt
    ${PROJECT_SOURCE_DIR}/examples/cpp_app/main.cc ${PROJECT_SOURCE_DIR}/examples/cpp_app/README.md
    DESTINATION ${_docdir}/libtandem-client-dev/examples/cpp_app COMPONENT sdk_dev)

  # What libtandem_client.a's users link besides it: find_dependency calls
  # and imported targets for the CMake config, pkg-config modules and flags
  # for tandem-client-static.pc (client/CMakeLists.txt collected the list).
  set(_static_targets)
  set(_static_finds)
  set(_pc_private)
  set(_pc_libs_private)
  foreach(item ${TANDEM_SDK_STATIC_THIRD_PARTY})
    if(item MATCHES "^absl::(.+)$")
      list(APPEND _static_finds "find_dependency(absl CONFIG)")
      list(APPEND _pc_private "absl_${CMAKE_MATCH_1}")
    elseif(item MATCHES "^gRPC::(grpc\\+\\+|grpc|gpr)$")
      list(APPEND _static_finds "find_dependency(gRPC CONFIG)")
      list(APPEND _pc_private "${CMAKE_MATCH_1}")
    elseif(item STREQUAL "protobuf::libprotobuf")
      list(APPEND _static_finds "find_dependency(Protobuf)")
      list(APPEND _pc_private protobuf)
    elseif(item MATCHES "^OpenSSL::(SSL|Crypto)$")
      list(APPEND _static_finds "find_dependency(OpenSSL)")
      string(TOLOWER "lib${CMAKE_MATCH_1}" _m)
      list(APPEND _pc_private ${_m})
    elseif(item MATCHES "^TBB::")
      list(APPEND _static_finds "find_dependency(TBB CONFIG)")
      list(APPEND _pc_private tbb)
    elseif(item MATCHES "^Eigen3::")
      list(APPEND _static_finds "find_dependency(Eigen3 CONFIG)")
      list(APPEND _pc_private eigen3)
    elseif(item STREQUAL "SQLite::SQLite3")
      list(APPEND _static_finds "find_dependency(SQLite3)")
      list(APPEND _pc_private sqlite3)
    elseif(item STREQUAL "ZLIB::ZLIB")
      list(APPEND _static_finds "find_dependency(ZLIB)")
      list(APPEND _pc_private zlib)
    elseif(item STREQUAL "PkgConfig::TANDEM_YAML")
      list(APPEND _static_finds "find_dependency(PkgConfig)"
        "pkg_check_modules(TANDEM_YAML REQUIRED IMPORTED_TARGET yaml-0.1)")
      list(APPEND _pc_private yaml-0.1)
    elseif(item MATCHES "^nlohmann_json::")
      list(APPEND _static_finds "find_dependency(nlohmann_json CONFIG)")
      list(APPEND _pc_private nlohmann_json)
    elseif(item STREQUAL "Threads::Threads")
      list(APPEND _static_finds "find_dependency(Threads)")
      list(APPEND _pc_libs_private -pthread)
    elseif(item MATCHES "^CUDA::")
      list(APPEND _static_finds "find_dependency(CUDAToolkit)")
      list(APPEND _pc_libs_private -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt)
    elseif(item MATCHES "^-")
      list(APPEND _pc_libs_private ${item})
      continue()
    elseif(NOT item MATCHES "::")
      list(APPEND _pc_libs_private -l${item})
      continue()
    else()
      message(FATAL_ERROR "TandemInstall: the SDK's static closure links ${item}; "
                          "map it to its package in cmake/TandemInstall.cmake")
    endif()
    list(APPEND _static_targets ${item})
  endforeach()
  list(REMOVE_DUPLICATES _static_finds)
  list(REMOVE_DUPLICATES _pc_private)
  list(REMOVE_DUPLICATES _pc_libs_private)
  string(JOIN "\n  " TANDEM_STATIC_FINDS ${_static_finds})
  string(JOIN ";" TANDEM_STATIC_LINK ${_static_targets})
  string(JOIN " " TANDEM_PC_REQUIRES_PRIVATE ${_pc_private})
  string(JOIN " " TANDEM_PC_LIBS_PRIVATE ${_pc_libs_private} -lstdc++ -lm)

  set(_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
  set(TANDEM_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  set(TANDEM_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tandemConfig.cmake.in
    ${CMAKE_BINARY_DIR}/packaging/tandemConfig.cmake INSTALL_DESTINATION ${_cmakedir}
    PATH_VARS TANDEM_INSTALL_LIBDIR TANDEM_INSTALL_INCLUDEDIR)
  write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/tandemConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${CMAKE_BINARY_DIR}/packaging/tandemConfig.cmake
    ${CMAKE_BINARY_DIR}/packaging/tandemConfigVersion.cmake
    DESTINATION ${_cmakedir} COMPONENT sdk_dev)
  # Relocatable: the prefix is found from the .pc file's own folder.
  file(RELATIVE_PATH TANDEM_PC_PREFIX_FROM_PCDIR /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" TANDEM_PC_PREFIX_FROM_PCDIR "${TANDEM_PC_PREFIX_FROM_PCDIR}")
  foreach(pc tandem-client tandem-client-static)
    configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/packaging/${pc}.pc
      @ONLY)
    install(FILES ${CMAKE_BINARY_DIR}/packaging/${pc}.pc
      DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT sdk_dev)
  endforeach()
endif()

# --- the Python package ----------------------------------------------------
if(TANDEM_BUILD_PYTHON)
  set(_pydir lib/python3/dist-packages/tandem)  # Debian's path for every python3
  install(TARGETS _tandem LIBRARY DESTINATION ${_pydir} COMPONENT python)
  file(GLOB _py_sources ${PROJECT_SOURCE_DIR}/python/tandem/*.py)
  install(FILES ${_py_sources} DESTINATION ${_pydir} COMPONENT python)
endif()

# --- Debian packages ---------------------------------------------------------
set(_components aggregator coordinator worker tools)
if(TANDEM_BUILD_SDK_SHARED)
  list(APPEND _components sdk sdk_dev)
endif()
if(TANDEM_BUILD_PYTHON)
  list(APPEND _components python)
endif()
set(CPACK_COMPONENTS_ALL ${_components})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tandem)
set(CPACK_PACKAGE_VENDOR tandem)
set(CPACK_PACKAGE_CONTACT "tandem maintainers <tandem-maintainers@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://tandem.invalid/")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # fast to make; the test builds them every run
set(_ver "${PROJECT_VERSION}-1")

set(CPACK_DEBIAN_AGGREGATOR_PACKAGE_NAME tandem-aggregator)
set(CPACK_COMPONENT_AGGREGATOR_DESCRIPTION
  "tandem aggregation server\n One of the two non-colluding servers of a tandem federation: verifies\n clients' PREAMBLE reports and norm proofs and releases noised sums.")
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_NAME tandem-coordinator)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_RECOMMENDS dataset-fashion-mnist)
set(CPACK_COMPONENT_COORDINATOR_DESCRIPTION
  "tandem coordinator\n Runs the rounds of the federated tasks its operators create, issues\n upload tickets, keeps the privacy accounting and serves a live dashboard.")
set(CPACK_DEBIAN_WORKER_PACKAGE_NAME tandem-worker)
set(CPACK_COMPONENT_WORKER_DESCRIPTION
  "tandem ML worker\n The ML kernels (Ada-KV, DuSA, Spotlight, ...) as a gRPC service.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME tandem-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS openssl)  # tandem-make-certs
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS dataset-fashion-mnist)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
  "tandem command-line tools\n tandem-client, tandem-sim, tandem-status, tandem-admin, tandem-train and\n tandem-make-certs.")
set(CPACK_DEBIAN_SDK_PACKAGE_NAME libtandem-client0)
set(CPACK_DEBIAN_SDK_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # shlibs of libtandem-client0
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_COMPONENT_SDK_DESCRIPTION
  "tandem client SDK (shared library)\n What apps embed to take part in private federated rounds: the C ABI\n and the C++ API.")
set(CPACK_DEBIAN_SDK_DEV_PACKAGE_NAME libtandem-client-dev)
set(CPACK_DEBIAN_SDK_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_SDK_DEV_PACKAGE_DEPENDS "libtandem-client0 (= ${_ver}), libabsl-dev")
set(CPACK_DEBIAN_SDK_DEV_PACKAGE_SUGGESTS
  "libgrpc++-dev, libprotobuf-dev, libssl-dev, libtbb-dev, libeigen3-dev, libsqlite3-dev, libyaml-dev")
set(CPACK_COMPONENT_SDK_DEV_DESCRIPTION
  "tandem client SDK (development files)\n Headers, libtandem_client.so and .a, pkg-config (tandem-client) and a\n CMake package (find_package(tandem)). Static linking needs the Suggests.")
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-tandem)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3 (>= 3.11), python3 (<< 3.12), python3-numpy")
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "tandem-aggregator, tandem-coordinator, tandem-tools")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
  "tandem for Python\n The client SDK, the simulator and the worker client for researchers who\n train in PyTorch or NumPy.")

# The daemon packages: postinst (user, /etc/tandem/tls) and their conffiles.
foreach(c aggregator coordinator worker)
  string(TOUPPER ${c} _C)
  set(_dir ${CMAKE_BINARY_DIR}/packaging/${c})
  string(JOIN "\n" _list ${_conffiles_${c}})
  file(WRITE ${_dir}/conffiles "${_list}\n")
  file(COPY ${_pkg}/postinst DESTINATION ${_dir}
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                     WORLD_READ WORLD_EXECUTE)
  set(CPACK_DEBIAN_${_C}_PACKAGE_CONTROL_EXTRA "${_dir}/conffiles;${_dir}/postinst")
endforeach()
include(CPack)
