"""Bad input from Python raises a clear exception, and the interpreter lives on."""

import _thread
import signal
import threading
import time

import pytest

import entropy_lens as el


def test_a_missing_model_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        el.Profiler.load(str(tmp_path / "nope.gguf"))


def test_a_corrupt_gguf(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    with pytest.raises(ValueError, match="GGUF"):
        el.Profiler.load(str(bad))


def test_a_lens_made_for_another_model(lens, tiny_llama):
    with pytest.raises(ValueError, match="(?i)lens"):
        lens.profile("x", lens=f"tuned:{tiny_llama / 'lens'}")
    with pytest.raises(ValueError, match="unknown lens"):
        lens.profile("x", lens="magic")


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(alphas=[float("nan")]), ValueError, "Rényi order"),
        (dict(alphas=[-1]), ValueError, "Rényi order"),
        (dict(alphas=["two"]), ValueError, "Rényi order"),
        (dict(top_p=0.0), ValueError, "top-p"),
        (dict(top_p=1.5), ValueError, "top-p"),
        (dict(generate=-1), ValueError, "generate"),
        (dict(generate=2.5), TypeError, "generate"),
        (dict(generate=10**7), ValueError, "context"),
        (dict(temperature=float("nan")), ValueError, "temperature"),
        (dict(skip=[0]), ValueError, "skip"),
        (dict(skip=[31]), ValueError, "block 31"),
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(read_point="middle"), ValueError, "read"),
        (dict(target="last"), ValueError, "target"),
        (dict(seed=-3), ValueError, "seed"),
        (dict(chat="yes"), TypeError, "chat"),
    ],
)
def test_bad_options(lens, kwargs, error, words):
    with pytest.raises(error, match=words):
        lens.profile("The sea is", **kwargs)


@pytest.mark.parametrize("prompts", [42, None, [1, 2], ["ok", b"bytes"], b"bytes", []])
def test_prompts_that_are_not_strings(lens, prompts):
    with pytest.raises((TypeError, ValueError), match="prompt"):
        lens.profile(prompts)


def test_a_closed_profiler(smollm2):
    p = el.Profiler.load(smollm2)
    p.close()
    assert p.closed
    with pytest.raises(ValueError, match="closed"):
        p.profile("x")
    with pytest.raises(TypeError):
        el.Profiler("not a native profiler")


def test_the_interpreter_survives_and_still_works(lens):
    for _ in range(3):
        with pytest.raises(ValueError):
            lens.profile("x", alphas=[float("nan")])
    assert lens.profile("The sea is").shannon.shape == (1, 30)


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test's duration. A process started in the background by
    a non-interactive shell (`cmd &`, as CI runners and `nohup` do) inherits SIGINT ignored, and
    then `_thread.interrupt_main` does nothing; at a terminal the handler is always this one."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_a_long_generation_within_a_second(lens, ctrl_c_raises):
    """KeyboardInterrupt (as Ctrl-C raises it) ends a 2,000-token generation early."""
    timer = threading.Timer(1.0, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        lens.profile("Once upon a time", generate=2000, ignore_eos=True)
    waited = time.monotonic() - start
    timer.cancel()
    # 1 s until the interrupt, then at most about a second to stop (2,000 tokens take minutes).
    assert waited < 2.5, waited
    # The profiler is usable afterwards, with the same numbers as before.
    a = lens.profile("The sea is", generate=2)
    b = lens.profile("The sea is", generate=2)
    assert a.to_json() == b.to_json()


def test_two_threads_at_once_equal_one_after_the_other(smollm2):
    prompts = ["The sea is", "Once upon a time there was", "Paris is the capital of"]
    with el.Profiler.load(smollm2) as a, el.Profiler.load(smollm2) as b:
        sequential = [p.to_json() for p in a.profile(prompts, generate=4)]
        results = {}

        def work(name, profiler):
            results[name] = [p.to_json() for p in profiler.profile(prompts, generate=4)]

        # Two objects, and two threads sharing one object.
        threads = [
            threading.Thread(target=work, args=(n, pr)) for n, pr in [("a", a), ("b", b), ("a2", a)]
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results["a"] == sequential
    assert results["b"] == sequential
    assert results["a2"] == sequential
