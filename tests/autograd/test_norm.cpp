// Tests for the norm family (autograd layer): written with the family.
#include <catch2/catch.hpp>
