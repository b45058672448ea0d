"""The HTML report in a real browser: headless Chromium loads every embedded image and paints a page.

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
