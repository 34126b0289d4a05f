import torch
from pathlib import Path
from . import _C, ops
