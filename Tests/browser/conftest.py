"""The browser tier (issue 24): Debian's headless Chromium, driven by Selenium through Debian's
chromedriver (chromium-driver, python3-selenium), against the real reeld (test sources, standby)
and the real reel-web, signed in with a password file made by `reel-web hash-password`.

REEL_BIN_DIR must hold reeld, reelctl and reel-web (`make browser` builds them); without it the
tier skips like the e2e tier. A missing reel-web, chromedriver or feature fails.

Waits are for page events: `Page.until(js)` resolves inside the page on the DOM mutation that
makes `js` true (a MutationObserver), not by polling from here."""

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for p in (HERE, os.path.join(REPO, "scripts")):
    if p not in sys.path:
        sys.path.insert(0, p)
E2E = os.path.join(REPO, "Tests", "e2e")   # web_harness.py; after this tier's own modules
if E2E not in sys.path:
    sys.path.append(E2E)

from reel_notes import note, summary  # noqa: E402,F401  (note: the fixture)
from reel_harness import Reeld  # noqa: E402  (scripts/ is on sys.path above)

PASSWORD = "booth test password"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT = 15.0   # page waits; Chromium on two loaded cores is slow to start, not to react


@pytest.fixture(scope="session")
def bin_dir():
    d = os.environ.get("REEL_BIN_DIR")
    if not d:
        pytest.skip("REEL_BIN_DIR is unset: set it to the directory holding reeld, reelctl and reel-web")
    missing = [b for b in ("reeld", "reelctl", "reel-web") if not os.access(os.path.join(d, b), os.X_OK)]
    assert not missing, f"REEL_BIN_DIR={d} lacks executable {', '.join(missing)} (swift build -c release --product reel-web)"
    return d


def start_web(bin_dir, reeld):
    """The real reel-web in front of `reeld` (Tests/e2e/web_harness.py: a free loopback port, a
    password file from `reel-web hash-password`), serving the page from this tree's
    Sources/ReelWeb/Web (--web-root), so an edited page needs no rebuild."""
    from web_harness import Web
    return Web(bin_dir, reeld.socket, reeld.out_dir, reeld.dir, password=PASSWORD,
               extra=("--web-root", os.path.join(REPO, "Sources", "ReelWeb", "Web")))


# JavaScript helpers the tests install in a page.
UNTIL_JS = """
const [expr, timeoutMs, done] = arguments;
const f = new Function("return (" + expr + ");");
const check = () => { try { return f(); } catch (e) { return undefined; } };
let v = check();
if (v) { done({ok: true, value: v, wall: Date.now()}); return; }
// checked at each DOM mutation, and at each load or error (an image's frame changes no DOM)
const recheck = () => {
  const v = check();
  if (v) { stop(); done({ok: true, value: v, wall: Date.now()}); }
};
const obs = new MutationObserver(recheck);
const stop = () => { obs.disconnect(); clearTimeout(timer); document.removeEventListener("load", recheck, true); document.removeEventListener("error", recheck, true); };
obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
document.addEventListener("load", recheck, true);
document.addEventListener("error", recheck, true);
const timer = setTimeout(() => { stop(); done({ok: false, value: check(), wall: Date.now()}); }, timeoutMs);
"""


# Reads the test source's timecode strip (docs: /work/shared/test-sources.md) from an <img> as it
# is shown: the top H/8 rows, 32 cells, white = 1, most significant bit first. Returns the
# source time in ms of the frame drawn, or null before the first frame.
STRIP_JS = """
window.readStrip = function (img) {
  const w = img.naturalWidth, h = img.naturalHeight;
  if (!w || !h) return null;
  const c = window.__stripCanvas || (window.__stripCanvas = document.createElement("canvas"));
  if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
  const g = c.getContext("2d", {willReadFrequently: true});
  try { g.drawImage(img, 0, 0); } catch (e) { return null; }   // between frames (a broken or pending image)
  const d = g.getImageData(0, Math.floor(h / 16), w, 1).data;
  let ms = 0;
  for (let i = 0; i < 32; i++) {
    const o = Math.floor((i + 0.5) * w / 32) * 4;
    ms = ms * 2 + (0.299 * d[o] + 0.587 * d[o + 1] + 0.114 * d[o + 2] > 125 ? 1 : 0);
  }
  return ms;
};
"""


