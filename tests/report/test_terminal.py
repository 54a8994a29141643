"""Terminal renderings (rich) of a report and a diff: every name from the input is printed as the literal text
it is -- rich markup in an op, instruction, module, source or chip name, a note or a diff label is neither an
error nor a style -- and many modules fold into one line."""

from __future__ import annotations

import dataclasses
import io
import math

import pandas as pd
import pytest

import hloscope
from hloscope.compare import compare
from hloscope.report.diff import render_diff_table
from hloscope.report.terminal import fold_modules, render, render_chips

#: Scope names as ``jax.named_scope`` writes them into the op_name metadata: a closing tag, a styled span,
#: a backslash before a tag; then an emoji code.
SCOPES = ("scope[/x]", "[bold red]x[/]", "back\\[bold]slash")
EMOJI = ":thumbs_up:"
MODULE = "mod[/x][bold]"


def _hlo_text(n: int) -> str:
    """Three matmuls, one under each of ``SCOPES``, compiled on the CPU; ``n`` rows."""
    import jax
    import jax.numpy as jnp

    def f(x, w):
        with jax.named_scope(SCOPES[0]):
            h = x @ w
        with jax.named_scope(SCOPES[1]):
            h = h @ w.T
        with jax.named_scope(SCOPES[2]):
            return h @ w

    return jax.jit(f).lower(jnp.ones((n, 128)), jnp.ones((128, 256))).compile().as_text()


def _hostile(report: hloscope.Report) -> hloscope.Report:
    """``report`` with markup in every other name the renderers print (the compiler cannot write those)."""
    ops = report.ops.copy()
    ops["module"] = MODULE
    ops["instruction"] = [f"{i}[/y]" for i in ops["instruction"]]
    ops["category"] = ops["category"] + "[italic]"
    ops["source"] = "[link=file:///x]src.py[/link]:1"
    modules = report.modules.assign(name=MODULE)
    chip = dataclasses.replace(report.chip, name="chip [/] v5e")
    return dataclasses.replace(report, ops=ops, modules=modules, chip=chip,
                               notes=[f"note [bold]{EMOJI}[/bold] \\"])


@pytest.fixture(scope="module")
def reports() -> tuple[hloscope.Report, hloscope.Report]:
    return (_hostile(hloscope.analyze(_hlo_text(64), chip="tpu-v5e")),
            _hostile(hloscope.analyze(_hlo_text(256), chip="tpu-v5e")))


def test_the_compiler_keeps_the_markup_in_op_names(reports):
    names = " ".join(reports[0].ops["op_name"])
    assert all(s in names for s in SCOPES)


def test_report_prints_every_name_literally(reports):
    report = reports[0]
    out = io.StringIO()
    render(report, file=out, width=400)
    text = out.getvalue()
    for s in (*SCOPES, MODULE, "chip [/] v5e", f"note [bold]{EMOJI}[/bold] \\", "[italic]"):
        assert s in text, s
    for inst in report.ops["instruction"]:
        assert inst in text
    assert "\x1b[" not in text  # no style codes in a file


def test_chip_table_prints_names_literally():
    chip = hloscope.get_chip("tpu-v5e")
    out = io.StringIO()
    render_chips([dataclasses.replace(chip, name="[bold]v5e[/bold]", aliases=("v5e[/x]",))], file=out, width=300)
    assert "[bold]v5e[/bold]" in out.getvalue() and "v5e[/x]" in out.getvalue()


def test_diff_prints_every_name_literally(reports):
    a, b = reports
    d = compare(a, b, a_label=f"a[/x]{EMOJI}.hlo", b_label="b\\[bold].hlo")
    assert (d.ops["status"] == "slower").sum() == 3  # every matmul got 4x the rows
    out = io.StringIO()
    render_diff_table(d, file=out, width=400)
    text = out.getvalue()
    for s in (*SCOPES, f"module {MODULE}", f"a[/x]{EMOJI}.hlo", "b\\[bold].hlo"):
        assert s in text, s
    for inst in a.ops["instruction"]:
        assert inst in text


# ---- many modules -----------------------------------------------------------------------------------------


def _modules(times: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"name": [f"m{i}" for i in range(len(times))], "roofline_s": times,
                         "measured_s": [math.nan] * len(times)})


def test_small_modules_fold_into_one_line():
    shown, folded = fold_modules(_modules([1e-9, 1.0, 0.5, 2e-3, 1e-3, 0.0]), "roofline_s")
    # total 1.503: 1% is 15 ms -- m1, m2 shown (largest first), the four others folded
    assert [m["name"] for m in shown] == ["m1", "m2"] and [m["name"] for m in folded] == ["m3", "m4", "m0", "m5"]


def test_at_most_ten_modules_are_shown_and_one_small_module_is_not_folded():
    shown, folded = fold_modules(_modules([1.0] * 12 + [1e-9]), "roofline_s")
    assert len(shown) == 10 and len(folded) == 3
    shown, folded = fold_modules(_modules([1.0, 0.5, 1e-9]), "roofline_s")
    assert [m["name"] for m in shown] == ["m0", "m1", "m2"] and not folded
    shown, folded = fold_modules(_modules([0.0, 0.0, 0.0]), "roofline_s")  # no time at all: keep the first
    assert len(shown) == 1 and len(folded) == 2
