"""Pod-scale profiles: a run directory of many host files as one report, the per-host work on Dask
(docs/pod_scale.md). ``run.analyze_run`` is the driver; ``host.reduce_host`` the per-host task."""

from hloscope.pod.run import analyze_run

__all__ = ["analyze_run"]
