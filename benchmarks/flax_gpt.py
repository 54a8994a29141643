"""A small flax.linen GPT's train step, compiled deviceless for one TPU v5e chip: the kind of module the pytest
plugin's deviceless target and a user without a TPU hand hloscope (issue #16's corpus modules are CPU and GPU
benchmark programs; this one is what libtpu prints for a model written without hloscope in mind).

The model: token embedding (vocabulary 8,192, width 512), 4 pre-LN blocks (``nn.SelfAttention``, 8 heads, causal;
a GELU MLP of 4 x width), a final LayerNorm and an untied head; bf16 compute, f32 parameters; optax ``adamw``;
batch 8 of 256 tokens (next-token loss on 255). Arguments are ``jax.ShapeDtypeStruct`` (``jax.eval_shape`` of the
init): nothing is run, only compiled. The compile takes 15-20 s on this 2-core host; its optimized HLO is ~1.9 MB
(an attention weight split by heads into 468 ``slice-start``/``slice-done`` pairs, fusions nested in fusions).

Usage::

    python benchmarks/flax_gpt.py OUT.hlo    # write the module's text (needs flax, optax and libtpu)
    python benchmarks/analyze.py --flax-gpt  # time analyze on it beside XLA's parse (written once, cached)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def train_step(batch: int = 8, seq: int = 256, layers: int = 4, width: int = 512, heads: int = 8,
               vocab: int = 8192):
    """``(step, args)``: the train step ``step(params, opt_state, tokens) -> (params, opt_state, loss)`` and its
    abstract arguments."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.LayerNorm()(x)
            mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
            h = nn.SelfAttention(num_heads=heads, qkv_features=width, dtype=jnp.bfloat16, deterministic=True)(
                h, mask=mask)
            x = x + h
            h = nn.Dense(4 * width, dtype=jnp.bfloat16)(nn.LayerNorm()(x))
            return x + nn.Dense(width, dtype=jnp.bfloat16)(nn.gelu(h))

    class GPT(nn.Module):
        @nn.compact
        def __call__(self, tokens):
            x = nn.Embed(vocab, width)(tokens)
            for _ in range(layers):
                x = Block()(x)
            return nn.Dense(vocab, dtype=jnp.bfloat16)(nn.LayerNorm()(x))

    model = GPT()
    tokens = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((batch, seq), jnp.int32)))
    opt = optax.adamw(3e-4)
    opt_state = jax.eval_shape(opt.init, params)

    def step(params, opt_state, tokens):
        def loss(p):
            logits = model.apply(p, tokens[:, :-1]).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step, (params, opt_state, tokens)


def deviceless_text(topology: str = "v5e:1x1") -> tuple[str, float]:
    """``(text, lower + compile seconds)``: the train step's optimized HLO for one chip of ``topology``."""
    import jax
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    step, args = train_step()
    on = SingleDeviceSharding(topologies.get_topology_desc(topology, "tpu").devices[0])
    t0 = time.perf_counter()
    compiled = jax.jit(step, in_shardings=on, out_shardings=on).lower(*args).compile()
    return compiled.as_text(), time.perf_counter() - t0


def cached_text() -> Path:
    """The module's text file in the benchmarks' cache (``parse.cache_dir``), compiled and written the first
    time."""
    from benchmarks.parse import cache_dir

    path = cache_dir() / "flax_gpt_v5e.hlo"
    if not path.exists():
        text, seconds = deviceless_text()
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(path)
        print(f"(compiled the flax GPT deviceless in {seconds:.1f} s: {path}, {len(text) / 1e6:.2f} MB)",
              file=sys.stderr)
    return path


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    text, seconds = deviceless_text()
    Path(sys.argv[1]).write_text(text)
    print(f"{sys.argv[1]}: {len(text) / 1e6:.2f} MB, lower + compile {seconds:.1f} s")
