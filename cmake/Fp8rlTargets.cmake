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

# fp8rl_relocatable(TARGET): the executable looks for shared libraries in ../lib beside its own
# folder before the system's (an RPATH of $ORIGIN/../lib, inherited by the libraries it loads),
# so a folder holding bin/ and lib/ runs anywhere: the GPU bundle of tools/gpu/bundle.sh copies
# the executable with the libraries it needs. Build tree only: installed copies have no RPATH.
function(fp8rl_relocatable target)
  set_target_properties(${target} PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")
  # DT_RPATH, not DT_RUNPATH: only an RPATH is also searched for the dependencies of the
  # libraries the executable loads (libzmq's own, say), and it comes before LD_LIBRARY_PATH.
  target_link_options(${target} PRIVATE "LINKER:--disable-new-dtags")
endfunction()

# fp8rl_forbid_links(TARGET FORBIDDEN...): fails the configuration when TARGET links, directly
# or through the libraries it links, any of the FORBIDDEN targets (the layering of
# docs/DESIGN.md: e.g. the studio must not link the run loop, the model or a backend).
function(fp8rl_forbid_links target)
  set(seen "")
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue t)
    if(NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    if(t IN_LIST ARGN)
      message(FATAL_ERROR "${target} links ${t}, which it must not (docs/DESIGN.md, layers)")
    endif()
    get_target_property(type ${t} TYPE)
    set(libs "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${t} LINK_LIBRARIES)
      if(direct)
        list(APPEND libs ${direct})
      endif()
    endif()
    get_target_property(iface ${t} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(APPEND libs ${iface})
    endif()
    foreach(l IN LISTS libs)
      if(NOT l MATCHES "^\\$<")
        list(APPEND queue ${l})
      endif()
    endforeach()
  endwhile()
endfunction()
