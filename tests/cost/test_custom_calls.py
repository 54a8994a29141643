"""Custom calls: every target found in ``fixtures/hlo`` and in the real-input corpus (``/work/shared/corpus``,
HLO texts under hlo_tpu, hlo_gpu, hlo_cpu, hlo_generic) gets either a known cost or the ``opaque-custom-call``
flag, and never a negative number (XLA's ``HandleCustomCall`` charges -1 FLOPs and -1 bytes to every custom
call; hloscope must not).

The set of flagged targets is pinned in ``tests/cost/data/flagged_custom_call_targets.txt`` (one JSON string
per line), so that a change shows up in review. Regenerate it with::

    python tests/cost/test_custom_calls.py --write-flagged
"""

from __future__ import annotations

import math

import json
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402

from cost_oracle import CORPUS, DATA, FIXTURES, xla_cost  # noqa: E402
from hloscope.cost import RULES, CostContext, OpCost, module_cost  # noqa: E402
from hloscope.cost.custom_call import BODY_TARGETS, GEMM_TARGETS, HELPER_TARGETS  # noqa: E402
from hloscope.cost.custom_call_attention import TE_ATTENTION_TARGETS  # noqa: E402
from hloscope.cost.custom_call_common import cost_estimate, mlir_attribute_dict  # noqa: E402
from hloscope.cost.custom_call_linalg import routine  # noqa: E402
from hloscope.parsers import HloParseError, parse_hlo_text  # noqa: E402

CORPUS_KINDS = ("hlo_tpu", "hlo_gpu", "hlo_cpu", "hlo_generic")
FLAGGED_FILE = DATA / "flagged_custom_call_targets.txt"
OPAQUE = "opaque-custom-call"


# ---------------------------------------------------------------------------------------------------------
# Scanning
# ---------------------------------------------------------------------------------------------------------


@dataclass
class CustomCall:
    source: str
    name: str
    target: str
    cost: OpCost
    backend_config: object


@dataclass
class Scan:
    modules: int = 0
    calls: list[CustomCall] = field(default_factory=list)
    #: (source, error) of modules whose module_cost raised something other than HloParseError.
    cost_failures: list[tuple[str, str]] = field(default_factory=list)
    #: (source, target, error) of custom calls whose rule raised (costed one by one after a module failure).
    call_failures: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def flagged_targets(self) -> set[str]:
        return {c.target for c in self.calls if OPAQUE in c.cost.flags}


def _texts(paths):
    """(source, text) of every HLO module in ``paths``: a plain file is one module, a ``.jsonl`` file one per
    line (field ``text``)."""
    for path in paths:
        if path.suffix == ".jsonl":
            for n, line in enumerate(path.read_text().splitlines()):
                if line.strip():
                    yield f"{path.name}:{n + 1}", json.loads(line).get("text", "")
        else:
            yield path.name, path.read_text(errors="replace")


def _scan(paths) -> Scan:
    scan = Scan()
    for source, text in _texts(paths):
        try:
            module = parse_hlo_text(text, source)
        except HloParseError:
            continue
        scan.modules += 1
        try:
            mc = module_cost(module)
        except HloParseError:  # a malformed attribute, decoded lazily on first use: same as a parse error
            continue
        except Exception as e:  # noqa: BLE001 -- recorded; test_module_cost_never_raises reports them
            scan.cost_failures.append((source, f"{type(e).__name__}: {e}"))
            _cost_calls_one_by_one(module, source, scan)
            continue
        for row in mc.rows:
            inst = row.instruction
            if inst.opcode == "custom-call":
                scan.calls.append(CustomCall(source, inst.name, inst.attributes.get("custom_call_target", ""),
                                             row.cost, _config(inst)))
        # Custom calls inside fusions (or any computation without rows of its own) have no row: cost them
        # with the rule directly.
        walked = {r.computation for r in mc.rows}
        for comp in module.computations:
            if comp.name not in walked:
                _cost_calls_in(module, comp, source, scan)
    return scan


def _config(inst):
    try:
        return inst.backend_config
    except HloParseError:
        return None


