// The few MPI calls outside the MPI process group: start, end, abort, bootstrap (mpi_runtime.cpp,
// or mpi_stub.cpp in a build without MPI).
#pragma once

#include "parallel/distributed/process_group.h"

namespace octo::distributed::detail {

bool mpi_available();
/// MPI_Init_thread (MPI_THREAD_MULTIPLE), then rank, size and the local rank (ranks sharing this
/// machine's memory, MPI_COMM_TYPE_SHARED).
RankInfo mpi_init();
void mpi_finalize();
void mpi_abort(int code);

}  // namespace octo::distributed::detail
