"""Screenshot of the plan viewer (``hetvm plan --html``) with one block hovered.

    python tools/plan_viewer_screenshot.py [-o docs/images/squeezenet_plan_viewer.png]

Writes the page for SqueezeNet (the onnx package's light model) on sim:0 + cpu
with softmax missing on sim:0, opens it in headless Chromium
(hetvm.testing.browser), moves the pointer over the largest tensor of the
sim:0 arena and saves the viewport.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile


def main() -> int:
    import onnx

    from hetvm.cli import main as hetvm_main
    from hetvm.testing.browser import Browser

    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.path.join(light, "light_squeezenet.onnx"))
    parser.add_argument("-o", "--output", default="docs/images/squeezenet_plan_viewer.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1720)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "plan.html")
        code = hetvm_main(["plan", args.model, "--devices", "sim:0,cpu", "--missing-kernel", "sim:0=nn.softmax",
                           "--html", page, "--plain"])  # fmt: skip
        if code:
            return code
        with Browser(width=args.width, height=args.height) as b:
            b.open("file://" + page)
            b.eval("window.scrollTo(0, 0)")
            rect = b.eval("""(function(){var best=null,area=0;
                document.querySelectorAll('section[data-device="sim:0"] .block').forEach(function(el){
                  var r=el.getBoundingClientRect();if(r.width*r.height>area){area=r.width*r.height;best=el;}});
                var r=best.getBoundingClientRect();return [r.left+r.width/2,r.top+r.height/2];})()""")
            b.hover(rect[0], rect[1])
            with open(args.output, "wb") as f:
                f.write(b.screenshot())
    print(f"screenshot written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
