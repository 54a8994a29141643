"""``hloscope diff``: matching by identity, not by XLA's names; collectives of a resharded program; CI rules.

The comparison is ``hloscope.compare`` (the engine the plugin's baselines use too, tests/compare/); this file
drives it through its front ends (``hloscope.diff``, the CLI) and checks the presentation (``hloscope.report.diff``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hloscope
from hloscope.cli import main
from hloscope import diff
from hloscope.compare.rules import parse_rules
from hloscope.report.diff import diff_command_output, render_diff_html, render_diff_table

HLO = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"
TP4 = HLO / "cpu_mlp_sharded.hlo.txt"  # mesh data=2 x model=4
TP2 = HLO / "cpu_mlp_tp2.hlo.txt"  # mesh data=4 x model=2
CHIP = "tpu-v5e"

_ALL_REDUCE = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*?) all-reduce\(.*?replica_groups=(.*?), use_global", re.MULTILINE)
_LEAF = re.compile(r"f32\[([0-9,]*)\]")


def _group_size(groups: str) -> int:
    """Devices per replica group, from the printed replica_groups: explicit ``{{0,1,2,3},{4,5,6,7}}``, or the
    mesh form ``mesh['axis_0'=2,'axis_1'=4] {'axis_0'}`` (the product of the sizes of the axes named)."""
    if groups.startswith("{{"):
        return len(groups[2:].split("}")[0].split(","))
    sizes = {k: int(v) for k, v in re.findall(r"'(\w+)'=(\d+)", groups)}
    n = 1
    for axis in re.findall(r"'(\w+)'", groups.split("]", 1)[1]):
        n *= sizes[axis]
    return n


def _all_reduces(path: Path) -> dict[str, tuple[int, int]]:
    """instruction -> (buffer bytes, group size), read from the HLO text with regexes (not hloscope's parser)."""
    out = {}
    for name, shape, groups in _ALL_REDUCE.findall(path.read_text()):
        size = 0
        for dims in _LEAF.findall(shape):
            n = 1
            for d in filter(None, dims.split(",")):
                n *= int(d)
            size += 4 * n
        out[name] = (size, _group_size(groups))
    return out


@pytest.fixture(scope="module")
def tp_diff():
    return diff(str(TP4), str(TP2), chip=CHIP)


def test_identical_inputs_report_no_change(capsys):
    d = diff(str(TP4), str(TP4), chip=CHIP)
    assert not d.changed
    assert set(d.ops["status"]) == {"unchanged"}
    assert (d.ops[[c for c in d.ops if c.endswith("_delta")]].fillna(0) == 0).all().all()
    assert d.check(["roofline_s:+5%", "wire_bytes:+0", "flops:-1%"]).lines() == []
    assert main(["diff", str(TP4), str(TP4), "--chip", CHIP, "--fail-on", "roofline_s:+5%"]) == 0


def test_renamed_instructions_still_match(tmp_path):
    text = TP4.read_text()
    # XLA renumbers names from compile to compile: shift every numbered instruction name.
    renamed = re.sub(r"%([a-z_\-]+)\.(\d+)", lambda m: f"%{m.group(1)}.{int(m.group(2)) + 900}", text)
    assert renamed != text
    path = tmp_path / "renamed.hlo.txt"
    path.write_text(renamed)
    d = diff(str(TP4), str(path), chip=CHIP)
    assert set(d.ops["status"]) == {"unchanged"}
    assert (d.ops["instruction_a"] != d.ops["instruction_b"]).any()


def test_resharding_names_the_collectives_and_their_wire_bytes(tp_diff):
    before, after = _all_reduces(TP4), _all_reduces(TP2)
    comm = tp_diff.ops[tp_diff.ops["comm_kind"] == "all-reduce"]
    assert len(comm) == len(before) == len(after)
    for _, row in comm.iterrows():
        # Ring all-reduce: each device sends 2 (N-1)/N of the buffer (docs/xla_cost_rules.md, the book ch. 3).
        size_a, n_a = before[row["instruction_a"]]
        size_b, n_b = after[row["instruction_b"]]
        assert row["wire_bytes_a"] == pytest.approx(2 * (n_a - 1) / n_a * size_a)
        assert row["wire_bytes_b"] == pytest.approx(2 * (n_b - 1) / n_b * size_b)
        assert row["wire_bytes_delta"] != 0
        assert row["status"] in ("slower", "faster")
    # The weight-gradient all-reduce runs over `data`: 2 devices with 4-way TP, 4 with 2-way, and each device
    # holds twice the weights with 2-way TP: more wire bytes. The activation all-reduce over `model` shrinks.
    assert (comm["wire_bytes_delta"] > 0).sum() == 1 and (comm["wire_bytes_delta"] < 0).sum() == 1
    # The same two numbers from the model dims and mesh in the fixtures' json, not from any HLO text:
    # over `model` the activations' partial sums, f32[batch/data, d_model]; over `data` the gradients of
    # b1 [H/model], b2 [D], w1 [D, H/model], w2 [H/model, D] and the f32[] loss, in one tuple all-reduce.
    for side in ("a", "b"):
        meta = json.loads((HLO / (TP4 if side == "a" else TP2).name.replace(".hlo.txt", ".xla_cost.json"))
                          .read_text())
        bsz, hid, dm = meta["dims"]["batch"], meta["dims"]["d_hidden"], meta["dims"]["d_model"]
        n_data, n_model = meta["mesh"]["data"], meta["mesh"]["model"]
        act = 4 * bsz // n_data * dm
        grads = 4 * (hid // n_model + dm + 2 * dm * hid // n_model + 1)
        expected = sorted([2 * (n_model - 1) / n_model * act, 2 * (n_data - 1) / n_data * grads])
        assert sorted(comm[f"wire_bytes_{side}"]) == pytest.approx(expected)
    out = __import__("io").StringIO()
    render_diff_table(tp_diff, file=out)
    assert "collectives whose wire bytes changed" in out.getvalue()
    module = tp_diff.modules.iloc[0]
    assert module["wire_bytes_delta"] == pytest.approx(comm["wire_bytes_delta"].sum())


def test_fail_on_sets_the_exit_code(tmp_path, tp_diff, capsys):
    assert tp_diff.check(["wire_bytes:+0"]).regressed  # wire bytes grew
    assert not tp_diff.check(["wire_bytes:+1000%"]).regressed
    code = main(["diff", str(TP4), str(TP2), "--chip", CHIP, "--fail-on", "wire_bytes:+0", "--format", "json",
                 "-o", str(tmp_path / "d.json")])
    assert code == 1
    assert "fail-on: wire_bytes:+0" in capsys.readouterr().err
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["schema"] == "hloscope.diff/3" and doc["summary"]
    assert main(["diff", str(TP4), str(TP2), "--chip", CHIP, "--fail-on", "bogus:+5%"]) == 2


@pytest.mark.parametrize("text,expected", [
    ("roofline_s:+5%", ("roofline_s", 1, 0.05, True)),
    ("roofline_s:5%", ("roofline_s", 1, 0.05, True)),
    ("flops:-10%", ("flops", -1, 0.10, True)),
    ("wire_bytes:+1e6", ("wire_bytes", 1, 1e6, False)),
    ("measured_s:0.001", ("measured_s", 1, 0.001, False)),
])
def test_rules_parse(text, expected):
    (rule,) = parse_rules([text])
    assert (rule.field, rule.direction, rule.threshold, rule.relative) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["roofline_s", "roofline_s:+x%", "speed:+5%", "roofline_s:+5%%", ""])
def test_bad_rules_name_the_syntax(bad):
    with pytest.raises(ValueError, match="METRIC:\\[\\+\\|-\\]NUMBER"):
        parse_rules([bad])


def test_rule_on_a_field_one_side_lacks_is_broken(tp_diff):
    # Static reports have no measured time: a rule on it cannot pass silently.
    assert any("not known" in line for line in tp_diff.check(["measured_s:+5%"]).lines())


def test_report_json_round_trip_matches_the_hlo(tmp_path):
    path = tmp_path / "a.json"
    assert main(["report", str(TP4), "--chip", CHIP, "--format", "json", "-o", str(path)]) == 0
    d = hloscope.diff(str(path), str(TP4), chip=CHIP)
    assert set(d.ops["status"]) == {"unchanged"}
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something/2"}')
    with pytest.raises(ValueError, match="bad.json.*hloscope.report/3"):
        hloscope.diff(str(bad), str(TP4), chip=CHIP)


def test_diff_html_escapes_op_names():
    hostile = str(HLO / "cpu_hostile_names.hlo.txt")
    d = diff(hostile, str(TP4), chip=CHIP)  # nothing in common: everything appeared or vanished
    page = render_diff_html(d)
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_command_output_forms(tp_diff):
    doc = json.loads(diff_command_output(tp_diff, "json"))
    assert doc["schema"] == "hloscope.diff/3" and doc["ops"] and doc["modules"]
    assert diff_command_output(tp_diff, "html").startswith("<!DOCTYPE html>")
    assert "collectives whose wire bytes changed" in diff_command_output(tp_diff, "table")
    with pytest.raises(ValueError, match="table, json or html"):
        diff_command_output(tp_diff, "csv")


def test_modules_without_ops_compare_cleanly():
    import dataclasses

    report = hloscope.analyze(str(TP4), chip=CHIP)
    empty = dataclasses.replace(report, ops=report.ops.iloc[0:0])
    d = diff(empty, empty)
    assert d.ops.empty and not d.changed and d.check(["flops:+0"]).lines() == []
    assert json.loads(d.to_json())["ops"] == []
