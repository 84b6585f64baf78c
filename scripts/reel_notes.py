"""The `note` fixture and the end-of-run section that lists the notes, shared by the e2e and browser
tiers: a conftest imports `note` and calls `summary` from its pytest_terminal_summary."""

import pytest


@pytest.fixture
def note(request):
    """note(text): a line for the end-of-run summary (shown even when tests pass). Kept in the
    test's user_properties, which pytest-xdist carries from its workers to the summary."""
    return lambda text: request.node.user_properties.append(("note", f"{request.node.name}: {text}"))


def summary(terminalreporter, title):
    """Writes every test's notes under `title`."""
    notes = [v for reports in terminalreporter.stats.values() for r in reports
             if getattr(r, "when", None) == "call" for k, v in getattr(r, "user_properties", ()) if k == "note"]
    if notes:
        terminalreporter.section(title)
        for n in notes:
            terminalreporter.write_line(n)
