# Packages of the build: `cpack -G DEB` and `cpack -G TGZ` in the build folder (or the `package`
# target). One package, fp8rl: the CLI, the studio, the CUDA backend module in lib/fp8rl
# (optional at run time: loaded where a GPU and the CUDA libraries are present, otherwise the
# CPU backend is used and `fp8rl doctor` says why), presets and icons in share/fp8rl, the
# desktop entry, AppStream metadata, man pages and the copyright file.
#
# The Debian package's dependencies are computed from the two executables by dpkg-shlibdeps
# (packaging/CPackProjectConfig.cmake.in); the CUDA module is left out of that on purpose: the
# CUDA libraries come from a toolkit installed outside the package system and are optional.

set(FP8RL_RELEASE_DATE 2026-11-25)  # of PROJECT_VERSION, for the AppStream release entry

# --- what the package holds besides the executables and the CUDA module (installed by their
# own folders: bin, lib/fp8rl)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/copyright DESTINATION share/doc/fp8rl)
set(FP8RL_MAN_DIR ${PROJECT_BINARY_DIR}/share/man/man1)
if(TARGET fp8rl-studio)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/fp8rl-studio.desktop
          DESTINATION share/applications)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/fp8rl-studio.svg
          DESTINATION share/icons/hicolor/scalable/apps)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/org.fp8rl.Studio.metainfo.xml.in
                 ${PROJECT_BINARY_DIR}/share/metainfo/org.fp8rl.Studio.metainfo.xml @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/share/metainfo/org.fp8rl.Studio.metainfo.xml
          DESTINATION share/metainfo)
endif()

# Man pages from the programs' own --help (packaging/ManPages.cmake), rebuilt when they change.
set(man_pages ${FP8RL_MAN_DIR}/fp8rl.1.gz)
set(man_args -DFP8RL=$<TARGET_FILE:fp8rl>)
set(man_deps fp8rl)
if(TARGET fp8rl-studio)
  list(APPEND man_pages ${FP8RL_MAN_DIR}/fp8rl-studio.1.gz)
  list(APPEND man_args -DSTUDIO=$<TARGET_FILE:fp8rl-studio>)
  list(APPEND man_deps fp8rl-studio)
endif()
add_custom_command(OUTPUT ${man_pages}
  COMMAND ${CMAKE_COMMAND} ${man_args} -DVERSION=${PROJECT_VERSION} -DOUT_DIR=${FP8RL_MAN_DIR}
          -P ${PROJECT_SOURCE_DIR}/packaging/ManPages.cmake
  DEPENDS ${man_deps} ${PROJECT_SOURCE_DIR}/packaging/ManPages.cmake
  COMMENT "Man pages from fp8rl --help" VERBATIM)
add_custom_target(fp8rl_man_pages ALL DEPENDS ${man_pages})
install(FILES ${man_pages} DESTINATION share/man/man1)

# --- CPack
set(CPACK_PACKAGE_NAME fp8rl)
set(CPACK_PACKAGE_VENDOR "FP8 RL Studio")
set(CPACK_PACKAGE_CONTACT "FP8 RL Studio developers <maintainers@fp8rl.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "FP8 reinforcement learning (GRPO) of language models: studio and engine")
set(CPACK_PACKAGE_DESCRIPTION
    "End-to-end FP8 GRPO training of language models: block-wise E4M3 linear layers in
generation and training, an FP8 KV cache and truncated importance sampling. fp8rl runs,
serves and inspects runs (CPU reference backend; an optional CUDA backend module is used where
an NVIDIA Hopper GPU and the CUDA toolkit are present). fp8rl-studio launches, watches, steers
and compares runs.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # fp8rl_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)  # computed by the project config file instead
# The window icon is SVG: drawn by Qt's SVG image plugin when it is installed. Runs over
# several ranks are started by Open MPI's mpirun (docs/distributed.md).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libqt6svg6, openmpi-bin")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/packaging/CPackProjectConfig.cmake
     INPUT ${PROJECT_SOURCE_DIR}/packaging/CPackProjectConfig.cmake.in)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/packaging/CPackProjectConfig.cmake)
include(CPack)
