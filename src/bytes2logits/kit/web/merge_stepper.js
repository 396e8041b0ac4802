// The merge stepper of chapter 03: back / slider / next over frames that Python rendered from bpe_trace
// (one HTML frame per training step). Traits: frames (list of HTML strings), step (0-based index).

function button(label, cls) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = label;
  b.style.cssText = "padding:2px 10px;margin:0 4px;cursor:pointer";
  return b;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "b2l-merge-stepper";
  root.tabIndex = 0;  // arrow keys step when the widget has focus
  const bar = document.createElement("div");
  bar.style.cssText = "display:flex;align-items:center;gap:4px;margin-bottom:6px";
  const back = button("\u25c0 back", "b2l-back");
  const next = button("next \u25b6", "b2l-next");
  const slider = document.createElement("input");
  slider.type = "range";
  slider.className = "b2l-slider";
  slider.min = "1";
  slider.style.width = "240px";
  const label = document.createElement("span");
  label.className = "b2l-step-label";
  label.style.cssText = "margin-left:8px;font-variant-numeric:tabular-nums";
  bar.append(back, slider, next, label);
  const pane = document.createElement("div");
  pane.className = "b2l-pane";
  root.append(bar, pane);

  const count = () => (model.get("frames") || []).length;
  const clamp = (k) => Math.max(0, Math.min(count() - 1, k));
  const go = (k) => {
    const target = clamp(k);
    if (target !== model.get("step")) {
      model.set("step", target);
      model.save_changes();
    }
  };

  function show() {
    const frames = model.get("frames") || [];
    if (!frames.length) {
      pane.innerHTML = "<i>nothing to merge</i>";
      bar.style.display = "none";
      return;
    }
    const k = clamp(model.get("step") || 0);
    slider.max = String(frames.length);
    slider.value = String(k + 1);
    label.textContent = `step ${k + 1} of ${frames.length}`;
    pane.innerHTML = frames[k];  // rendered and escaped by step_html in Python
    root.dataset.step = String(k + 1);
    back.disabled = k === 0;
    next.disabled = k === frames.length - 1;
  }

  back.addEventListener("click", () => go(model.get("step") - 1));
  next.addEventListener("click", () => go(model.get("step") + 1));
  slider.addEventListener("input", () => go(Number(slider.value) - 1));
  root.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") go(model.get("step") - 1);
    else if (e.key === "ArrowRight") go(model.get("step") + 1);
    else return;
    e.preventDefault();
  });
  model.on("change:step", show);
  model.on("change:frames", show);
  show();
  el.appendChild(root);
  return () => {
    model.off("change:step", show);
    model.off("change:frames", show);
  };
}

export default { render };
