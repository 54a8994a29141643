"""Write ``tpu-v5e_psum_padding.hlo.txt`` and ``.xla_cost.json`` next to this script: a tiny program compiled
deviceless for TPU v5e (topology ``v5e:2x2``, libtpu needed, no TPU), whose shapes are NOT multiples of the
TPU tile, so that XLA's TPU cost analysis shows how it sizes tile-padded arrays and scalars:

    psum(a * 2, "x"), psum(s * 3, "x")   with a: f32[16,100] sharded 4 ways -> f32[4,100]{1,0:T(4,128)},
                                              s: f32[] replicated          -> f32[]{:T(128)}

Run from the repository root: ``python tests/cost/data/make_tpu_padding_fixture.py``. Generated with
jax/jaxlib 0.10.2 and libtpu 0.0.52; XLA reported flops 802, bytes accessed 24576.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["JAX_PLATFORMS"] = "cpu"  # the deviceless TPU compile works with it

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import topologies  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    topo = topologies.get_topology_desc("v5e:2x2", "tpu")
    mesh = Mesh(np.array(list(topo.devices)).reshape(4), ("x",))

    def body(a, s):
        return jax.lax.psum(a * 2.0, "x"), jax.lax.psum(s * 3.0, "x")

    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=(P(), P())))
    a = jax.ShapeDtypeStruct((16, 100), jnp.float32, sharding=NamedSharding(mesh, P("x")))
    s = jax.ShapeDtypeStruct((), jnp.float32, sharding=NamedSharding(mesh, P()))
    compiled = fn.lower(a, s).compile()
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0]
    meta = {
        "flops": float(ca.get("flops", 0.0)),
        "transcendentals": float(ca.get("transcendentals", 0.0)),
        "bytes_accessed": float(ca.get("bytes accessed", 0.0)),
        "platform": "tpu",
        "topology": "v5e:2x2",
        "device_kind": topo.devices[0].device_kind,
        "jax_version": jax.__version__,
        "cost_analysis_raw": {k: float(v) for k, v in sorted(ca.items())},
    }
    (HERE / "tpu-v5e_psum_padding.hlo.txt").write_text(compiled.as_text())
    (HERE / "tpu-v5e_psum_padding.xla_cost.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(meta)


if __name__ == "__main__":
    main()
