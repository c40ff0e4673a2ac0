// The optimizer configurations the fused-update tests visit (CPU in tests/optim, GPU in
// tests/gpu): every option that changes the SGD or Adam/AdamW arithmetic, alone and combined.
#pragma once

#include <vector>

#include <octo/octo.h>

namespace fused_configs {

namespace optim = octo::optim;

inline const std::vector<optim::SGDOptions> kSgdConfigs = {
    {.lr = 0.1},
    {.lr = 0.1, .maximize = true},
    {.lr = 0.2, .weight_decay = 0.1},
    {.lr = 0.1, .momentum = 0.9},
    {.lr = 0.05, .momentum = 0.9, .dampening = 0.5},
    {.lr = 0.1, .momentum = 0.9, .nesterov = true},
    {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.01},
    {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.1, .maximize = true},
    {.lr = 0.1, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true, .maximize = true},
};

inline const std::vector<optim::AdamOptions> kAdamConfigs = {
    {},
    {.lr = 0.01, .weight_decay = 0.1},
    {.lr = 0.01, .amsgrad = true},
    {.lr = 0.01, .maximize = true},
    {.lr = 0.02, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.05, .amsgrad = true},
    {.lr = 0.01, .betas = {0.5, 0.9}, .weight_decay = 0.01, .amsgrad = true, .maximize = true},
    {.lr = 0.01, .betas = {0.0, 0.0}, .eps = 1e-3},
};

inline optim::AdamWOptions as_adamw(const optim::AdamOptions& a) {
  return {.lr = a.lr,
          .betas = a.betas,
          .eps = a.eps,
          .weight_decay = a.weight_decay,
          .amsgrad = a.amsgrad,
          .maximize = a.maximize};
}

}  // namespace fused_configs
