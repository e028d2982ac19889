"""The sandbox's trace upload: a CSV file from the student's machine, replayed as the workload.

A small `JSComponent` rather than `pn.widgets.FileInput`: FileInput reads any file the
student picks and sends it base64-encoded in one websocket message, so under `lab serve`
a file past Bokeh's 20 MiB message limit would drop the whole session before Python
could refuse it. This one reads the file in the page and sends it as text in one message
only when both fit: the file (MAX_UPLOAD_BYTES) and the message as it travels
(MAX_SENT_BYTES): JSON text, where every quote, backslash and line break takes two
characters, so a fully quoted CSV with CRLF line ends is about 1.6 times its file. Anything
else is refused with a note and the workload stays. Python gets `on_file(text, name)` or
`on_refused(why)`; parsing and validation are the state's (LabState.load_trace_text).
Works over the server's websocket and in Pyodide's web worker alike (the same bounds in
both, though the worker's messages have no such limit).
"""

import json

import param
from panel.custom import JSComponent

__all__ = ["TraceUpload", "MAX_UPLOAD_BYTES", "MAX_SENT_BYTES", "ACCEPT", "sent_bytes"]

MAX_UPLOAD_BYTES = 16_000_000  # the file, as picked
# The message that carries it, as UTF-8 JSON: under Bokeh's 20 MiB (20,971,520-byte) websocket
# message limit with room for Bokeh's envelope around it (a few hundred bytes).
MAX_SENT_BYTES = 20_000_000
ACCEPT = ".csv,text/csv,.jsonl,application/jsonl,application/x-ndjson"  # CSV or Mooncake JSON lines

_ESM = r"""
const MAX = %(max)d;
const MAX_SENT = %(max_sent)d;
const mb = (bytes) => (bytes / 1e6).toFixed(1);

export function render({ model }) {
  const wrap = document.createElement("label");
  wrap.className = "stf-upload";
  const text = document.createElement("span");
  text.textContent = "Replay a trace (CSV): ";
  const input = document.createElement("input");
  input.type = "file";
  input.accept = %(accept)s;
  input.setAttribute("aria-label", "Upload a trace CSV to replay");
  input.addEventListener("change", async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    const name = String(file.name || "trace.csv").slice(0, 200);
    if (file.size > MAX) {
      model.send_msg({type: "refused", name, why: `${name} is ${mb(file.size)} MB; the limit is ${MAX / 1e6} MB`});
    } else {
      let msg = null;
      try {
        msg = {type: "file", name, text: await file.text()};
      } catch (e) {
        model.send_msg({type: "refused", name, why: `${name} could not be read in the browser`});
      }
      // Measured as it travels: one message over the transport's limit would close the page's connection.
      const sent = msg === null ? 0 : new TextEncoder().encode(JSON.stringify(msg)).length;
      if (sent > MAX_SENT) {
        model.send_msg({type: "refused", name, why: `${name} is ${mb(file.size)} MB, but ${mb(sent)} MB as the page ` +
          `sends it (each quote, backslash and line-break character takes two); the limit is ${MAX_SENT / 1e6} MB: ` +
          `save it without quotes or with fewer rows`});
      } else if (msg !== null) {
        model.send_msg(msg);
      }
    }
    input.value = "";  // picking the same file again replays it again
  });
  wrap.append(text, input);
  return wrap;
}
""" % {"max": MAX_UPLOAD_BYTES, "max_sent": MAX_SENT_BYTES, "accept": json.dumps(ACCEPT)}

_CSS = """
.stf-upload { display: flex; flex-wrap: wrap; align-items: center; gap: 4px 6px; font-size: 13px; color: #1d2430; }
.stf-upload input { font-size: 12px; max-width: 100%; }
.stf-upload input:focus-visible { outline: 3px solid #0072B2; outline-offset: 2px; }
"""


def sent_bytes(name, text):
    """The bytes of the page's message carrying `text`, as the page measures it (UTF-8 JSON)."""
    message = json.dumps({"type": "file", "name": name, "text": text}, ensure_ascii=False, separators=(",", ":"))
    return len(message.encode("utf-8", "surrogatepass"))


class TraceUpload(JSComponent):
    """A file picker for a trace CSV; hands its text to `on_file(text, name)`."""

    received = param.Integer(default=0, doc="How many files arrived (for views and tests).")

    _esm = _ESM
    _rename = {"received": None}

    def __init__(self, on_file=None, on_refused=None, **params):
        params.setdefault("sizing_mode", "stretch_width")
        params.setdefault("stylesheets", [_CSS])
        super().__init__(**params)
        self._on_file = on_file
        self._on_refused = on_refused

    def _handle_msg(self, data):
        if not isinstance(data, dict):
            return
        name = str(data.get("name") or "trace.csv")[:200]
        if data.get("type") == "file" and isinstance(data.get("text"), str):
            text = data["text"]
            if len(text.encode("utf-8", "surrogatepass")) > MAX_UPLOAD_BYTES:  # the page checks too; trust nothing
                self._refuse(f"{name} is larger than the limit of {MAX_UPLOAD_BYTES / 1e6:g} MB")
                return
            if sent_bytes(name, text) > MAX_SENT_BYTES:
                self._refuse(f"{name} is larger than the limit of {MAX_SENT_BYTES / 1e6:g} MB as the page sends it")
                return
            self.received += 1
            if self._on_file is not None:
                self._on_file(text, name)
        elif data.get("type") == "refused":
            self._refuse(str(data.get("why") or f"{name} was refused")[:300])

    def _refuse(self, why):
        if self._on_refused is not None:
            self._on_refused(why)
