// Tests for the conv family (kernels layer): written with the family.
#include <catch2/catch.hpp>