def _cost_calls_in(module, comp, source, scan):
    ctx = None
    for inst in comp.instructions:
        if inst.opcode != "custom-call":
            continue
        ctx = ctx or CostContext(module, comp, lambda name: OpCost())
        target = inst.attributes.get("custom_call_target", "")
        try:
            cost = RULES["custom-call"](inst, ctx)
        except HloParseError:
            continue
        except Exception as e:  # noqa: BLE001
            scan.call_failures.append((source, target, f"{type(e).__name__}: {e}"))
            continue
        scan.calls.append(CustomCall(source, inst.name, target, cost, _config(inst)))


def _cost_calls_one_by_one(module, source, scan):
    for comp in module.computations:
        _cost_calls_in(module, comp, source, scan)


def corpus_paths() -> list[Path]:
    paths = []
    for kind in CORPUS_KINDS:
        folder = CORPUS / kind
        if folder.is_dir():
            paths.extend(sorted(p for p in folder.iterdir() if p.is_file()))
    return paths


@lru_cache(maxsize=None)
def fixture_scan() -> Scan:
    return _scan(sorted(FIXTURES.glob("*.hlo.txt")))


@lru_cache(maxsize=None)
def corpus_scan() -> Scan:
    return _scan(corpus_paths())


_skip_without_corpus = pytest.mark.skipif(not any((CORPUS / k).is_dir() for k in CORPUS_KINDS),
                                          reason=f"no corpus at {CORPUS}")


def needs_corpus(test):
    """Skipped without the corpus; slow (the first such test parses and costs ~8400 modules, ~13 s)."""
    return pytest.mark.slow(_skip_without_corpus(test))


def read_flagged_file() -> set[str]:
    return {json.loads(line) for line in FLAGGED_FILE.read_text().splitlines() if line.strip()}


# ---------------------------------------------------------------------------------------------------------
# What a costed custom call must look like
# ---------------------------------------------------------------------------------------------------------


def _cost_estimate(config):
    if isinstance(config, str):  # an MLIR attribute dictionary (typed-FFI calls)
        config = mlir_attribute_dict(config.strip())
    return cost_estimate(config) if isinstance(config, dict) else None


def check_call(call: CustomCall) -> None:
    c = call.cost
    where = (call.source, call.name, call.target, c)
    assert "cost-rule-failed" not in c.flags, where  # a rule that gave up is neither a cost nor the flag
    if OPAQUE in c.flags:
        # flagged: no invented work, and no operand sizes passed off as traffic -- unknown is NaN, never 0
        values = (c.flops, c.transcendentals, c.bytes_read, c.bytes_written)
        assert all(math.isnan(v) for v in values), where
        assert {"unknown-flops", "unknown-bytes"} <= c.flags, where
        return
    assert min(c.flops, c.transcendentals, c.bytes_read, c.bytes_written, c.comm_bytes) >= 0, where
    t = call.target
    if t in HELPER_TARGETS:
        assert c.flops == 0 and c.transcendentals == 0, where
    elif t in GEMM_TARGETS:
        assert c.flops > 0 or c.bytes_written == 0, where
    elif t.startswith(("__cudnn$fmha", "__cudnn$flash")) or t in TE_ATTENTION_TARGETS:
        assert c.flops > 0 and "fmha-estimate" in c.flags, where
    elif t.startswith("__cudnn$conv") or t in BODY_TARGETS:
        assert c.flops >= 0, where
    elif routine(t) is not None:  # LAPACK / cuSOLVER: operation counts
        assert c.flops >= 0 and "estimated-flops" in c.flags, where
    else:  # the only other way to a known cost: a kernel's cost estimate, taken as given
        est = _cost_estimate(call.backend_config)
        assert est is not None, where
        assert c.flops == float(est.get("flops") or 0), where
        assert c.transcendentals == float(est.get("transcendentals") or 0), where


# ---------------------------------------------------------------------------------------------------------
# Fixtures and corpus
# ---------------------------------------------------------------------------------------------------------


def test_fixture_custom_calls_are_known_helpers():
    """The TPU fixtures hold AllocateBuffer and ConcatBitcast: data helpers, 0 FLOPs, not flagged."""
    scan = fixture_scan()
    assert not scan.cost_failures and not scan.call_failures
    targets = {c.target for c in scan.calls}
    assert {"AllocateBuffer", "ConcatBitcast"} <= targets
    for call in scan.calls:
        check_call(call)
    assert scan.flagged_targets == set()


