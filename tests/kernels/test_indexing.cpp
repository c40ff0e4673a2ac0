// Tests for the indexing family (kernels layer): written with the family.
#include <catch2/catch.hpp>
