"""Benchmark: what a JAX model costs per step beside the numpy MLP, on MNIST's shape.

    python -m benchmarks.jax_models            # about a minute
    python -m benchmarks.jax_models --quick    # a smoke test

For each model — ``mlp`` (32 tanh units, numpy), ``jax_mlp`` (the same network in JAX) and
``jax_cnn`` (two strided convolutions of 8 and 16 channels, 32 ReLU units; with ``batching``
``map``, its default, and ``vmap``) — on 784 features and 10 classes:

1. **first**: the wall time of its first calls, compilation included (``setup`` and the
   first call of each function at each shape below);
2. **visit**: a walk's visit of ``scenarios/learning/mnist-jax-cnn.yaml``, the per-example
   gradients of a node's 50 images (the mean of which, clipped, is its step), in ms;
3. **round**: a gossip-learning round in rounds mode, ``batch_gradients`` of ``--models``
   models each at its own image, in ms;
4. **evaluate**: the predictions of one model on the 500 test images, in ms;
5. **cycle**: one pass of the example scenario's walk (90 visits), in seconds, from 2
   (noise and accounting, a few per cent of a visit, left out).

Times are wall-clock medians of ``--repeat`` calls after the first (compiled) one, on
normalised random images (the cost does not depend on the pixels).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from netsim.registry import named_component

MODELS: dict[str, tuple[str, dict]] = {
    "mlp [32]": ("mlp", {"hidden": [32]}),
    "jax_mlp [32]": ("jax_mlp", {"hidden": [32]}),
    "jax_cnn (map)": ("jax_cnn", {}),
    "jax_cnn (vmap)": ("jax_cnn", {"batching": "vmap"}),
}


def median_ms(call: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``call``, in ms."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def measure(name: str, settings: dict, rows: int, models: int, repeat: int) -> dict:
    """Compile time and the per-call times of one model (module docstring)."""
    rng = np.random.default_rng(0)
    x = rng.random((max(rows, models, 500), 784))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.integers(0, 10, len(x))
    started = time.perf_counter()
    model = named_component("model", name, settings=settings)
    model.setup(10, 784)
    params = model.initial_parameters(rng)
    many = np.tile(params, (models, 1))
    calls = {
        "visit": lambda: model.per_example_gradients(params, x[:rows], y[:rows]),
        "round": lambda: model.batch_gradients(many, x[:models], y[:models]),
        "evaluate": lambda: model.predict(params, x[:500]),
    }
    for call in calls.values():
        call()
    compiled = time.perf_counter() - started
    out = {"size": model.size, "compile": compiled}
    out.update({key: median_ms(call, repeat) for key, call in calls.items()})
    out["cycle"] = 90 * out["visit"] / 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: small sizes")
    parser.add_argument("--rows", type=int, default=50, help="images per visit (default 50)")
    parser.add_argument("--models", type=int, default=90, help="models per round (default 90)")
    parser.add_argument("--repeat", type=int, default=7, help="calls timed per figure")
    args = parser.parse_args()
    rows, models, repeat = (4, 4, 2) if args.quick else (args.rows, args.models, args.repeat)
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}; "
          f"{rows} images per visit, {models} models per round, median of {repeat}")  # fmt: skip
    print(f"{'model':16} {'params':>7} {'first s':>9} {'visit ms':>9} {'round ms':>9} "
          f"{'evaluate ms':>11} {'s per cycle':>11}")  # fmt: skip
    for label, (name, settings) in MODELS.items():
        r = measure(name, settings, rows, models, repeat)
        print(f"{label:16} {r['size']:>7,} {r['compile']:>9.2f} {r['visit']:>9.2f} "
              f"{r['round']:>9.2f} {r['evaluate']:>11.2f} {r['cycle']:>11.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
