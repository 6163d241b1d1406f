"""Tensors as the JSON the tests read (tests/src/torch_table.hpp): shape, dtype name and values in
row-major order, with the non-finite numbers as the strings "nan", "inf" and "-inf". Shared by the
make_*_table.py scripts."""
import math

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
          "bool": torch.bool}


def enc(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def tensor_json(t):
    return {"shape": list(t.shape), "dtype": [k for k, d in DTYPES.items() if d == t.dtype][0],
            "values": [enc(v) for v in t.detach().reshape(-1).tolist()]}
