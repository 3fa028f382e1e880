"""The generate page keeps saying how this session's last draw ended until its next request: a
cancelled draw says so on every rerun, never showing instead the newest draw another tab made (it
once said it on the one rerun after the draw ended; under load the browser test saw the other
tab's rows in its place)."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from test_draw_jobs import APP, RUN_S, long_draw_started, rerun_until_drawn, texts
from test_draw_jobs import trained, trained_once  # noqa: F401  (the fixtures)


def test_a_cancelled_draw_is_said_on_every_rerun_not_another_tabs_rows(trained):
    at = long_draw_started()
    mine = at.session_state["sampling"]
    try:
        other = AppTest.from_file(APP, default_timeout=RUN_S).run()  # another tab, drawing after
        other.switch_page("app_pages/generate.py").run()
        other.number_input(key="rows").set_value(60)
        other.button(key="generate").click().run()
        rerun_until_drawn(other)
        assert "60 synthetic rows" in texts(other.success)
        at.button(key=f"cancel_draw_{mine.draw.id}").click().run()
    finally:
        mine.cancel()
    rerun_until_drawn(at)
    for rerun in (False, True):  # the rerun on which it ended, and a later one (a setting changed)
        if rerun:
            at.number_input(key="rows").set_value(500).run()
        assert not at.exception, [e.value for e in at.exception]
        assert "Cancelled: no rows were written" in texts(at.warning), texts(at.warning)
        assert not at.success and not at.get("download_button"), texts(at.success)