class Page:
    """One headless Chromium (its own chromedriver and profile) on reel-web."""

    def __init__(self, base):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--autoplay-policy=no-user-gesture-required", "--window-size=1280,900",
                  "--disable-dev-shm-usage", "--mute-audio"):
            opts.add_argument(a)
        if os.geteuid() == 0:
            opts.add_argument("--no-sandbox")
        self.base = base
        self.driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
        self.driver.set_script_timeout(WAIT + 10)

    def get(self, path):
        self.driver.get(self.base + path)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def until(self, expr, timeout=WAIT, what=None):
        """Waits in the page for the JavaScript expression to be truthy (checked at each DOM
        mutation); returns its value. Fails with `what` and the last value on timeout."""
        r = self.driver.execute_async_script(UNTIL_JS, expr, int(timeout * 1000))
        assert r["ok"], f"page: no {what or expr} within {timeout} s (last value {r['value']!r}; URL {self.driver.current_url})"
        return r["value"]

    def wait_path(self, path, timeout=WAIT):
        """Waits for the browser to be on `path` (a navigation ends the page's scripts, so this
        one wait asks the driver, every 50 ms)."""
        from selenium.webdriver.support.ui import WebDriverWait
        WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(
            lambda d: self.path() == path, message=f"not on {path} within {timeout} s")

    def path(self):
        from urllib.parse import urlparse
        return urlparse(self.driver.current_url).path

    def sign_in(self, password=PASSWORD):
        from selenium.webdriver.common.by import By
        self.get("/")
        field = self.driver.find_element(By.ID, "password")
        field.clear()
        field.send_keys(password)
        self.button("Sign in").click()

    def button(self, name):
        """The one <button> whose accessible name is `name` (Chromium's computed name)."""
        from selenium.webdriver.common.by import By
        found = [b for b in self.driver.find_elements(By.TAG_NAME, "button") if b.accessible_name == name]
        assert len(found) == 1, f"{len(found)} buttons named {name!r}: {[b.accessible_name for b in self.driver.find_elements(By.TAG_NAME, 'button')]}"
        return found[0]

    def close(self):
        try:
            logs = self.driver.get_log("browser")
            for entry in logs:
                print("browser:", entry.get("level"), entry.get("message"))
        except Exception as e:  # a driver that died already has no log to give
            print("browser log unavailable:", e)
        self.driver.quit()


@pytest.fixture(scope="module")
def booth(bin_dir, request):
    """A reeld (test sources at 640x360 30 fps, standby) and a reel-web in front of it. Module
    parameters: `BOOTH_OPTIONS` in the test module, extra reeld options."""
    opts = dict(standby=True)
    opts.update(getattr(request.module, "BOOTH_OPTIONS", {}))
    r = Reeld(bin_dir, opts, request.module.__name__)
    web = None
    try:
        web = start_web(bin_dir, r)
        yield r, web
    finally:
        if web:
            web.stop()
            print("---- reel-web log ----\n" + web.log_text())
        try:
            r.terminate(timeout=10)
        except AssertionError as e:
            print(e)
        print(r.log_tail())
        r.close(keep=bool(os.environ.get("REEL_KEEP")))


@pytest.fixture
def page_factory(booth):
    pages = []

    def make(signed_in=True):
        p = Page(booth[1].origin)
        pages.append(p)
        if signed_in:
            p.sign_in()
            p.wait_path("/")
            p.until("document.getElementById('record') && window.reel && window.reel.statuses > 0", what="the booth with a status")
        return p

    yield make
    for p in pages:
        p.close()



def pytest_terminal_summary(terminalreporter, exitstatus, config):
    summary(terminalreporter, "reel browser measurements")
