// Syntax-highlighted source, one element per line so that anchors (what the plan asked) and filled
// spans (what the code agent did) can be marked by line. Vendored highlight.js core + grammars.

import hljs from "../vendor/highlight/core.min.js";
import python from "../vendor/highlight/languages/python.min.js";
import cpp from "../vendor/highlight/languages/cpp.min.js";

hljs.registerLanguage("python", python);
hljs.registerLanguage("cpp", cpp);

// Split highlight.js HTML into lines, closing and reopening spans that cross a newline.
export function splitLines(html) {
  const lines = [];
  const open = [];
  let current = "";
  for (const token of html.match(/<span[^>]*>|<\/span>|\n|[^<\n]+/g) || []) {
    if (token === "\n") {
      lines.push(current + "</span>".repeat(open.length));
      current = open.join("");
    } else if (token.startsWith("<span")) {
      open.push(token);
      current += token;
    } else if (token === "</span>") {
      open.pop();
      current += token;
    } else {
      current += token;
    }
  }
  lines.push(current + "</span>".repeat(open.length));
  return lines;
}

// Highlight a <pre data-code> in place. data-marks: JSON [{from, to, cls, title}] with 1-based lines.
export function renderCode(pre) {
  if (pre.dataset.rendered) return;
  const text = pre.textContent;
  const lang = pre.dataset.lang || "python";
  const html = hljs.getLanguage(lang) ? hljs.highlight(text, { language: lang, ignoreIllegals: true }).value : escapeHtml(text);
  const marks = JSON.parse(pre.dataset.marks || "[]");
  const lineClass = new Map();
  const lineTitle = new Map();
  for (const m of marks) {
    for (let i = m.from; i <= m.to; i += 1) {
      lineClass.set(i, `${lineClass.get(i) || ""} ${m.cls}`.trim());
      if (m.title) lineTitle.set(i, m.title);
    }
  }
  const lines = splitLines(html);
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  const out = lines.map((line, k) => {
    const no = k + 1;
    const cls = lineClass.get(no);
    const title = lineTitle.get(no);
    return `<span class="line${cls ? ` ${cls}` : ""}" data-line="${no}"${title ? ` title="${escapeHtml(title)}"` : ""}>${line || " "}</span>`;
  });
  pre.innerHTML = `<code class="hljs">${out.join("")}</code>`;
  pre.dataset.rendered = "1";
}

export function renderAll(root = document) {
  for (const pre of root.querySelectorAll("pre[data-code]")) renderCode(pre);
}

export function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
