"""reeld going away while the page is open (its own reeld: this module ends it): the page says
"reeld down" with reel-web's reason, and Record is disabled; nothing was polled."""


def test_page_says_reeld_down(page_factory, booth, note):
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
