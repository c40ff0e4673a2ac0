// Tests for the pool family (autograd layer): written with the family.
#include <catch2/catch.hpp>
