"""The seeds' multi-layer perceptron: 784 -> layers -> 10, ReLU between the
linear layers, log_softmax at the end. The ReLU is pluggable so one class
serves the baseline (torch.relu) and the opcore operator
(my_ops.Relu.apply)."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, input_size=28 * 28, output_size=10, layers=(120, 84), relu=None):
        super().__init__()
        self.fc1 = nn.Linear(input_size, layers[0])
        self.fc2 = nn.Linear(layers[0], layers[1])
        self.fc3 = nn.Linear(layers[1], output_size)
        self.relu = torch.relu if relu is None else relu

    def forward(self, x):
        f1 = self.fc1(x)
        r1 = self.relu(f1)
        f2 = self.fc2(r1)
        r2 = self.relu(f2)
        f3 = self.fc3(r2)
        return torch.log_softmax(f3, dim=1)
