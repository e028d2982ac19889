"""A button that asks for a second click before it does what cannot be undone (forget the
stars, delete their backups, replace a draft)."""

import panel as pn

__all__ = ["confirm_button"]


def confirm_button(label, armed_label, action, armed_type=None, **params):
    """A Button labelled `label`. Its first click only relabels it `armed_label` (with
    `armed_type`, e.g. "danger", if given); the second calls `action()` and puts it back."""
    button = pn.widgets.Button(label=label, **params)
    resting_type = button.button_type
    armed = [False]

    def on_click(_event):
        armed[0] = not armed[0]
        button.label = armed_label if armed[0] else label
        button.button_type = (armed_type or resting_type) if armed[0] else resting_type
        if not armed[0]:
            action()

    button.on_click(on_click)
    return button
