"""Issue 21's must-show on one machine: SqueezeNet (a light ONNX CNN) split over two
hosts by stage mode, run part by part with ``LocalHosts`` (the same workers and
schedule as on Ray, no Ray).

* the outputs equal the single-host run of the same executable (and ONNX Runtime's,
  where it is installed); the model gets seeded random weights, since with the
  shipped all-equal weights its softmax is uniform for any input;
* the bytes hostB's worker receives (counted by the runtime) equal the planner's
  boundary bytes and an independent count of the bytes live across that cut point
  of the program's linear order (``cut_bytes``, read off the IR the planner saw);
* on a slow network the planner's cut is the minimum over every contiguous cut
  (brute force); on the default 10 Gbit/s link compute dominates and the cut
  balances the stages instead.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

import hetvm  # noqa: E402
from hetvm.distributed import LocalHosts, schedule_of  # noqa: E402
from hetvm.distributed.worker import as_numpy_tree  # noqa: E402
from hetvm.testing.light_models import load_light, with_random_weights  # noqa: E402
from hetvm.testing.multi_host import SLOW_LINK, build_stages, light_cnn  # noqa: E402


@pytest.fixture(scope="module")
def squeezenet():
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    return light_cnn("squeezenet", seed=0), x


def _onnxruntime(x: np.ndarray) -> np.ndarray | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    model = with_random_weights(load_light("squeezenet"), seed=0)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("links", [SLOW_LINK, None], ids=["slow_link", "default_link"])
def test_squeezenet_over_two_hosts_matches_one_host_and_sends_the_cut(squeezenet, links):
    mod, x = squeezenet
    exe, stages, cuts = build_stages(mod, links)
    assert len(cuts) == stages["ops"] - 1  # the planner's op order is the program's
    (boundary,) = stages["boundary_bytes"]
    second = stages["first_last"][1][0]  # the first op of hostB's stage
    assert dict(cuts)[second] == boundary > 0
    schedule = schedule_of(exe)
    assert [p.host for p in schedule.parts] == ["hostA", "hostB"]
    assert schedule.transfer_bytes == boundary

    hosts = LocalHosts(exe)
    got = hosts(x)
    single = as_numpy_tree(hetvm.VirtualMachine(exe)["main"](x))
    np.testing.assert_allclose(got, single, rtol=1e-6, atol=0)
    assert np.ptp(got) > 1e-3  # a real class distribution, not a uniform one
    want = _onnxruntime(x)
    if want is not None:
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-6)
    received = {h: s["received_bytes"] for h, s in hosts.stats().items()}
    assert received == {"hostA": 0, "hostB": boundary}  # measured by the workers
    report = hetvm.explain(exe)  # the build's own transfers: one row per value sent
    assert [(t["value"], t["bytes"]) for t in report.transfers] == [(t["value"], t["bytes"]) for t in schedule.transfers]
    assert report.transfer_bytes == boundary and report.stages == stages

    if links is SLOW_LINK:  # the fewest bytes over all contiguous cuts
        assert boundary == min(b for _, b in cuts)
    else:  # compute-bound: both stages hold a real share of the model
        (a0, b0), (a1, b1) = stages["ranges"]
        assert min(b0 - a0, b1 - a1) + 1 >= stages["ops"] // 4
        assert boundary > min(b for _, b in cuts)


def test_several_requests_keep_no_state_between_them(squeezenet):
    mod, _ = squeezenet
    exe, _, _ = build_stages(mod, None)
    hosts = LocalHosts(exe)
    rng = np.random.default_rng(3)
    vm = hetvm.VirtualMachine(exe)
    for _ in range(2):
        x = rng.standard_normal((1, 3, 224, 224)).astype("float32")
        np.testing.assert_allclose(hosts(x), as_numpy_tree(vm["main"](x)), rtol=1e-6, atol=0)
    assert all(s["requests_held"] == 0 for s in hosts.stats().values())
