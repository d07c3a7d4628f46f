# Compiler settings shared by every Tandem target: warnings, sanitizers, ccache.
# Targets opt in by linking `tandem_build_flags`, so third-party code is left alone.

find_program(TANDEM_CCACHE ccache)
if(TANDEM_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TANDEM_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${TANDEM_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${TANDEM_CCACHE})
endif()

add_library(tandem_build_flags INTERFACE)
target_compile_options(tandem_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                               -Wno-missing-field-initializers>  # designated initializers rely on member defaults
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TANDEM_WERROR}>>:-Werror>)

if(TANDEM_SANITIZE)
  # Applied globally so that every object, including GoogleTest's main, agrees on the ABI.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
  # GCC 12's flow analysis under the sanitizers' instrumentation warns of uninitialized
  # std::function members inside <regex> (a known false positive); the sanitizers
  # themselves check what this warning would.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
endif()

if(TANDEM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TANDEM_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Coverage instrumentation everywhere; each fuzz target adds the libFuzzer main.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
