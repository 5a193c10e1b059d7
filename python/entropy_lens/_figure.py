"""Plotly figures drawn by the Rust library, shown in notebooks as the Rust notebooks show them.

A :class:`Figure` is a ``plotly.graph_objects.Figure`` (restyle it, ``write_html`` it, ``show()``
it with any plotly renderer). Displayed as a cell's result it also carries the library's static
SVG sketch of its data: the sketch is what GitHub and untrusted notebooks show, and plotly.js
replaces it with the interactive chart where scripts run. plotly.js goes out with the first
figure a kernel displays only (marked so that ``scripts/strip-plotly.py`` can drop it from a
committed notebook while its HTML export keeps one copy), and nothing is fetched from a CDN.
"""

import json
from typing import Any, Dict, Optional, Tuple

import plotly.graph_objects as go

from . import _native

# Shown in place of a chart the library did not draw (a plotly figure wrapped by ``Figure(fig)``)
# where scripts do not run.
_NO_SKETCH = (
    '<svg xmlns="http://www.w3.org/2000/svg" class="entropy-lens-sketch" width="760" height="48">'
    '<text x="12" y="28" font-family="sans-serif" font-size="13" fill="#555">Interactive chart: '
    "open the notebook in Jupyter and run it (plotly.js), or see its HTML report.</text></svg>"
)


class Figure(go.Figure):
    """A ``plotly.graph_objects.Figure`` with entropy-lens's static SVG sketch for notebook output.

    The profile and run methods return these. ``Figure(any_plotly_figure)`` wraps a figure of your
    own (plotly express, say) so that it displays the same way: plotly.js once per kernel, offline
    in the HTML export (its sketch is then a line saying the chart is interactive).
    """

    def __init__(self, *args: Any, sketch: str = "", height: Optional[int] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._el_sketch = sketch
        self._el_height = height

    @classmethod
    def _from_chart(cls, parts: Tuple[str, str, int]) -> "Figure":
        spec, svg, height = parts
        fig = json.loads(spec)
        layout = fig.get("layout", {})
        # The Rust charts' own look: no plotly.py default template on top of their layout.
        layout.setdefault("template", {})
        return cls(
            data=fig.get("data", []),
            layout=layout,
            frames=fig.get("frames"),
            sketch=svg,
            height=height,
        )

    @property
    def sketch(self) -> str:
        """The static SVG sketch of the figure's data as the library drew it (``<svg>…</svg>``;
        empty for a wrapped figure of your own)."""
        return self._el_sketch

    def _notebook_html(self) -> str:
        height = self.layout.height or self._el_height or 450
        return _native.notebook_html(self.to_json(), self._el_sketch or _NO_SKETCH, int(height))

    def _repr_html_(self) -> str:
        return self._notebook_html()

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> Dict[str, Any]:
        return {"text/html": self._notebook_html(), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True)


def reset_plotly_js() -> None:
    """Makes the next figure displayed embed plotly.js again (after clearing a notebook's
    outputs)."""
    _native.reset_plotly_js()
