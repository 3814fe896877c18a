// Stands in for the CUDA header in the emulated build of a kernel file (cuda_emulation.hpp).
#pragma once
#include "../cuda_emulation.hpp"
