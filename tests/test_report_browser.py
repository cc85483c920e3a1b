"""The HTML report in a real browser: no horizontal overflow at 1400 px or at 420 px.

Uses Debian's headless Chromium (``apt-get install -y chromium``), driven over the DevTools
protocol on a pipe (``--remote-debugging-pipe``): the viewport is set with
``Emulation.setDeviceMetricsOverride`` (a headless window cannot be narrower than 500 px),
the page is loaded, and its widths are read with ``Runtime.evaluate`` (DevTools is not
bound by the report's Content-Security-Policy, so the report stays script-free). Skipped,
saying so, where no Chromium is installed.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from crashlab.report import render_inputs

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and Path(p).is_file()), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install -y chromium): "
                                                         "the 420 px / 1400 px overflow check needs a real browser")
MEASURE = """(() => {
  const w = document.documentElement.clientWidth;
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.scroll')) continue;          // wide tables scroll inside their own box
    const r = el.getBoundingClientRect();
    const spills = el.clientWidth && el.scrollWidth > el.clientWidth + 1
                   && getComputedStyle(el).overflowX === 'visible';
    if ((r.width && r.right > w + 1) || spills)
      bad.push(el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') + ' ' + Math.round(r.right)
               + '/' + el.scrollWidth);
  }
  return {client: w, scroll: document.documentElement.scrollWidth, bad: bad.slice(0, 8),
          scripts: document.scripts.length};
})()"""


class Browser:
    """A headless Chromium spoken to over the DevTools protocol on a pipe (fd 3 in, fd 4 out)."""

    def __init__(self, profile: Path) -> None:
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        os.set_inheritable(to_child_r, True)
        os.set_inheritable(from_child_w, True)

        def fds():          # in the child: the pipe ends become fd 3 and fd 4 (via high numbers: no clash)
            os.dup2(to_child_r, 200)
            os.dup2(from_child_w, 201)
            os.dup2(200, 3)
            os.dup2(201, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--hide-scrollbars", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4, to_child_r, from_child_w), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)

    def send(self, method: str, session: bool, **params) -> int:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def read(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_child], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self.from_child, 1 << 16)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: bool = False, **params) -> dict:
        wanted = self.send(method, session, **params)
        while True:
            msg = self.read()
            if msg.get("id") == wanted:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def measure(self, page: Path, width: int) -> dict:
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=900,
                  deviceScaleFactor=1, mobile=False)
        self.send("Page.navigate", True, url=page.as_uri())
        while self.read().get("method") != "Page.loadEventFired":
            pass
        got = self.call("Runtime.evaluate", session=True, expression=MEASURE, returnByValue=True)
        return got["result"]["value"]

    def close(self) -> None:
        try:
            self.send("Browser.close", False)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_child)
        os.close(self.from_child)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser")
    traces = sorted((ROOT / "reports" / "exhibit-blind-retry" / "traces").glob("*.jsonl")) + [
        ROOT / "traces" / "combined-cancellation-under-pressure.jsonl", ROOT / "traces" / "t6-duplicate-input-event.jsonl"]
    return render_inputs(traces, out / "report"), out


def test_the_probe_catches_a_page_wider_than_the_window(browser, tmp_path):
    page = tmp_path / "wide.html"
    page.write_text("<!doctype html><html><head><meta name='viewport' content='width=device-width'></head><body>"
                    "<pre>" + "x" * 400 + "</pre></body></html>", encoding="utf-8")
    got = browser.measure(page, 420)
    assert got["client"] == 420 and got["scroll"] > 420 and got["bad"]


@pytest.mark.parametrize("width", [1400, 420])
def test_report_pages_do_not_overflow_horizontally(browser, report, width):
    index, _ = report
    pages = [index] + sorted((index.parent / "scenarios").glob("*.html"))
    assert len(pages) == 5
    for page in pages:
        got = browser.measure(page, width)
        assert got["client"] == width and got["scripts"] == 0, got     # the viewport really was this wide
        assert got["scroll"] <= got["client"] and not got["bad"], (page.name, got)


ANCHOR = """(() => {
  const el = document.getElementById(location.hash.slice(1));
  if (!el) return {found: false};
  const d = el.closest('details');
  return {found: true, open: d ? d.open : true, top: Math.round(el.getBoundingClientRect().top),
          height: window.innerHeight};
})()"""


def test_cited_evidence_is_one_click_away(browser, report):
    """An evidence link of a violation lands on its event's row, in the folded event table
    (the browser opens the details it is in)."""
    import re

    index, _ = report
    page = index.parent / "scenarios" / "t2-commit-before-record.html"
    target = re.search(r'href="#(e-\d+)"', page.read_text(encoding="utf-8"))[1]
    browser.call("Emulation.setDeviceMetricsOverride", session=True, width=1400, height=900,
                 deviceScaleFactor=1, mobile=False)
    browser.send("Page.navigate", True, url=page.as_uri() + "#" + target)
    while browser.read().get("method") != "Page.loadEventFired":
        pass
    got = browser.call("Runtime.evaluate", session=True, expression=ANCHOR, returnByValue=True)["result"]["value"]
    assert got["found"] and got["open"] and 0 <= got["top"] < got["height"], got
