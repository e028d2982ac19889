"""The author page (`/author`, author.html): write, check and share a mission in the browser.

draft.py holds the draft and its checks (no Panel); author_page.py lays out the page."""
