"""Will it fit? The per-device memory a compiled module needs, from its post-optimization HLO text.

Modules, in data-flow order:

* ``liveness`` -- buffers (values XLA makes share memory, merged) and their live ranges over the flattened
  schedule (XLA's ``HloAliasAnalysis`` and ``HloLiveRange``);
* ``assignment`` -- which buffers get allocations of their own and which go to the temp allocation, and the temp
  allocation's size (XLA's ``BufferAssigner``);
* ``footprint`` -- argument, output, alias and temp bytes as ``compiled.memory_analysis()`` reports them, the
  peak's instruction and its largest live buffers, and the verdict against a chip's HBM (``MemoryFootprint``);
* ``forked`` -- the footprint of an HLO text file computed by a forked child while the parent analyzes the file
  (``hloscope report --format json``, on a second core).

docs/memory.md gives the rules and how close they come to XLA's own numbers.
"""

from hloscope.memory.footprint import LiveBuffer, MemoryFootprint, footprint

__all__ = ["LiveBuffer", "MemoryFootprint", "footprint"]
