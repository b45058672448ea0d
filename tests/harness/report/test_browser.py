"""The HTML report in a real browser: headless Chromium loads every embedded image, paints a page, shows the
headline in the first 1280x800 screen and never scrolls sideways.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``). Missing Chromium fails under ``CI=true``
and skips elsewhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

_PROBE = """<script>
window.addEventListener('load', function () {
  var out = document.createElement('pre');
  out.id = 'imgcheck';
  out.textContent = Array.prototype.map.call(document.images, function (img) {
    return 'IMG ' + img.id + ' ' + img.complete + ' ' + img.naturalWidth + 'x' + img.naturalHeight;
  }).join('\\n');
  document.body.appendChild(out);
});
</script>"""


#: Where the headline's parts and the document's width are, as the browser lays the page out.
_LAYOUT = """<script>
window.addEventListener('load', function () {
  var rect = function (el) { var r = el.getBoundingClientRect(); return r.top + ' ' + r.bottom; };
  var lines = ['WIDTH ' + document.documentElement.scrollWidth + ' ' + window.innerWidth];
  document.querySelectorAll('#headline li').forEach(function (li) { lines.push('SENTENCE ' + rect(li)); });
  document.querySelectorAll('#headline img').forEach(function (img) { lines.push('CHART ' + rect(img)); });
  var out = document.createElement('pre');
  out.id = 'layout';
  out.textContent = lines.join('\\n');
  document.body.appendChild(out);
});
</script>"""
SCREEN = (1280, 800)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("headless Chromium is required in CI: apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return path


def _run(args: list[str], tmp_path: Path) -> str:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_every_image_loads(report_html: Path, tmp_path: Path) -> None:
    html = report_html.read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = _run(["--virtual-time-budget=10000", "--dump-dom", probe.as_uri()], tmp_path)
    images = re.findall(r"IMG (\S*) (true|false) (\d+)x(\d+)", dom)
    assert len(images) >= 3, dom[-500:]
    for name, complete, width, height in images:
        assert complete == "true" and int(width) > 300 and int(height) > 200, name


def test_screenshot_is_not_blank(report_html: Path, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "report.png"
    _run(
        [
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=10000",
            f"--screenshot={shot}",
            "--window-size=1400,2400",
            report_html.as_uri(),
        ],
        tmp_path,
    )
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape[:2] == (2400, 1400)
    non_white = (pixels < 240).any(axis=2).mean()
    assert non_white > 0.02, f"only {non_white:.3%} of the page is painted"
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # text, plot lines and colours


def test_first_screen_shows_the_headline_without_horizontal_scroll(report_html: Path, tmp_path: Path) -> None:
    from PIL import Image

    probe = tmp_path / "layout.html"
    probe.write_text(report_html.read_text(encoding="utf-8").replace("</body>", _LAYOUT + "</body>"), "utf-8")
    window = f"--window-size={SCREEN[0]},{SCREEN[1]}"
    dom = _run(["--virtual-time-budget=10000", window, "--dump-dom", probe.as_uri()], tmp_path)
    width, viewport = map(int, re.search(r"WIDTH (\d+) (\d+)", dom).groups())  # type: ignore[union-attr]
    assert viewport == SCREEN[0] and width <= viewport, f"document {width} px wide in a {viewport} px window"
    sentences = [tuple(map(float, m)) for m in re.findall(r"SENTENCE ([-\d.]+) ([-\d.]+)", dom)]
    charts = [tuple(map(float, m)) for m in re.findall(r"CHART ([-\d.]+) ([-\d.]+)", dom)]
    assert len(sentences) == 3 and len(charts) == 3  # one per scenario of the synthetic run
    assert all(bottom <= SCREEN[1] for _top, bottom in sentences), sentences
    top, bottom = charts[0]
    assert bottom <= SCREEN[1], f"the first headline chart ends at {bottom} px, below the first screen"

    shot = tmp_path / "first-screen.png"
    _run(["--run-all-compositor-stages-before-draw", "--virtual-time-budget=10000", f"--screenshot={shot}",
          window, report_html.as_uri()], tmp_path)
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape[:2] == (SCREEN[1], SCREEN[0])
    chart = pixels[int(top) : int(bottom)]
    assert (chart < 240).any(axis=2).mean() > 0.02  # the chart is painted there, not an empty box
