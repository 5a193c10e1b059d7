"""`Profiler` (a loaded model) and `Profile` (what it measures), as numpy, pandas and Plotly."""

import json
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union, overload

import numpy as np

from . import _native
from ._progress import ProgressArg, callback

#: The lens's top-p mass and the α = 0 support threshold the CLI uses by default.
DEFAULT_TOP_P = 0.6
DEFAULT_SUPPORT_THRESHOLD = 1e-20


def _prompts(prompts: Union[str, Iterable[str]]) -> "tuple[List[str], bool]":
    if isinstance(prompts, str):
        return [prompts], True
    if isinstance(prompts, (bytes, bytearray)):
        raise TypeError("prompts must be str (decode bytes first), or a list of str")
    try:
        items = list(prompts)
    except TypeError:
        raise TypeError(
            f"prompts must be a str or a list of str, got {type(prompts).__name__}"
        ) from None
    for i, p in enumerate(items):
        if not isinstance(p, str):
            raise TypeError(f"prompts[{i}] is {type(p).__name__}, not str")
    if not items:
        raise ValueError("no prompts given")
    return items, False


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(value)


def _count(name: str, value: Any) -> int:
    v = _int(name, value)
    if v < 0:
        raise ValueError(f"{name} must be 0 or more, got {v}")
    return v


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _alpha(a: Any) -> float:
    if isinstance(a, str):
        a = a.strip().lower()
        if a in ("inf", "infinity", "∞"):
            return float("inf")
    try:
        return float(a)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read Rényi order {a!r}: give a number ≥ 0 or 'inf'") from None


