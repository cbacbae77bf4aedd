"""Export a torchvision classifier to ONNX with PyTorch's outputs beside it, for benchmarks/onnx_models.sh.

Usage: /usr/bin/python3 onnx_export.py NAME OUT_DIR [--batch B] [--opset N]
Writes OUT_DIR/NAME.onnx (batch dimension symbolic), NAME.input.npy (float32, standard normal) and NAME.torch.npy.
Random weights (seed 0), in eval mode, with two changes that keep the comparison meaningful:
- batch norms get random statistics and affine parameters (fresh ones are identities);
- layers torchvision initialises to zero (vit_b_16's classifier head) get small random weights: with a zero head
  every logit is 0 and a comparison of the outputs says nothing about the network before it.
"""
import argparse, os
import numpy as np
import torch, torchvision


def export(name, out, batch=4, opset=17):
    """Writes OUT/NAME.onnx, NAME.input.npy and NAME.torch.npy; returns the largest |output|."""
    torch.manual_seed(0)
    extra = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    model = getattr(torchvision.models, name)(weights=None, **extra).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            elif isinstance(m, torch.nn.Linear) and not m.weight.any():
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * 0.02)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.02)
    image = 299 if name == "inception_v3" else 224
    x = torch.randn(batch, 3, image, image)
    with torch.no_grad():
        y = model(x)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"], opset_version=opset,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, do_constant_folding=True)
    np.save(os.path.join(out, name + ".input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(out, name + ".torch.npy"), y.numpy().astype(np.float32))
    print(f"{name}: opset {opset}, input {tuple(x.shape)}, output {tuple(y.shape)}, max |output| {float(y.abs().max()):.4g}")
    return float(y.abs().max())


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("out")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--opset", type=int, default=17)
    a = p.parse_args()
    torch.set_num_threads(2)
    export(a.name, a.out, a.batch, a.opset)
