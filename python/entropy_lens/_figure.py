"""Plotly figures drawn by the Rust library, shown in notebooks the way the Rust notebooks show them.

A :class:`Figure` is a ``plotly.graph_objects.Figure`` (restyle it, ``write_html`` it, ``show()`` it
with any plotly renderer). Displayed as a cell's result it also carries the library's static SVG
sketch of its data: the sketch is what GitHub and untrusted notebooks show, and plotly.js replaces it
with the interactive chart where scripts run. plotly.js goes out with the first figure a kernel
displays only (marked so that ``scripts/strip-plotly.py`` can drop it from a committed notebook while
its HTML export keeps one copy), and nothing is fetched from a CDN.
"""

import json
from typing import Any, Dict, Optional, Tuple

import plotly.graph_objects as go

from . import _native


class Figure(go.Figure):
    """A ``plotly.graph_objects.Figure`` with entropy-lens's static SVG sketch for notebook output."""

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
            data=fig.get("data", []), layout=layout, frames=fig.get("frames"), sketch=svg, height=height
        )

    @property
    def sketch(self) -> str:
        """The static SVG sketch of the figure's data as the library drew it (``<svg>…</svg>``)."""
        return self._el_sketch

    def _notebook_html(self) -> str:
        height = self.layout.height or self._el_height or 450
        return _native.notebook_html(self.to_json(), self._el_sketch, int(height))

    def _repr_html_(self) -> str:
        if not self._el_sketch:
            return super()._repr_html_()
        return self._notebook_html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> Dict[str, Any]:
        if not self._el_sketch:
            return super()._repr_mimebundle_(include, exclude, **kwargs)
        return {"text/html": self._notebook_html(), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        if not self._el_sketch:
            return super()._ipython_display_()
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True)


def reset_plotly_js() -> None:
    """Makes the next figure displayed embed plotly.js again (after clearing a notebook's outputs)."""
    _native.reset_plotly_js()
