// Linked instead of mpi_runtime.cpp when octo is built without MPI: the distributed layer is
// unavailable and says how to get it.
#include <cstdlib>

#include "parallel/distributed/mpi_runtime.h"

namespace octo::distributed {

namespace {
[[noreturn]] void no_mpi(const char* what) {
  OCTO_THROW(DistributedError, what,
             ": octo was built without MPI; install OpenMPI (Debian: libopenmpi-dev openmpi-bin) "
             "and rebuild to use the distributed layer");
}
}  // namespace

std::shared_ptr<ProcessGroup> new_mpi_group(std::chrono::milliseconds) { no_mpi("new_mpi_group"); }

namespace detail {
bool mpi_available() { return false; }
RankInfo mpi_init() { no_mpi("init_process_group"); }
void mpi_finalize() {}
void mpi_abort(int code) { std::_Exit(code); }
void bootstrap_broadcast(void*, size_t, std::chrono::milliseconds) {
  no_mpi("bootstrap_broadcast");
}
}  // namespace detail

}  // namespace octo::distributed