@needs_corpus
def test_every_corpus_custom_call_is_costed_or_flagged():
    scan = corpus_scan()
    assert scan.modules > 1000 and len(scan.calls) > 100  # the corpus really was read
    for call in scan.calls:
        check_call(call)
    # Both outcomes occur, and the common GPU/TPU library calls are among the costed ones somewhere.
    costed = {c.target for c in scan.calls if OPAQUE not in c.cost.flags}
    assert {"__cublas$gemm", "__cublas$lt$matmul", "AllocateBuffer", "Sharding"} <= costed
    assert scan.flagged_targets


@needs_corpus
def test_flagged_targets_are_pinned():
    """The set of targets flagged opaque anywhere in fixtures + corpus equals the reviewed list."""
    found = corpus_scan().flagged_targets | fixture_scan().flagged_targets
    pinned = read_flagged_file()
    assert found == pinned, {"newly flagged": sorted(found - pinned), "no longer flagged": sorted(pinned - found)}


def test_flagged_file_is_well_formed():
    lines = [line for line in FLAGGED_FILE.read_text().splitlines() if line.strip()]
    targets = [json.loads(line) for line in lines]
    assert targets == sorted(set(targets)) and len(targets) > 10
    assert not (set(targets) & HELPER_TARGETS)  # helpers are costed, never flagged


@needs_corpus
def test_module_cost_never_raises_on_parseable_corpus_modules():
    """module_cost's promise. Regression: every cuDNN conv custom call with its (output, workspace) result
    raised IndexError (the AMD TraceLens GPU modules), and so did operands the parser dropped."""
    assert corpus_scan().cost_failures == []


@needs_corpus
def test_custom_call_rules_never_fail():
    """No custom call's rule raises when called directly (fused calls), and none falls back to the
    module's ``cost-rule-failed`` flag."""
    scan = corpus_scan()
    assert scan.call_failures == []
    assert [(c.source, c.target) for c in scan.calls if "cost-rule-failed" in c.cost.flags] == []


# ---------------------------------------------------------------------------------------------------------
# Hand-worked custom calls
# ---------------------------------------------------------------------------------------------------------


def _one(text: str) -> OpCost:
    mc = module_cost(parse_hlo_text(text))
    (row,) = [r for r in mc.rows if r.instruction.opcode == "custom-call"]
    return row.cost


def test_unknown_custom_call_is_unknown_not_minus_one():
    text = """HloModule c
ENTRY e {
  p = f32[64,128]{1,0} parameter(0)
  ROOT c = f32[64,32]{1,0} custom-call(p), custom_call_target="my_kernel"
}"""
    c = _one(text)
    assert OPAQUE in c.flags
    # unknown (NaN, flagged): operand sizes are not a kernel's traffic, and 0 would read as "free"
    assert all(math.isnan(v) for v in (c.flops, c.bytes_read, c.bytes_written))
    assert {"unknown-flops", "unknown-bytes"} <= c.flags
    xla = xla_cost(text)
    assert xla["flops"] == -1 and xla["bytes accessed"] == -1  # what hloscope must not copy


