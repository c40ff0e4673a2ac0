// TensorImpl's constructor and destructor, which need AutogradMeta complete (see the Note).
#include "tensor/autograd_meta.h"

namespace octo {

// Note [Where TensorImpl is made]: TensorImpl owns a unique_ptr<AutogradMeta>, and AutogradMeta
// holds Tensors, so TensorImpl's constructor and destructor (which may destroy that member) need
// both types complete. Defining them in tensor.cpp would make tensor.cpp include
// autograd_meta.h, which includes tensor.h: an include cycle between the two files. They live
// here instead, next to the type they need.
TensorImpl::TensorImpl(std::shared_ptr<Storage> s, Shape sz, Shape st, int64_t off, DType dt)
    : storage(std::move(s)),
      sizes(std::move(sz)),
      strides(std::move(st)),
      offset(off),
      dtype(dt),
      device(storage->device) {}

TensorImpl::~TensorImpl() = default;

}  // namespace octo
