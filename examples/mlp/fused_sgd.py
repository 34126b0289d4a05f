"""SGD with momentum as one opcore op: examples/ops' nn_ops::sgd_momentum_
updates every parameter and its momentum buffer in place, in one C call,
with torch.optim.SGD's arithmetic (so training matches it step for step).

    opt = FusedSGD(model.parameters(), lr=0.01, momentum=0.9)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops"))
import nn_ops  # noqa: E402


class FusedSGD(torch.optim.Optimizer):
    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))
        nn_ops.load()

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            bufs = [self.state[p].setdefault("momentum_buffer", torch.zeros_like(p)) for p in params]
            torch.ops.nn_ops.sgd_momentum_(params, bufs, [p.grad for p in params], group["lr"],
                                           group["momentum"], group["weight_decay"])
        return loss
