"""Arrays have the documented shapes and dtypes; to_pandas holds the same values."""

import numpy as np
import pandas as pd

import entropy_lens as el


def test_shapes_dtypes_and_values(lens):
    p = lens.profile(
        "The sea is", generate=4, alphas=[0.5, "inf"], kl=True, target="next", embed=True
    )
    rows, points = 4, 30  # 4 generated tokens × 30 blocks (layer 0 apart, in embed)
    assert p.shannon.shape == (rows, points) and p.shannon.dtype == np.float64
    assert p.point_labels == [str(i) for i in range(1, 31)]
    assert p.embed["shannon"].shape == (rows,) and sorted(p.embed["renyi"]) == ["0.5", "inf"]
    assert sorted(p.renyi) == ["0.5", "inf"]
    assert all(m.shape == (rows, points) and m.dtype == np.float64 for m in p.renyi.values())
    assert p.top_p_count.shape == (rows, points) and p.top_p_count.dtype == np.int64
    assert p.kl_to_final.shape == (rows, points)
    assert p.target_rank.shape == (rows, points) and p.target_logprob.shape == (rows, points)
    assert p.positions.dtype == np.int64 and len(p.positions) == rows
    assert len(p.generated_ids) == 4 and len(p.tokens) == len(p.prompt_ids) + 4
    # Entropy bounds: 0 ≤ H∞ ≤ H ≤ H½ ≤ ln |V|; the final layer's KL to itself is 0.
    h = p.shannon
    assert np.all(h >= 0) and np.all(h <= np.log(49152) + 1e-9)
    assert np.all(p.renyi["inf"] <= h + 1e-9) and np.all(h <= p.renyi["0.5"] + 1e-9)
    assert np.allclose(p.kl_to_final[:, -1], 0.0, atol=1e-9)
    # The followed token is each row's next token: the generated ids.
    np.testing.assert_array_equal(p.target_id, p.generated_ids)
    d = p.to_dict()
    np.testing.assert_array_equal(p.top_p_count, [x["top_p_count"] for x in d["positions"]])
    np.testing.assert_array_equal(p.renyi["0.5"], [x["renyi"]["0.5"] for x in d["positions"]])
    # Prediction depth: the first block from which every later block's top-1 is the last's.
    assert p.prediction_depth.shape == (rows,) and p.prediction_depth.dtype == np.int64
    for depth, blocks in zip(p.prediction_depth, p.top_k):
        top1 = [k[0][0] for k in blocks]
        settled = next(j for j in range(points) if all(t == top1[-1] for t in top1[j:]))
        assert depth == settled + 1
    # The greedy token is the last block's top-1.
    np.testing.assert_array_equal([b[-1][0][0] for b in p.top_k], p.generated_ids)


def test_to_pandas_round_trips(lens):
    p = lens.profile("Once upon a time", all_positions=True, alphas=[2], kl=True)
    df = p.to_pandas()
    assert list(df.columns) == [
        "prompt",
        "position",
        "token",
        "next_token",
        "block",
        "point",
        "statistic",
        "value",
    ]
    assert set(df.statistic) == {"shannon", "renyi_2", "top_p_count", "kl_to_final"}
    for name, m in [
        ("shannon", p.shannon),
        ("renyi_2", p.renyi["2"]),
        ("top_p_count", p.top_p_count),
        ("kl_to_final", p.kl_to_final),
    ]:
        wide = df[df.statistic == name].pivot(index="position", columns="block", values="value")
        np.testing.assert_array_equal(wide.to_numpy(), m)
    first = df[(df.position == p.positions[0]) & (df.block == 1) & (df.statistic == "shannon")]
    assert first.token.item() == p.tokens[p.positions[0]]
    assert first.next_token.item() == p.tokens[p.positions[0] + 1]
    # Several profiles make one long table.
    both = pd.concat([x.to_pandas() for x in lens.profile(["a", "b"])], ignore_index=True)
    assert set(both.prompt) == {"a", "b"}


def test_figures_are_plotly_figures_of_the_rust_charts(lens):
    import plotly.graph_objects as go

    p = lens.profile("The sea is", generate=3, target="next")
    heat = p.heatmap()
    assert isinstance(heat, go.Figure)
    # The Rust heatmap puts blocks on the y axis and positions on the x axis.
    np.testing.assert_array_equal(np.asarray(heat.data[0].z, dtype=float).T, p.shannon)
    bars = p.delta_bars(-1)
    dh = np.diff(p.shannon[-1])
    np.testing.assert_allclose(np.asarray(bars.data[0].y, dtype=float)[-len(dh) :], dh, atol=1e-12)
    assert isinstance(p.trace(0), go.Figure)


def test_figures_display_their_sketch_and_plotly_js_once_per_process(lens):
    p = lens.profile("The sea is", generate=2)
    el.reset_plotly_js()
    first = p.heatmap()._repr_mimebundle_()["text/html"]
    second = p.delta_bars()._repr_mimebundle_()["text/html"]
    begin = "<!-- entropy-lens:plotly.js -->"
    assert first.count(begin) == 1 and begin not in second
    for html in (first, second):
        assert html.count('class="entropy-lens-chart"') == 1 and "<svg" in html
    # A restyled figure is displayed as it is now.
    fig = p.heatmap().update_layout(title="restyled here")
    assert "restyled here" in fig._repr_html_()


def test_a_profile_reads_back_from_json(lens):
    p = lens.profile("Hello", generate=2)
    q = el.Profile.from_json(p.to_json())
    assert q.to_json() == p.to_json()
    np.testing.assert_array_equal(q.shannon, p.shannon)
