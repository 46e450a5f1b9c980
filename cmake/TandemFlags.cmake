# Compiler flags shared by every tandem target.
include(CheckCXXCompilerFlag)

# Host-compiler flags only: nvcc gets its own (CUDA sources are C++ to it).
set(_host "$<COMPILE_LANGUAGE:C,CXX>")
add_compile_options("$<${_host}:-Wall;-Wextra;-Wno-unused-parameter>")

# -march: "native" lets the compiler use AES-NI, VAES, VPCLMULQDQ and AVX-512
# where the build machine has them. Hot kernels also dispatch at run time
# (crypto/aes), so a portable -march still takes the fast paths where present.
if(TANDEM_MARCH)
  check_cxx_compiler_flag("-march=${TANDEM_MARCH}" TANDEM_HAS_MARCH)
  if(TANDEM_HAS_MARCH)
    add_compile_options("$<${_host}:-march=${TANDEM_MARCH}>")
  else()
    message(WARNING "tandem: -march=${TANDEM_MARCH} not supported; using the compiler default")
  endif()
endif()

if(CMAKE_BUILD_TYPE STREQUAL "Release")
  add_compile_options("$<${_host}:-O3>")
endif()

if(TANDEM_SANITIZERS)
  add_compile_options(
    "$<${_host}:-fsanitize=${TANDEM_SANITIZERS};-fno-omit-frame-pointer;-fno-sanitize-recover=all>")
  add_link_options(-fsanitize=${TANDEM_SANITIZERS})
endif()
