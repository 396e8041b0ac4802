// Chapter 01's characters -> UTF-8 bytes -> ids explorer. The browser's own UTF-8 encoder (TextEncoder)
// turns each code point into its bytes as you type; the bytes are the ids a byte-level model reads.
// Traits: text (the string), names (code point -> Unicode name, filled by Python's unicodedata when a
// kernel runs; on a page with no kernel, characters typed there have no name, and the view says so).

const COLORS = ["#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5"];
const encoder = new TextEncoder();

function cell(tag, text, css = "") {
  const td = document.createElement(tag);
  td.textContent = text;
  td.style.cssText = `padding:2px 8px;${css}`;
  return td;
}

function shown(ch) {
  if (ch === " ") return "\u2423";
  if (/[\p{C}\p{Z}\s]/u.test(ch)) return `\\u{${ch.codePointAt(0).toString(16)}}`;
  return ch;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "b2l-utf8-explorer";
  const input = document.createElement("input");
  input.type = "text";
  input.className = "b2l-text";
  input.setAttribute("aria-label", "text to encode");
  input.style.cssText = "width:60%;font-size:1.1em;padding:2px 6px;margin-bottom:6px";
  const summary = document.createElement("p");
  summary.className = "b2l-summary";
  const table = document.createElement("table");
  table.className = "b2l-utf8-table";
  table.style.borderCollapse = "collapse";
  const note = document.createElement("p");
  note.className = "b2l-note";
  note.style.cssText = "font-size:0.85em;color:#555";
  root.append(input, summary, table, note);

  function show() {
    const text = model.get("text") || "";
    const names = model.get("names") || {};
    if (input.value !== text) input.value = text;
    table.replaceChildren();
    const head = document.createElement("tr");
    for (const h of ["char", "code point", "name", "UTF-8 bytes", "ids"]) head.append(cell("th", h));
    table.append(head);
    const all = [];
    let unnamed = 0;
    let k = 0;
    for (const ch of text) {  // iterates code points, as Python's `for ch in text` does
      const cp = ch.codePointAt(0);
      const ids = [...encoder.encode(ch)];
      all.push(...ids);
      const hex = cp.toString(16).toUpperCase().padStart(4, "0");
      const name = names[`U+${hex}`];
      if (name === undefined) unnamed += 1;
      const tr = document.createElement("tr");
      tr.style.background = COLORS[k % COLORS.length];
      tr.append(cell("td", shown(ch), "font-size:1.3em"), cell("td", `U+${hex}`, "font-family:monospace"),
        cell("td", name === undefined ? "\u2014" : name.toLowerCase(), "font-size:0.85em"),
        cell("td", ids.map((b) => b.toString(16).padStart(2, "0")).join(" "), "font-family:monospace"),
        cell("td", `[${ids.join(", ")}]`, "font-family:monospace"));
      tr.lastChild.className = "b2l-ids";
      table.append(tr);
      k += 1;
    }
    summary.textContent = `${k} code point(s) \u2192 ${all.length} byte id(s)`;
    root.dataset.ids = JSON.stringify(all);
    note.textContent = unnamed ? "\u2014: names come from Python's unicodedata; run the chapter in JupyterLab " +
      "to see the names of characters typed here." : "";
  }

  input.addEventListener("input", () => {
    model.set("text", input.value);
    model.save_changes();
  });
  model.on("change:text", show);
  model.on("change:names", show);
  show();
  el.appendChild(root);
  return () => {
    model.off("change:text", show);
    model.off("change:names", show);
  };
}

export default { render };
