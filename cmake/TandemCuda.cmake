# CUDA toolchain. CI has nvcc but no GPU: everything must compile, GPU tests carry the
# CTest label "gpu" and run only on a machine with a device.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # sm_90 machine code for H100/H200, plus compute_90 PTX that later cards can JIT.
  set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
endif()
enable_language(CUDA)
# C++20 in device code too. CMake before 3.26 does not know nvcc's C++20 flag (and
# asks for it because CUDA targets inherit CMAKE_CXX_STANDARD): tell it.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
find_package(CUDAToolkit REQUIRED)
message(STATUS "Tandem: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