def test_cublas_gemm_is_a_dot():
    """__cublas$gemm with its (output, workspace) tuple: 2 x M x N x K from gemm_backend_config."""
    M, K, N = 128, 256, 512
    config = {"gemm_backend_config": {"alpha_real": 1, "beta": 0, "dot_dimension_numbers": {
        "lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
        "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}, "epilogue": "DEFAULT"}}
    text = f"""HloModule g
ENTRY e {{
  a = bf16[{M},{K}]{{1,0}} parameter(0)
  b = bf16[{K},{N}]{{1,0}} parameter(1)
  ROOT g = (bf16[{M},{N}]{{1,0}}, s8[4194304]{{0}}) custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={json.dumps(config)}
}}"""
    c = _one(text)
    assert OPAQUE not in c.flags
    assert c.flops == 2 * M * N * K
    assert c.bytes_read == 2 * (M * K + K * N)


def test_cudnn_fmha_forward_and_backward_estimates():
    """Flash attention, Q/K/V [B, S, H, D]: forward QK^T and PV, 2 x 2*B*H*S*S*D; backward 2.5 x forward."""
    B, S, H, D = 2, 1024, 8, 64
    forward = 4 * B * H * S * S * D

    def module(target):
        return f"""HloModule f
ENTRY e {{
  q = bf16[{B},{S},{H},{D}]{{3,2,1,0}} parameter(0)
  k = bf16[{B},{S},{H},{D}]{{3,2,1,0}} parameter(1)
  v = bf16[{B},{S},{H},{D}]{{3,2,1,0}} parameter(2)
  ROOT o = (bf16[{B},{S},{H},{D}]{{3,2,1,0}}, u8[0]{{0}}) custom-call(q, k, v), custom_call_target="{target}"
}}"""

    fwd, bwd = _one(module("__cudnn$fmhaSoftmax")), _one(module("__cudnn$fmhaSoftmaxBackward"))
    assert fwd.flops == forward and "fmha-estimate" in fwd.flags and OPAQUE not in fwd.flags
    assert bwd.flops == forward * 5 // 2


def test_pallas_cost_estimate_is_taken_as_given():
    config = {"custom_call_config": {"body": "", "cost_estimate": {"flops": 1000000, "transcendentals": 2048,
                                                                   "bytes_accessed": 300000}}}
    text = f"""HloModule t
ENTRY e {{
  p = f32[256,256]{{1,0}} parameter(0)
  ROOT k = f32[256,256]{{1,0}} custom-call(p), custom_call_target="tpu_custom_call", backend_config={json.dumps(config)}
}}"""
    c = _one(text)
    assert OPAQUE not in c.flags
    assert (c.flops, c.transcendentals, c.bytes_accessed) == (1000000, 2048, 300000)


CUDNN_CONV = """HloModule conv
ENTRY e {
  l = f32[2,16,16,3]{3,2,1,0} parameter(0)
  r = f32[3,3,3,8]{3,2,1,0} parameter(1)
  ROOT c = (f32[2,16,16,8]{3,2,1,0}, u8[0]{0}) custom-call(l, r), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward"
}"""


def test_cudnn_conv_custom_call_with_workspace_is_a_convolution():
    """Costed as the convolution it wraps, on the output (tuple element 0), like XLA's GPU analysis.
    Regression: the rule read the tuple's dims and raised IndexError."""
    plain = CUDNN_CONV.replace("(f32[2,16,16,8]{3,2,1,0}, u8[0]{0}) custom-call", "f32[2,16,16,8]{3,2,1,0} "
                               "convolution").replace(', custom_call_target="__cudnn$convForward"', "")
    expected = xla_cost(plain)["flops"]
    assert expected == 2 * 2 * 3 * 8 * 46 * 46  # SAME 3x3 on 16x16: 46 real taps per spatial dim
    c = _one(CUDNN_CONV)
    assert c.flops == expected and OPAQUE not in c.flags


def test_allocate_buffer_moves_no_bytes():
    """AllocateBuffer (TPU) reserves an uninitialised buffer: no operand, no traffic. Regression: its whole
    result was charged as written (3 x 64 MiB in tpu-v5e_mlp_large; XLA charges -1)."""
    text = """HloModule a
ENTRY e {
  ROOT b = bf16[4096,8192]{1,0} custom-call(), custom_call_target="AllocateBuffer"
}"""
    c = _one(text)
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 0, 0)


# ---------------------------------------------------------------------------------------------------------
# Regenerating the pinned list
# ---------------------------------------------------------------------------------------------------------


def write_flagged_file() -> set[str]:
    found = corpus_scan().flagged_targets | fixture_scan().flagged_targets
    FLAGGED_FILE.parent.mkdir(parents=True, exist_ok=True)
    FLAGGED_FILE.write_text("".join(json.dumps(t) + "\n" for t in sorted(found)))
    return found


if __name__ == "__main__":
    if "--write-flagged" not in sys.argv[1:]:
        sys.exit(__doc__)
    if not corpus_paths():
        sys.exit(f"no corpus at {CORPUS}")
    targets = write_flagged_file()
    print(f"wrote {len(targets)} targets to {FLAGGED_FILE}")
