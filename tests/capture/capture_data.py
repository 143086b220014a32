"""Test inputs the capture tests share."""
import torch


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g, dtype=dtype)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
