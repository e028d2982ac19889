"""The two-click button (lab/ui/views/confirm_button.py) of the hub's "Reset progress" and
"Clear backups" and the author page's "Load it"."""

import pytest

pytest.importorskip("panel")

from lab.ui.views.confirm_button import confirm_button  # noqa: E402


def test_the_first_click_only_arms_and_the_second_acts_and_disarms():
    done = []
    button = confirm_button("Reset progress", "Click again to forget all stars", lambda: done.append(1),
                            armed_type="danger", button_type="light")
    button.clicks += 1
    assert done == [] and button.label == "Click again to forget all stars" and button.button_type == "danger"
    button.clicks += 1
    assert done == [1] and button.label == "Reset progress" and button.button_type == "light"
    button.clicks += 1  # armed again: a third click never acts
    assert done == [1] and button.label == "Click again to forget all stars"


def test_without_an_armed_type_the_button_keeps_its_own():
    button = confirm_button("Clear backups", "Click again to delete the backups", lambda: None, button_type="light")
    button.clicks += 1
    assert button.button_type == "light" and button.label == "Click again to delete the backups"
