"""The overlap window of async collectives from the schedule (hloscope.steps.schedule), worked by hand from the
printed order of the instructions."""

from __future__ import annotations

from pathlib import Path

import pytest

import hloscope

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


def _roof(report, name):
    return float(report.ops.loc[report.ops["instruction"] == name, "roofline_s"].iloc[0])


def test_deviceless_tpu_collective_permute_window():
    """libtpu's schedule of fixtures/hlo/tpu-v5e_collectives.hlo.txt puts, between collective-permute-start and
    -done: get-tuple-elements and a bitcast (no work), three synchronous collectives (all-to-all.14,
    reduce_scatter.7, psum_invariant.7: communication, not work that hides it) and copy_bitcast_fusion -- the only
    work, so the window is that fusion's roofline time."""
    r = hloscope.analyze(FIXTURES / "tpu-v5e_collectives.hlo.txt", chip="tpu-v5e")
    start = r.ops[r.ops["instruction"] == "collective-permute-start"].iloc[0]
    window = _roof(r, "copy_bitcast_fusion")
    assert start["overlap_window_s"] == pytest.approx(window)
    assert r.ops.loc[r.ops["instruction"] != "collective-permute-start", "overlap_window_s"].isna().all()
    # Exposed at the roof: the permute beyond its window, plus every synchronous collective in full.
    sync = sum(_roof(r, n) for n in ("all_to_all.14", "reduce_scatter.7", "psum_invariant.7", "all-gather.4"))
    want = max(start["roofline_s"] - window, 0.0) + sync
    assert r.modules["exposed_comm_roofline_s"].iloc[0] == pytest.approx(want)


_WHILE_BETWEEN = """HloModule overlap_while

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

body {
  p = (s32[], f32[256,256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[256,256] get-tuple-element(p), index=1
  d = f32[256,256] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[256,256]) tuple(j, d)
}

cond {
  p = (s32[], f32[256,256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  g = f32[4096,1024] parameter(0)
  x = f32[256,256] parameter(1)
  ars = f32[4096,1024] all-reduce-start(g), replica_groups={{0,1,2,3}}, to_apply=add
  zero = s32[] constant(0)
  t0 = (s32[], f32[256,256]) tuple(zero, x)
  w = (s32[], f32[256,256]) while(t0), condition=cond, body=body, backend_config={"known_trip_count":{"n":"4"}}
  ard = f32[4096,1024] all-reduce-done(ars)
  y = f32[256,256] get-tuple-element(w), index=1
  ar2 = f32[4096,1024] all-reduce(ard), replica_groups={{0,1,2,3}}, to_apply=add
  ROOT out = (f32[4096,1024], f32[256,256]) tuple(ar2, y)
}
"""


def test_work_inside_a_while_between_start_and_done_counts():
    """The while between all-reduce-start and -done runs its body 4 times: the window is the roofline time of
    everything the while runs (the body's dot and add, 4 times each; the condition's compare 5 times), which the
    ops table holds as totals per module run; the synchronous all-reduce after the done hides nothing."""
    r = hloscope.analyze(_WHILE_BETWEEN, chip="h100")
    body_and_cond = r.ops[r.ops["computation"].isin(["body", "cond"])]
    assert (body_and_cond["instruction"] == "d").any()
    window = float(body_and_cond["roofline_s"].sum())
    assert float(body_and_cond.loc[body_and_cond["instruction"] == "d", "executions"].iloc[0]) == 4
    ars = r.ops[r.ops["instruction"] == "ars"].iloc[0]
    assert ars["overlap_window_s"] == pytest.approx(window)
    want = max(ars["roofline_s"] - window, 0.0) + _roof(r, "ar2")
    assert r.modules["exposed_comm_roofline_s"].iloc[0] == pytest.approx(want)
    # 2 x 4096 x 1024 x 4 bytes on the wire at the roof takes far longer than four 256^3 dots: mostly exposed.
    assert want > 0.5 * (ars["roofline_s"] + _roof(r, "ar2"))


def test_no_collectives_exposes_nothing():
    r = hloscope.analyze(FIXTURES / "cpu_mlp_1dev.hlo.txt", chip="h100")
    assert not (r.ops["category"] == "collective").any()
    assert (r.modules["exposed_comm_roofline_s"] == 0).all()
    assert r.ops["overlap_window_s"].isna().all()
    assert r.modules["exposed_comm_s"].isna().all()  # measured: no trace


