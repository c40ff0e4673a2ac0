// Tests for the indexing family (autograd layer): written with the family.
#include <catch2/catch.hpp>
