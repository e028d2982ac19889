"""Mission text on a page: the one place a brief becomes HTML and a title becomes text.

Everything a mission file says (brief, title, summary, star and control labels) is
written by whoever wrote the file, so none of it may execute or inject markup:

    brief_html(markdown) -> HTML   CommonMark (markdown-it-py) with raw HTML off: HTML in
                                   the brief is shown as text; links only to http, https,
                                   mailto or a relative address; images shown as their alt text
    plain(text)          -> text   escaped for HTML text and attribute values

The result is shown with `Html` (panel_shims: a `pn.pane.HTML`), never through Panel's
`sanitize_html` (it needs `nh3`, which has no build for the browser's Pyodide). missions/README.md lists what a
brief may use.
"""

import html
import re
import urllib.parse

from markdown_it import MarkdownIt

__all__ = ["brief_html", "plain", "safe_href", "ALLOWED_SCHEMES", "ALLOWED_TAGS"]

ALLOWED_SCHEMES = ("http", "https", "mailto")
# Every element brief_html can produce (CommonMark without raw HTML and without images).
ALLOWED_TAGS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "code", "pre", "blockquote",
                          "ul", "ol", "li", "a", "br", "hr"})
_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f]+")
_SCHEME = re.compile(r"^([^/?#]*?):")


def plain(text):
    """`text` as HTML text or an attribute value: never markup."""
    return html.escape("" if text is None else str(text), quote=True)


def safe_href(url):
    """True for a link a brief may carry: http(s), mailto, or relative (no other scheme).

    Checked as written and percent-decoded, with whitespace and control characters removed
    the way browsers do, so `java\\tscript:` or `jav%61script:` count as schemes too.
    """
    if not isinstance(url, str):
        return False
    for candidate in (url, urllib.parse.unquote(url)):
        squeezed = _CONTROL.sub("", candidate)
        m = _SCHEME.match(squeezed)
        if m and m.group(1).lower() not in ALLOWED_SCHEMES:
            return False
    return True


def _image_as_text(self, tokens, idx, options, env):
    # Images are not allowed in a brief (a remote image would leave the machine): their alt text stays.
    return plain(self.renderInlineAsText(tokens[idx].children or [], options, env))


def _make_renderer():
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable(["html_block", "html_inline"])  # belt and braces: raw HTML is text either way
    md.validateLink = safe_href
    md.add_render_rule("image", _image_as_text)
    default_link_open = md.renderer.rules.get("link_open")

    def link_open(self, tokens, idx, options, env):
        token = tokens[idx]
        href = token.attrGet("href") or ""
        if re.match(r"^https?:", href, re.I):
            token.attrSet("target", "_blank")
            token.attrSet("rel", "noopener noreferrer")
        if default_link_open is not None:
            return default_link_open(tokens, idx, options, env)
        return self.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


_MD = _make_renderer()


def brief_html(markdown):
    """A brief's Markdown as HTML that cannot run script or load anything (see the module doc)."""
    return _MD.render("" if markdown is None else str(markdown))
