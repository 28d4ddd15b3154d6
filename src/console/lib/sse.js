// Server-sent events from a fetch() response body (EventSource cannot send an Authorization header
// or a POST body). Parses the text/event-stream format: lines end in CRLF, LF or CR; a blank line ends
// an event; `data:` lines are joined with "\n"; lines starting with ":" are comments.

/** Yields {event, data, id} for each event of the body, and {comment} for each comment line. */
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let event = "";
  let id;
  let pendingCr = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let text = value;
      // A CR at the end of the previous chunk may be half of a CRLF.
      if (pendingCr && text.startsWith("\n")) text = text.slice(1);
      pendingCr = text.endsWith("\r");
      buffer += text;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n"), id };
          data = [];
          event = "";
          continue;
        }
        if (line.startsWith(":")) {
          yield { comment: line.slice(1).trimStart() };
          continue;
        }
        const colon = line.indexOf(":");
        const name = colon === -1 ? line : line.slice(0, colon);
        let val = colon === -1 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (name === "data") data.push(val);
        else if (name === "event") event = val;
        else if (name === "id" && !val.includes("\0")) id = val;
      }
    }
  } finally {
    reader.releaseLock();
  }
  // An event not followed by a blank line is incomplete and dropped (as EventSource does).
}
