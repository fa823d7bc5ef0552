// One plotly chart on the page (widgets/charts/plot.py). The figure arrives as plotly JSON in
// the model's state, so a page that connects after the kernel drew it (Voila) shows it at
// once; plotly.js itself comes once per page from the shared PlotlyLibrary model.

async function plotly(host, model) {
  const g = globalThis;
  if (!g.__wbPlotly) {
    g.__wbPlotly = (async () => {
      const library = await host.getModel(model.get("library"));
      // plotly.min.js is UMD: with `module` undefined it sets window.Plotly and returns it
      const src = library.get("source");
      return new Function("module", "exports", "define", src + "\n;return window.Plotly;")();
    })();
  }
  return g.__wbPlotly;
}

function render({ model, el, host }) {
  el.classList.add("wb-plot");
  const message = document.createElement("div");
  message.className = "wb-plot-message";
  const plot = document.createElement("div");
  plot.className = "wb-plot-area";
  plot.style.width = "100%";
  el.append(message, plot);
  let Plotly = null;
  let drawn = false;
  let pending = false;   // a revision not drawn yet because the chart is hidden

  async function draw() {
    // A chart in a hidden tab is drawn when it is first shown: drawing the page's nine charts
    // at once kept a 2-core machine busy for seconds before the visible ones appeared.
    if (el.offsetWidth === 0 && !model.get("message")) { pending = true; return; }
    pending = false;
    const fig = JSON.parse(model.get("figure"));
    const layout = fig.layout || {};
    const text = model.get("message");
    message.textContent = text;
    message.style.display = text ? "flex" : "none";
    message.style.height = `${layout.height || 360}px`;
    plot.style.display = text ? "none" : "block";
    if (text) { el.dataset.revision = model.get("revision"); return; }
    await Plotly.react(plot, fig.data || [], layout,
                       { displaylogo: false, responsive: true });
    el.dataset.revision = model.get("revision");   // tests and benchmarks wait for this
    if (!drawn) {
      drawn = true;
      plot.on("plotly_click", (e) => model.send({
        event: "click",
        points: e.points.map((p) => ({ trace: p.curveNumber, index: p.pointIndex ?? p.pointNumber })),
      }));
    }
  }

  // Shown (or resized): draw what waited, or fit the drawn chart to its new size.
  const resize = new ResizeObserver(() => {
    if (!Plotly || el.offsetWidth === 0) return;
    if (pending) draw();
    else if (drawn && plot.offsetWidth > 0) Plotly.Plots.resize(plot);
  });
  resize.observe(el);
  const redraw = () => { if (Plotly) draw(); };
  model.on("change:revision", redraw);
  plotly(host, model).then((p) => { Plotly = p; return draw(); });
  // tell the kernel a page shows this chart: a kernel started before the page (Voila's
  // preheated pool) refreshes what may have changed since (the saved scenarios)
  model.send({ event: "render" });
  return () => {
    resize.disconnect();
    model.off("change:revision", redraw);
    if (Plotly) Plotly.purge(plot);
  };
}

export default { render };