def test_terminal_says_what_the_schedule_hides():
    import io

    from hloscope.report.terminal import render

    r = hloscope.analyze(FIXTURES / "tpu-v5e_collectives.hlo.txt", chip="tpu-v5e")
    buf = io.StringIO()
    render(r, 3, file=buf, width=250)
    line = next(x for x in buf.getvalue().splitlines() if x.startswith("communication at the roof"))
    assert "4 synchronous collective(s)" in line and "1 async collective(s)" in line


def test_html_draws_each_step_as_stacked_bars():
    """fixtures/profile/cpu_allreduce_exposed: 4 steps on 8 devices; every step's bar has its parts (compute,
    memory, exposed communication, idle at least) whose heights add up to the mean wall time's."""
    import re

    from hloscope.report.html import STEP_PARTS, render_html
    from hloscope.steps.summary import across_devices

    r = hloscope.analyze(FIXTURES.parent / "profile" / "cpu_allreduce_exposed", chip="h100")
    page = render_html(r)
    assert "<svg id=steps" in page and "<h2>Advice</h2>" in page
    svg = page[page.index("<svg id=steps"):page.index("</svg>", page.index("<svg id=steps"))]
    rects = re.findall(r'<rect class=seg x="([0-9.]+)" y="[0-9.]+" width="[0-9.]+" height="([0-9.]+)" fill="(#[0-9a-f]+)"',
                       svg)
    per = across_devices(r.steps)
    xs = sorted({float(x) for x, _, _ in rects})
    assert len(xs) == len(per) == 4
    colors = {c for _, _, c in rects}
    assert {color for col, _, color in STEP_PARTS if col in ("exposed_comm_s", "idle_s")} <= colors
    heights = [sum(float(h) for x, h, _ in rects if float(x) == x0) for x0 in xs]
    means = per[[c for c, _, _ in STEP_PARTS]].sum(axis=1).tolist()
    assert [h / max(heights) for h in heights] == pytest.approx([m / max(means) for m in means], abs=0.01)


@pytest.mark.parametrize("name", ["cpu_mlp_1dev.hlo.txt", "cpu_collectives.hlo.txt", "tpu-v5e_collectives.hlo.txt",
                                  "cpu_transformer_scan_grad.hlo.txt"])
def test_modules_table_made_with_the_schedule_known_is_what_the_overlap_pass_fills(fixtures_dir, name):
    """``modules_frame(schedule_known=True)`` makes ``exposed_comm_roofline_s`` 0.0 at once where no op
    communicates; the tables after ``add_overlap_columns`` are the same as when that pass sets every value."""
    from hloscope.cost import module_cost
    from hloscope.parsers import parse_hlo
    from hloscope.roofline.chips import get_chip
    from hloscope.roofline.tables import communicates, modules_frame, ops_frame
    from hloscope.steps.columns import add_overlap_columns

    module = parse_hlo(fixtures_dir / "hlo" / name)
    chip = get_chip("tpu-v5e")
    costs = [module_cost(module)]
    built = {}
    for known in (False, True):
        ops = ops_frame(costs, chip)
        table = modules_frame(costs, ops, chip, schedule_known=known)
        made = table["exposed_comm_roofline_s"].tolist()
        if known and not communicates(ops):
            assert made == [0.0]
        else:
            assert all(v != v for v in made)  # NaN until the overlap pass
        add_overlap_columns(ops, table, [module])
        built[known] = (ops, table)
    assert built[True][0].equals(built[False][0]) and built[True][1].equals(built[False][1])
    assert communicates(built[True][0]) == (name != "cpu_mlp_1dev.hlo.txt")


@pytest.mark.parametrize("name", ["tpu-v5e_collectives.hlo.txt", "cpu_collectives.hlo.txt",
                                  "tpu-v5e_mlp_sharded.hlo.txt"])
def test_overlap_from_kept_codes_equals_overlap_from_the_frame(name):
    """A static analysis keeps the ops table's category and comm_kind as codes into their few strings, and the
    overlap reads which rows communicate from them; read from the DataFrame (strings only), it is the same."""
    from hloscope._columns import column_codes
    from hloscope.steps.schedule import async_overlap

    r = hloscope.analyze(FIXTURES / name, chip="tpu-v5e")
    table = r.table("ops")
    assert column_codes(table, "category") is not None and column_codes(table, "comm_kind") is not None
    assert column_codes(r.ops, "category") is None  # (a DataFrame keeps no codes)
    kept, framed = async_overlap(r.hlo_modules, table), async_overlap(r.hlo_modules, r.ops)
    assert kept == framed and sum(framed[1].values()) > 0