class Profile:
    """One prompt's entropy profile: statistics at every measured position and layer.

    Rows are the measured positions (the last prompt token, every prompt token with
    ``all_positions=True``, and one per generated token); columns are the read points: block
    1 … L after each block (``point_labels``; ``1.a`` … after each block's attention). Layer 0
    (the embedding output, ``embed=True``) is apart, in :attr:`embed`. Entropies are in nats.
    """

    __slots__ = ("_p", "_cache")

    def __init__(self, native: "_native.Profile") -> None:
        self._p = native
        self._cache: Dict[str, Any] = {}

    # --- identity -------------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._p.model

    @property
    def prompt(self) -> str:
        return self._p.prompt

    @property
    def n_blocks(self) -> int:
        """L, the model's number of blocks."""
        return self._p.n_blocks

    @property
    def read_point(self) -> str:
        """``block``, ``attention``, ``both``, ``attn-out``, ``mlp-out`` or ``components``."""
        return self._p.read_point

    @property
    def tokens(self) -> List[str]:
        """Every token of the sequence (prompt, then generated), as text."""
        return self._p.tokens

    @property
    def prompt_ids(self) -> List[int]:
        return self._p.prompt_ids

    @property
    def generated_ids(self) -> List[int]:
        return self._p.generated_ids

    @property
    def generated_text(self) -> str:
        return self._p.generated_text

    @property
    def positions(self) -> np.ndarray:
        """Token position of each row (int64, shape ``(rows,)``), an index into ``tokens``."""
        return self._p.positions

    @property
    def point_labels(self) -> List[str]:
        """Column labels: ``1`` … ``L`` (``1.a`` … ``L.a`` after each block's attention)."""
        return self._p.point_labels

    @property
    def alphas(self) -> List[str]:
        """The Rényi orders measured, as keys of :attr:`renyi` (``'0.5'``, ``'2'``, ``'inf'``)."""
        return self._p.alphas

    def __len__(self) -> int:
        return len(self._p)

    def __repr__(self) -> str:
        rows, cols = self.shannon.shape
        return f"<Profile {self.model!r} {self.prompt[:40]!r}: {rows} positions × {cols} points>"

    # --- arrays ----------------------------------------------------------------------------
    def _memo(self, key: str, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def shannon(self) -> np.ndarray:
        """Shannon entropy, float64, shape ``(rows, points)``, nats."""
        return self._memo("shannon", self._p.shannon)

    @property
    def renyi(self) -> Dict[str, np.ndarray]:
        """Rényi entropy per measured order: ``{'0.5': array (rows, points)}``, nats."""
        return self._memo("renyi", lambda: {a: self._p.renyi(a) for a in self.alphas})

    @property
    def top_p_count(self) -> np.ndarray:
        """Size of the top-p candidate set, int64, shape ``(rows, points)``."""
        return self._memo("top_p", lambda: self._p.top_p_count().astype(np.int64))

    @property
    def kl_to_final(self) -> Optional[np.ndarray]:
        """KL(final ‖ layer) in nats, ``(rows, points)``; ``None`` unless profiled with
        ``kl=True``."""
        return self._memo("kl", self._p.kl_to_final)

    @property
    def prediction_depth(self) -> Optional[np.ndarray]:
        """Per row, the first point (1-based, along the columns) from which the lens's most likely
        token is the model's own and stays so: int64 ``(rows,)``; ``points + 1`` where the last
        column's top-1 differs (read after attention only). ``None`` for a profile written before
        depths existed."""
        return self._memo("depth", self._p.prediction_depth)

    def _target(self) -> Any:
        return self._memo("target", self._p.target)

    @property
    def target_rank(self) -> Optional[np.ndarray]:
        """Rank (0 = most likely) of the followed token, float64 ``(rows, points)`` (NaN where a
        row follows none); ``None`` without ``target``."""
        t = self._target()
        return None if t is None else t[0]

    @property
    def target_logprob(self) -> Optional[np.ndarray]:
        """Log-probability (nats) of the followed token, ``(rows, points)``; ``None`` without
        ``target``."""
        t = self._target()
        return None if t is None else t[1]

    @property
    def target_id(self) -> Optional[np.ndarray]:
        """Id of the token each row follows (int64, -1 where none); ``None`` without ``target``."""
        t = self._target()
        return None if t is None else t[2]

    @property
    def embed(self) -> Optional[Dict[str, Any]]:
        """Layer 0 (the embedding output) per row, when profiled with ``embed=True``:
        ``{'shannon': (rows,), 'top_p_count': (rows,), 'renyi': {α: (rows,)}}``; else ``None``."""

        def make() -> Optional[Dict[str, Any]]:
            rows = [pos.get("embed") for pos in self.to_dict()["positions"]]
            if not rows or any(r is None for r in rows):
                return None
            return {
                "shannon": np.array([r["shannon"] for r in rows], dtype=np.float64),
                "top_p_count": np.array([r["top_p_count"] for r in rows], dtype=np.int64),
                "renyi": {
                    a: np.array([r["renyi"][a] for r in rows], dtype=np.float64)
                    for a in rows[0].get("renyi", {})
                },
            }

        return self._memo("embed", make)

    @property
    def top_k(self) -> List[List[List["tuple[int, float]"]]]:
        """The k most likely ``(id, probability)`` per row and point."""
        return self._memo("top_k", self._p.top_k)

    # --- serialisation ---------------------------------------------------------------------
    def to_json(self) -> str:
        """One JSON line, byte for byte what ``entropy-lens profile --json`` prints."""
        return self._p.to_json()

    def to_dict(self) -> Dict[str, Any]:
        """The ``profile --json`` object as Python values."""
        return json.loads(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> "Profile":
        """Reads a line of ``profile --json`` (or a record's ``profile``, serialised)."""
        return cls(_native.Profile.from_json(text))

    def to_pandas(self) -> "Any":
        """One long table, a row per (position, point, statistic):

        ``prompt, position, token, next_token, block, point, statistic, value``

        ``block`` is the layer number (0 = embedding, 1 … L), ``point`` its label (``3.a`` after
        block 3's attention), ``statistic`` one of ``shannon``, ``renyi_<α>``, ``top_p_count``,
        ``kl_to_final``, ``target_rank``, ``target_logprob``.
        """
        import pandas as pd

        labels = self.point_labels
        blocks = [int(lbl.split(".")[0]) for lbl in labels]
        stats: List["tuple[str, np.ndarray]"] = [("shannon", self.shannon)]
        stats += [(f"renyi_{a}", m) for a, m in self.renyi.items()]
        stats.append(("top_p_count", self.top_p_count.astype(np.float64)))
        for name, m in (
            ("kl_to_final", self.kl_to_final),
            ("target_rank", self.target_rank),
            ("target_logprob", self.target_logprob),
        ):
            if m is not None:
                stats.append((name, m))
        rows, cols = self.shannon.shape
        positions = self.positions
        tokens = self.tokens
        token = [tokens[p] if p < len(tokens) else "" for p in positions]
        next_token = [tokens[p + 1] if p + 1 < len(tokens) else "" for p in positions]
        n = rows * cols
        frames = []
        for name, m in stats:
            frames.append(
                pd.DataFrame(
                    {
                        "prompt": self.prompt,
                        "position": np.repeat(positions, cols),
                        "token": np.repeat(np.array(token, dtype=object), cols),
                        "next_token": np.repeat(np.array(next_token, dtype=object), cols),
                        "block": np.tile(np.array(blocks, dtype=np.int64), rows),
                        "point": np.tile(np.array(labels, dtype=object), rows),
                        "statistic": np.full(n, name, dtype=object),
                        "value": m.reshape(-1),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    # --- figures (the Rust charts' Plotly JSON) -------------------------------------------
    def _row(self, position: int) -> int:
        rows = len(self)
        i = _int("position", position)
        if i < 0:
            i += rows
        if not 0 <= i < rows:
            raise IndexError(
                f"row {position} out of range for a profile of {rows} measured positions"
            )
        return i

    def heatmap(self, metric: str = "shannon") -> "Any":
        """Positions × blocks heatmap (``metric``: ``shannon``, ``top_p`` or ``renyi:<α>``)."""
        return _figure(self._p.heatmap_chart(metric))

    def delta_bars(self, position: int = -1) -> "Any":
        """Per-block entropy change ΔH at one measured row (default: the last)."""
        return _figure(self._p.delta_bars_chart(self._row(position)))

    def trace(self, position: int = -1) -> "Any":
        """The followed token's rank and probability through the blocks (needs ``target``)."""
        return _figure(self._p.trace_chart(self._row(position)))


def _figure(parts: "tuple[str, str, int]") -> "Any":
    from ._figure import Figure

    return Figure._from_chart(parts)


class Profiler:
    """A model, its tokenizer and the lens: loads once, profiles many prompts.

    Use :meth:`Profiler.load`; ``with Profiler.load(...) as lens:`` frees the model at the end.
    Calls release the GIL while the model works, and Ctrl-C stops them within about a second
    (``KeyboardInterrupt``). One object may be shared by threads: their calls run one at a time.
    """

    def __init__(self, native: "_native.Profiler") -> None:
        if not isinstance(native, _native.Profiler):
            raise TypeError("use Profiler.load(model) to make a Profiler")
        self._native = native

    @classmethod
    def load(
        cls, model: Optional[str] = None, device: str = "cpu", dtype: Optional[str] = None
    ) -> "Profiler":
        """Loads ``model``: a GGUF file, a Hugging Face folder (config.json, safetensors,
        tokenizer.json), a Hub id (``HuggingFaceTB/SmolLM2-135M``; HF_TOKEN for gated ones), an
        offline model's short name (``smollm2``, ``gemma3-270m``: downloaded on first use,
        sha256-checked) or a name in the models folder; ``None``: the default model.

        ``device``: ``cpu``, ``cuda`` or ``cuda:N`` (CUDA builds); ``dtype``: ``f32``, ``f16``,
        ``bf16`` (safetensors) or ``None`` (GGUF: its own quantized weights; safetensors: f32).
        """
        if model is not None and not isinstance(model, str):
            model = str(model)  # a pathlib.Path
        return cls(_native.Profiler.load(model, device, dtype))

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def info(self) -> Dict[str, Any]:
        """Name, architecture, blocks, width, vocabulary, context, dtype, device, sha256."""
        return json.loads(self._native.info())

    @property
    def closed(self) -> bool:
        return self._native.closed

    def close(self) -> None:
        """Frees the model's memory; the object cannot profile afterwards."""
        self._native.close()

    def __enter__(self) -> "Profiler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Profiler {self.name!r}{' (closed)' if self.closed else ''}>"

    def decode(self, ids: Sequence[int]) -> str:
        return self._native.decode([_int("id", i) for i in ids])

    @overload
    def profile(self, prompts: str, **kwargs: Any) -> Profile: ...
    @overload
    def profile(self, prompts: Iterable[str], **kwargs: Any) -> List[Profile]: ...

    def profile(
        self,
        prompts: Union[str, Iterable[str]],
        generate: int = 0,
        chat: bool = False,
        temperature: float = 0.0,
        seed: int = 42,
        ignore_eos: bool = False,
        all_positions: bool = False,
        alphas: Sequence[Union[float, str]] = (),
        top_p: float = DEFAULT_TOP_P,
        top_k: int = 5,
        kl: bool = False,
        target: Union[None, str, int] = None,
        lens: str = "logit",
        read_point: str = "block",
        skip: Sequence[int] = (),
        batch_size: Optional[int] = None,
        *,
        sample_top_p: Optional[float] = None,
        support_threshold: float = DEFAULT_SUPPORT_THRESHOLD,
        top_p_ids: bool = False,
        embed: bool = False,
        add_bos: bool = True,
        progress: ProgressArg = None,
    ) -> Union[Profile, List[Profile]]:
        """Profiles one prompt (returns a :class:`Profile`) or several (a list, batched).

        The options are the ``entropy-lens profile`` flags: ``generate`` tokens (greedy at
        ``temperature=0``, else sampled with ``seed`` and ``sample_top_p``), ``chat`` (the
        model's chat template), ``all_positions`` (every prompt position), ``alphas`` (Rényi
        orders, ``'inf'`` allowed), ``top_p`` (mass of the candidate set, in (0, 1]), ``top_k``,
        ``kl`` (KL to the final distribution), ``target`` (``'next'`` or a token id: its rank and
        log-probability), ``lens`` (``'logit'`` or ``'tuned:<folder>'``), ``read_point``
        (``block``, ``attention``, ``both``; or what each block writes: ``attn-out``,
        ``mlp-out``, ``components``, logit lens only), ``skip`` (blocks 1…L whose writes are
        zeroed), ``batch_size`` (default 8 on the CPU), ``embed`` (layer 0 too), ``add_bos``.
        ``progress=True`` prints one updating line.
        """
        items, single = _prompts(prompts)
        if isinstance(target, bool):
            raise TypeError(f"target must be None, 'next' or a token id, got {target!r}")
        if isinstance(target, (int, np.integer)):
            if target < 0:
                raise ValueError(f"target token id must be ≥ 0, got {target}")
            target = str(int(target))
        elif target is not None and not isinstance(target, str):
            raise TypeError(f"target must be None, 'next' or a token id, got {target!r}")
        if isinstance(alphas, (str, int, float)):
            alphas = [alphas]
        if batch_size is not None:
            batch_size = _int("batch_size", batch_size)
            if batch_size < 1:
                raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        skip_blocks = [_int("skip", b) for b in skip]
        if any(b < 1 for b in skip_blocks):
            raise ValueError(
                f"blocks to skip are numbered 1..={self._native_blocks()}, got {skip_blocks}"
            )
        cb, line = callback(progress, "profiling")
        try:
            out = self._native.profile(
                items,
                generate=_int("generate", generate),
                chat=_flag("chat", chat),
                temperature=float(temperature),
                sample_top_p=None if sample_top_p is None else float(sample_top_p),
                seed=_count("seed", seed),
                ignore_eos=_flag("ignore_eos", ignore_eos),
                all_positions=_flag("all_positions", all_positions),
                alphas=[_alpha(a) for a in alphas],
                support_threshold=float(support_threshold),
                top_p=float(top_p),
                top_p_ids=_flag("top_p_ids", top_p_ids),
                top_k=_count("top_k", top_k),
                embed=_flag("embed", embed),
                add_bos=_flag("add_bos", add_bos),
                kl=_flag("kl", kl),
                target=target,
                lens=str(lens),
                read_point=str(read_point),
                skip=skip_blocks,
                batch_size=batch_size,
                progress=cb,
            )
        finally:
            if line is not None:
                line.close()
        profiles = [Profile(p) for p in out]
        return profiles[0] if single else profiles

    def _native_blocks(self) -> Any:
        try:
            return self.info["n_layers"]
        except Exception:
            return "L"
