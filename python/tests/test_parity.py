"""The Python API equals `entropy-lens profile --json` byte for byte, request by request."""

import json

import numpy as np
import pytest
from conftest import cli

PROMPTS = ["The Eiffel Tower is located in the city of", "Once upon a time", "2 + 2 ="]

# (API keyword arguments, the same request as CLI flags)
CASES = {
    "greedy": (dict(generate=6), ["--generate", "6"]),
    "sampled": (
        dict(generate=6, temperature=0.8, sample_top_p=0.9, seed=7),
        ["--generate", "6", "--temperature", "0.8", "--sample-top-p", "0.9", "--seed", "7"],
    ),
    "chat": (dict(generate=4, chat=True), ["--generate", "4", "--chat"]),
    "skip": (dict(generate=4, skip=[3, 17]), ["--generate", "4", "--skip", "3,17"]),
    "all_positions": (
        dict(all_positions=True, alphas=[0.5, 2, "inf"], kl=True, target="next", embed=True),
        ["--all-positions", "--alpha", "0.5", "2", "inf", "--kl", "--target", "next", "--embed"],
    ),
    "batch": (dict(generate=5, batch_size=2), ["--generate", "5", "--batch-size", "2"]),
    "attention": (dict(read_point="both", top_k=3), ["--read-point", "both", "--top-k", "3"]),
    "top_p_ids": (
        dict(top_p=0.9, top_p_ids=True, add_bos=False),
        ["--top-p", "0.9", "--top-p-ids", "--no-bos"],
    ),
}


def prompts_file(tmp_path):
    f = tmp_path / "prompts.jsonl"
    f.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    return str(f)


@pytest.mark.parametrize("case", sorted(CASES))
def test_profiles_equal_the_cli_byte_for_byte(case, lens, smollm2, tmp_path):
    kwargs, flags = CASES[case]
    got = [p.to_json() for p in lens.profile(PROMPTS, **kwargs)]
    run = cli("profile", "--model", smollm2, "--prompts", prompts_file(tmp_path), "--json", *flags)
    want = run.stdout.splitlines()
    assert len(want) == len(PROMPTS)
    assert got == want


def test_a_tuned_lens_equals_the_cli(tiny_llama):
    import entropy_lens as el

    spec = f"tuned:{tiny_llama / 'lens'}"
    with el.Profiler.load(str(tiny_llama)) as tiny:
        got = tiny.profile("hello world", generate=3, lens=spec, kl=True).to_json()
        logit = tiny.profile("hello world", generate=3, kl=True).to_json()
    want = cli(
        "profile",
        "--model",
        str(tiny_llama),
        "--prompt",
        "hello world",
        "--generate",
        "3",
        "--lens",
        spec,
        "--kl",
        "--json",
    ).stdout.strip()
    assert got == want
    # The lens changes the numbers: the comparison above is not between two logit lenses.
    assert got != logit


def test_state_does_not_leak_between_calls(lens):
    """Skipped blocks, the lens, the read point and the batch size of one call are gone in the
    next."""
    plain = lens.profile(PROMPTS, generate=3)
    lens.profile(PROMPTS, generate=3, skip=[5], read_point="attention", batch_size=1)
    again = lens.profile(PROMPTS, generate=3)
    assert [p.to_json() for p in plain] == [p.to_json() for p in again]


def test_to_dict_is_the_cli_object(lens, smollm2):
    p = lens.profile("Once upon a time", generate=3)
    want = json.loads(
        cli(
            "profile",
            "--model",
            smollm2,
            "--prompt",
            "Once upon a time",
            "--generate",
            "3",
            "--json",
        ).stdout
    )
    assert p.to_dict() == want
    # The arrays are the object's numbers, in float64.
    np.testing.assert_array_equal(p.shannon, [pos["shannon"] for pos in want["positions"]])
