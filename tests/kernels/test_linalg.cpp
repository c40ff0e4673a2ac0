// Tests for the linalg family (kernels layer): written with the family.
#include <catch2/catch.hpp>
