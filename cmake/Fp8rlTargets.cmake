# Per-target settings for the project's own code (no global flags).

# fp8rl_project_target(TARGET): C++20, warnings as errors, PIC.
function(fp8rl_project_target target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
  # -Wno-restrict: GCC 12 reports false positives inside std::string concatenation at -O3
  # (GCC bug 105329).
  # -ffp-contract=off: the CPU reference's arithmetic is what the source says; a fused
  # multiply-add (available when a packager adds -march flags, and in the GEMM's AVX paths'
  # reach) would round differently from the paths without one.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Werror -ffp-contract=off
      $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>>)
endfunction()

# fp8rl_executable(TARGET): executables land in build/bin, next to ../lib holding the CUDA module.
function(fp8rl_executable target)
  fp8rl_project_target(${target})
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()
