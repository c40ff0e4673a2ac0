// Tests for the norm family (kernels layer): written with the family.
#include <catch2/catch.hpp>
