// The engine: tape order, retain_graph, version checks, hooks, accumulation, autograd::grad.
#include <catch2/catch.hpp>

#include <octo/octo.h>
