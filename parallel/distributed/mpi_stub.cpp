// Linked instead of mpi_runtime.cpp when octo is built without MPI. A process started without a
// launcher is still a job of one (so a one-rank NCCL group works, e.g. on a GPU machine without
// Open MPI); anything that needs MPI itself says how to get it.
#include <cstdlib>
#include <string>

#include "parallel/distributed/process_group.h"

namespace octo::distributed {

namespace {
[[noreturn]] void no_mpi(const char* what) {
  OCTO_THROW(
      DistributedError, what,
      ": octo was built without MPI; install OpenMPI (Debian: libopenmpi-dev openmpi-bin) and rebuild to use the distributed layer");
}
}  // namespace

std::shared_ptr<ProcessGroup> new_mpi_group(std::chrono::milliseconds) { no_mpi("new_mpi_group"); }

namespace detail {
bool mpi_available() { return false; }
RankInfo mpi_init() {
  // A launcher that started several processes says so in one of these.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::string(v) != "1")
      no_mpi("init_process_group (started by a launcher with several processes)");
  }
  RankInfo info;
  info.hostname = "localhost";
  return info;
}
void mpi_finalize() {}
void mpi_abort(int code) { std::_Exit(code); }
void bootstrap_broadcast(void*, size_t, std::chrono::milliseconds) {
}  // a job of one: nothing to send
}  // namespace detail

}  // namespace octo::distributed
