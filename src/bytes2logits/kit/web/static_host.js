// Runs the course's anywidgets on a page with no kernel (the course site, an HTML export).
// Every div.b2l-anywidget names its ES module (data-module, a file beside this one) and holds its traits as
// JSON; this module gives each one an in-page model with the part of anywidget's model API the course's
// widgets use (get, set, save_changes, on, off, send) and calls the module's render, as JupyterLab would.

const here = new URL(".", import.meta.url);

function pageModel(state) {
  const listeners = new Map();
  const fire = (event, ...args) => (listeners.get(event) || []).slice().forEach((cb) => cb(...args));
  return {
    get: (name) => state[name],
    set(name, value) {
      if (state[name] === value) return;
      state[name] = value;
      fire(`change:${name}`, value);
      fire("change", name, value);
    },
    save_changes() {},  // nothing to sync: the page is the whole model
    send() {},  // no kernel to send to
    on(event, cb) {
      if (!listeners.has(event)) listeners.set(event, []);
      listeners.get(event).push(cb);
    },
    off(event, cb) {
      if (!event) return listeners.clear();
      if (!cb) return listeners.delete(event);
      listeners.set(event, (listeners.get(event) || []).filter((f) => f !== cb));
    },
    widget_manager: {},
  };
}

async function mount(div) {
  if (div.dataset.b2lMounted) return;
  div.dataset.b2lMounted = "1";
  const name = div.dataset.module;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name || "")) throw new Error(`b2l widget: bad module name ${name}`);
  const state = JSON.parse(div.querySelector("script.b2l-state").textContent);
  const module = await import(new URL(`${name}.js`, here).href);
  let widget = module.default;
  if (typeof widget === "function") widget = await widget();
  const model = pageModel(state);
  if (widget.initialize) await widget.initialize({ model });
  const el = document.createElement("div");
  el.className = "b2l-live";
  const fallback = div.querySelector(".b2l-fallback");
  await widget.render({ model, el });
  if (fallback) fallback.replaceWith(el);
  else div.appendChild(el);
}

export function mountAll(root = document) {
  return Promise.all([...root.querySelectorAll("div.b2l-anywidget")].map((div) => mount(div).catch((err) => {
    console.error(`b2l widget ${div.dataset.module}: ${err}`);
  })));
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => mountAll());
else mountAll();
