# examples/gpu/predict.py: a network prediction per block, shaped as with PyTorch, for
# docs/guide/gpus.md. The model loads once per worker on the worker's own GPU
# (CUDA_VISIBLE_DEVICES names only it, so it is cuda:0), then every block is a forward pass.
# Each worker writes workers/<pid>.txt (what it sees), each block predictions/<id>.txt.

import os

import torch


def load_model():
    device = torch.device("cuda:0")
    # Your network here, e.g. torch.load("model.pt", map_location=device), then .eval().
    model = torch.nn.Identity().to(device).eval()
    os.makedirs("workers", exist_ok=True)
    with open(os.path.join("workers", "%d.txt" % os.getpid()), "w") as f:
        f.write("CUDA_VISIBLE_DEVICES=%s BLOCKWISE_GPU=%s: %d device, %s\n" % (
            os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("BLOCKWISE_GPU"),
            torch.cuda.device_count(), torch.cuda.get_device_name(0)))
    return model, device


def predict(block, state):
    model, device = state
    # Read the block's raw data here (block.read_roi); zeros stand in for it.
    raw = torch.zeros(tuple(block.read_roi.shape), device=device)
    with torch.no_grad():
        out = model(raw)
    os.makedirs("predictions", exist_ok=True)
    with open(os.path.join("predictions", "%d.txt" % block.id), "w") as f:
        f.write("block %d on %s (%s)\n" % (block.id, out.device, torch.cuda.get_device_name(0)))


process = predict
