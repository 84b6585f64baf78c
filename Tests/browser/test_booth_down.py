"""reeld going away while the page is open (its own reeld: this module ends it): the page says
"reeld down" with reel-web's reason and disables Record; when a reeld listens on the socket
again, the same page comes back (status and preview) by itself. Nothing is polled by the test."""

from reel_harness import Reeld


def test_page_says_reeld_down_then_comes_back(page_factory, booth, bin_dir, note):
    r, _ = booth
    p = page_factory()
    assert p.js("return document.getElementById('live').dataset.state") == "standby"
    r.terminate()
    v = p.until("document.getElementById('live').dataset.state === 'down' && "
                "[document.getElementById('live').textContent, document.getElementById('state').textContent]",
                what="'reeld down'")
    note(f"after reeld ended the page says: {v[1]!r}")
    assert v[0] == "reeld down" and v[1].startswith("reeld down: ") and len(v[1]) > len("reeld down: ") + 5, v
    assert p.js("return document.getElementById('record').disabled")

    frames = p.js("return window.reel.preview.frames")
    again = Reeld(bin_dir, {"standby": True, "socket": r.socket}, "again", socket_arg=False)
    try:
        p.until("document.getElementById('live').dataset.state === 'standby' && "
                "!document.getElementById('record').disabled", timeout=20, what="Standby again")
        p.until(f"window.reel.preview.frames > {frames}", timeout=20, what="preview frames again")
    finally:
        again.terminate(timeout=10)
        print(again.log_tail())
        again.close()
