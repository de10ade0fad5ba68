"""``hetvm plan --html``: the page's content, and the page in a real headless browser.

The browser test drives Debian's Chromium over the DevTools protocol
(hetvm.testing.browser): it moves the real mouse pointer over an arena block and
checks that the tooltip appears, names that block, and changes the pixels there.
It skips where no chromium is installed.
"""

from __future__ import annotations

import glob
import os
import re
import struct
from html.parser import HTMLParser

import pytest

from hetvm.cli import main

onnx = pytest.importorskip("onnx")

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _page(path) -> tuple[str, _Elements]:
    text = open(path, encoding="utf-8").read()
    parsed = _Elements()
    parsed.feed(text)
    return text, parsed


def test_two_device_page_is_self_contained_and_every_block_explains_itself(capsys, demo_onnx, tmp_path):
    out = tmp_path / "plan.html"
    code = main(["plan", demo_onnx, "--devices", "sim:0,cpu", "--missing-kernel", "sim:0=nn.softmax",
                 "--html", str(out), "--plain"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    text, page = _page(out)
    # nothing fetched: no external script, stylesheet, image or font
    assert not re.search(r"https?://", text)
    assert not [a for t, a in page.tags if t in ("script", "img", "link", "iframe") and ("src" in a or "href" in a)]
    blocks = [a for t, a in page.tags if "block" in a.get("class", "").split()]
    tips = [a["data-tip"] for a in blocks]
    assert len(blocks) >= 6
    for tip in tips:
        for key in ("tensor: ", "op: ", "node: ", "bytes: ", "lifetime: "):
            assert key in tip, tip
    # the model's names, not the IR's: the Gemm's result is 'logits', the output 'probs'
    assert any("tensor: logits\n" in t and "node: fc (Gemm)" in t for t in tips)
    (probs,) = [t for t in tips if "tensor: probs\n" in t]
    assert "outside the plan: returned" in probs
    body = " ".join(page.text)
    assert "outside the plan on cpu:0: 1 tensor" in body
    # the copy on the shared time axis, with the planner's reason
    copies = [a["data-tip"] for t, a in page.tags if t == "circle" and "copy" in a.get("class", "")]
    assert len(copies) == 1 and "copy logits" in copies[0] and "sim:0 -> cpu:0" in copies[0]
    assert "without a kernel for 'nn.softmax'" in copies[0]
    assert "sim:0" in body and "cpu:0" in body and "kernel calls" in body


def test_one_device_page_has_no_copies(capsys, demo_onnx, tmp_path):
    out = tmp_path / "plan.html"
    assert main(["plan", demo_onnx, "--html", str(out), "--plain"]) == 0
    text, page = _page(out)
    assert "No copies between devices." in text
    assert not [a for t, a in page.tags if t == "circle" and "copy" in a.get("class", "")]
    assert [a for t, a in page.tags if "block" in a.get("class", "").split()]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.skipif(not glob.glob(os.path.join(LIGHT_DIR, "light_squeezenet.onnx")), reason="no light models")
def test_viewer_in_a_headless_browser_shows_a_block_on_hover(capsys, tmp_path):
    from hetvm.testing.browser import Browser, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    out = tmp_path / "plan.html"
    model = os.path.join(LIGHT_DIR, "light_squeezenet.onnx")
    code = main(["plan", model, "--devices", "sim:0,cpu", "--missing-kernel", "sim:0=nn.softmax",
                 "--html", str(out), "--plain"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    with Browser(width=1280, height=900) as b:
        b.open(out.as_uri())
        assert b.eval("document.querySelectorAll('section').length") == 2
        count = b.eval("document.querySelectorAll('.block').length")
        assert count >= 20  # SqueezeNet's arena holds 22 tensors
        assert b.eval("document.querySelectorAll('circle.copy').length") == 1  # sim:0 -> cpu:0 before softmax
        # the largest block of the sim:0 arena, scrolled into view
        rect = b.eval("""(function(){var best=null,area=0;
            document.querySelectorAll('section[data-device="sim:0"] .block').forEach(function(el){
              var r=el.getBoundingClientRect();if(r.width*r.height>area){area=r.width*r.height;best=el;}});
            best.scrollIntoView({block:'center'});var r=best.getBoundingClientRect();
            return {id:best.id,x:r.left+r.width/2,y:r.top+r.height/2,tip:best.getAttribute('data-tip')};})()""")
        assert b.eval("getComputedStyle(document.getElementById('tip')).display") == "none"
        # the tooltip opens below and right of the pointer; a clip is in page coordinates
        sx, sy = b.eval("[window.scrollX, window.scrollY]")
        clip = {"x": rect["x"] + sx + 20, "y": rect["y"] + sy + 20, "width": 200, "height": 60}
        before = b.screenshot(clip)
        b.hover(rect["x"], rect["y"])
        tip = b.eval("""(function(){var t=document.getElementById('tip');
            return {shown:getComputedStyle(t).display,text:t.textContent,for:t.getAttribute('data-for')};})()""")
        assert tip["shown"] == "block" and tip["for"] == rect["id"]
        assert tip["text"] == rect["tip"] and "tensor: " in tip["text"] and "lifetime: " in tip["text"]
        after = b.screenshot(clip)
        assert _png_size(after) == (200, 60)
        assert after != before  # the tooltip is drawn where the pointer is
        full = b.screenshot()
        assert _png_size(full) == (1280, 900) and len(full) > 20_000
