# `cpack -G DEB` / `-G TGZ` from the build directory. The CUDA toolkit is not a package
# dependency: the CUDA module is optional at run time and the CPU backend always works.
set(CPACK_PACKAGE_NAME fp8rl-studio)
set(CPACK_PACKAGE_VENDOR "FP8 RL Studio")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "End-to-end FP8 reinforcement learning of language models")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "FP8 RL Studio developers")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libqt6widgets6, libqcustomplot2.1-qt6")
set(CPACK_GENERATOR TGZ)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/fp8rl-studio.desktop DESTINATION share/applications)
include(CPack)
