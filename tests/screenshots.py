"""`shot`: keep a screenshot of a page or an element when STF_SCREENSHOTS names a folder.

One helper for every browser test (tests/ is on sys.path). A page is taken whole
(full_page); a locator is taken as the element's box (Locator.screenshot has no full_page).
"""

import os

__all__ = ["shot"]


def shot(target, name):
    folder = os.environ.get("STF_SCREENSHOTS")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    if hasattr(target, "goto"):  # a Page
        target.screenshot(path=path, full_page=True)
    else:
        target.screenshot(path=path)
