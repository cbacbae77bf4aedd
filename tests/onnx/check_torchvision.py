"""torchvision classifiers exported by PyTorch, run by the `tilebsp` tool, checked against PyTorch's outputs.

Usage: /usr/bin/python3 check_torchvision.py TOOL WORK_DIR
Exports squeezenet1_1 and mobilenet_v2 (random weights and batch-norm statistics, benchmarks/onnx_export.py) at
batch 2, runs each with `tilebsp run` in FP32 and squeezenet1_1 again in FP16 with float partials, and fails unless
every output is within issue 66's bounds of PyTorch's: 1e-4 (FP32) and 2e-2 (FP16) of the largest |output|.
mobilenet_v2 also runs pipelined over IPUs by the auto converter (3 micro-batches) and as 2 replicas: bitwise the
outputs of one IPU.
"""
import os, subprocess, sys
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import torch  # noqa: E402
from onnx_export import export  # noqa: E402

tool, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
torch.set_num_threads(2)
failures = []
extra_modes = ("auto pipeline", "replicas")
for name, modes in (("squeezenet1_1", ("FP32", "FP16")), ("mobilenet_v2", ("FP32", "auto pipeline", "replicas"))):
    export(name, work, batch=2)
    ref = np.load(os.path.join(work, name + ".torch.npy"))
    for mode in modes:
        extra = {"auto pipeline": ["--batch-per-step", "3", "--pipeline-cfg",
                                   '{"converter": "auto", "min_ipu_quantity": 2, "max_ipu_quantity": 3}'],
                 "replicas": ["--replicas", "2"]}.get(mode, ["--precision-mode", mode])
        out = os.path.join(work, f"out_{name}_{mode.replace(' ', '_')}")
        run = subprocess.run([tool, "run", os.path.join(work, name + ".onnx"), "--batch-size", "2", "--inputs",
                              os.path.join(work, name + ".input.npy"), "--outdir", out, "--iterations", "1"] + extra,
                             capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"{name} {mode}: tilebsp run failed ({run.returncode}):\n{run.stdout}{run.stderr}")
            continue
        ours = np.load(os.path.join(out, "output.npy"))
        if mode in extra_modes:
            one = np.load(os.path.join(work, f"out_{name}_FP32", "output.npy"))
            parts = [ours[:2], ours[2:]] if mode == "replicas" else [ours]
            same = all(p.shape == one.shape and np.array_equal(p, one) for p in parts)
            print(f"{name} {mode}: {'bitwise' if same else 'NOT'} the outputs of one IPU")
            if not same:
                failures.append(f"{name} {mode}: the outputs differ from one IPU's")
            continue
        bound = 1e-4 if mode == "FP32" else 2e-2
        err = float(np.abs(ours.astype(np.float64) - ref).max() / np.abs(ref).max()) if ours.shape == ref.shape else float("inf")
        print(f"{name} {mode}: shape {ours.shape}, max |ours - torch| / max |torch| = {err:.3g} (bound {bound})")
        if not err <= bound:
            failures.append(f"{name} {mode}: error {err:.3g} above {bound}")
if failures:
    print("\n".join(failures))
    sys.exit(1)
