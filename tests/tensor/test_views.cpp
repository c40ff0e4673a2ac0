// Views share storage and map elements correctly: view, reshape, transpose, permute, slicing.
#include <catch2/catch.hpp>

#include <octo/octo.h>

using octo::Tensor;
