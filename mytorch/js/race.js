window.mytorchWidgets = window.mytorchWidgets || {};

// The optimizer race: optimizers' paths drawn over the contour plot of a 2-D loss surface.
// `data` is what mytorch.widgets.OptimizerRace builds (its chapter describes the layout):
//   {title, optimizers: [{name, color}],
//    surfaces: [{name, xlim: [x0, x1], ylim: [y0, y1], z: rows of values, z[i][j] = f(x_j, y_i),
//                log, levels, minimum: [x, y] or null,
//                runs: [{label, paths: {optimizer: {lr, x: [...], y: [...], loss: [...]}}}]}]}
// Everything lives inside `root`: no global ids, no shared state, so several races can share a page.
mytorchWidgets.race = function (root, data) {
  'use strict';
  const SVG = 'http://www.w3.org/2000/svg';
  const SIZE = 420, PAD = 34;            // the plot is SIZE x SIZE pixels, inside PAD pixels of margin
  const TICK_MS = 40;                    // one animation frame of `play`

  // ---- small DOM helpers -------------------------------------------------------------
  function el(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function svg(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) {                      // a loss or a learning rate, short: 0.0213, 5e-4, 6.23e+13
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e4 || a < 1e-3)) return Number(v.toPrecision(3)).toExponential();
    return String(Number(v.toPrecision(4)));
  }

  // ---- styles, scoped to this widget's root class ---------------------------------------
  root.classList.add('mytorch-race');
  el('style', {}, root, `
    .mytorch-race { font: 13px/1.4 system-ui, sans-serif; color: #222; margin: 1em 0; max-width: 780px; }
    .mytorch-race .mt-title { font-weight: 600; margin-bottom: .3em; }
    .mytorch-race .mt-controls { display: flex; flex-wrap: wrap; gap: .4em .8em; align-items: center; margin-bottom: .4em; }
    .mytorch-race .mt-controls input[type=range] { flex: 1 1 160px; }
    .mytorch-race .mt-body { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
    .mytorch-race svg.mt-plot { background: #fff; border: 1px solid #ccc; max-width: 100%; height: auto; }
    .mytorch-race .mt-legend { list-style: none; margin: 0; padding: 0; width: 250px; }
    .mytorch-race .mt-legend li { display: flex; flex-wrap: wrap; gap: 0 .5em; align-items: baseline; padding: 1px 0; }
    .mytorch-race .mt-swatch { display: inline-block; width: 14px; height: 4px; border-radius: 2px; align-self: center; }
    .mytorch-race .mt-name { min-width: 7em; }
    .mytorch-race .mt-lr { color: #666; font-size: 12px; }
    .mytorch-race .mt-note { color: #a33; font-size: 11px; order: 9; flex-basis: 100%; padding-left: 22px; }
    .mytorch-race .mt-loss { font-variant-numeric: tabular-nums; margin-left: auto; }
    .mytorch-race .mt-status { color: #444; margin-top: .4em; font-size: 12px; }
    .mytorch-race .mt-axis { font-size: 11px; fill: #555; }
  `);

  // ---- the page skeleton --------------------------------------------------------------
  el('div', { class: 'mt-title' }, root, data.title);
  const controls = el('div', { class: 'mt-controls' }, root);
  const surfaceSelect = el('select', { class: 'mt-surface', 'aria-label': 'loss surface' }, controls);
  const runSelect = el('select', { class: 'mt-run', 'aria-label': 'learning rates' }, controls);
  const playButton = el('button', { class: 'mt-play', type: 'button' }, controls, 'Play');
  const slider = el('input', { class: 'mt-step', type: 'range', min: 0, max: 0, value: 0, 'aria-label': 'step' }, controls);
  const stepLabel = el('span', { class: 'mt-step-label' }, controls);
  data.surfaces.forEach((s, i) => el('option', { value: i }, surfaceSelect, s.name));

  const body = el('div', { class: 'mt-body' }, root);
  const plot = svg('svg', { class: 'mt-plot', viewBox: `0 0 ${SIZE + 2 * PAD} ${SIZE + 2 * PAD}`,
                            width: SIZE + 2 * PAD, height: SIZE + 2 * PAD, role: 'img',
                            'aria-label': 'optimizer paths on the contour plot of the loss' }, body);
  // A nested <svg> clips what it holds to its own box (no clipPath, hence no id to keep unique):
  // paths that leave the plotted square are cut at its edge.
  const frame = svg('svg', { x: PAD, y: PAD, width: SIZE, height: SIZE, viewBox: `0 0 ${SIZE} ${SIZE}` }, plot);
  const contourLayer = svg('g', { class: 'mt-contours' }, frame);
  const pathLayer = svg('g', { class: 'mt-paths' }, frame);
  svg('rect', { x: PAD, y: PAD, width: SIZE, height: SIZE, fill: 'none', stroke: '#888' }, plot);
  const axisLayer = svg('g', { class: 'mt-axis' }, plot);
  const legend = el('ul', { class: 'mt-legend' }, body);
  const status = el('div', { class: 'mt-status', role: 'status' }, root);

  // ---- state ------------------------------------------------------------------------------
  let surface = null, run = null, step = 0, timer = null;
  let toPx = null;                       // data coordinates -> pixel coordinates of the current surface
  const contourCache = new Map();        // surface index -> its contour <g>, built once
  const color = {};
  data.optimizers.forEach(o => { color[o.name] = o.color; });

  function scales(s) {
    // x grows to the right, y grows upwards (SVG's y grows downwards, hence the flip)
    const [x0, x1] = s.xlim, [y0, y1] = s.ylim;
    return (x, y) => [(x - x0) / (x1 - x0) * SIZE, SIZE - (y - y0) / (y1 - y0) * SIZE];
  }

  // ---- contours by marching squares ----------------------------------------------------
  // The grid's points are (x_j, y_i); each square between four neighbouring points is cut by a
  // level c along the edges whose two ends lie on different sides of c, at the linearly
  // interpolated crossing. Two crossed edges give one segment. Four crossed edges (a "saddle"
  // square: the two corners on one diagonal above c, the other two below) are ambiguous; the
  // square's mean value decides: the corners on the other side of the mean are cut off, each by
  // a segment joining its two edges.
  function contours(s) {
    const z = s.z, ny = z.length, nx = z[0].length;
    const [x0, x1] = s.xlim, [y0, y1] = s.ylim;
    const dx = (x1 - x0) / (nx - 1), dy = (y1 - y0) / (ny - 1);
    // Log-scaled surfaces are contoured on log(z), which spaces the geometric levels evenly and
    // places them better between grid points; the floor keeps log(0) finite at a minimum of 0.
    const floor = s.log ? s.levels[0] / 1000 : 0;
    const t = s.log ? v => Math.log(Math.max(v, floor)) : v => v;
    const grid = z.map(row => row.map(t));
    const px = scales(s);
    const g = svg('g', {});
    s.levels.forEach((level, k) => {
      const c = t(level);
      const d = [];
      for (let i = 0; i + 1 < ny; i++) {
        for (let j = 0; j + 1 < nx; j++) {
          // corners counter-clockwise from bottom-left: (i, j), (i, j+1), (i+1, j+1), (i+1, j)
          const v = [grid[i][j], grid[i][j + 1], grid[i + 1][j + 1], grid[i + 1][j]];
          const cx = [j, j + 1, j + 1, j], cy = [i, i, i + 1, i + 1];
          const above = v.map(a => a > c);
          const mask = above.reduce((m, a, n) => m | (a << n), 0);
          if (mask === 0 || mask === 15) continue;
          // edge e joins corner e and corner e+1 (bottom, right, top, left)
          const cross = [];
          for (let e = 0; e < 4; e++) {
            const a = e, b = (e + 1) % 4;
            if (above[a] === above[b]) { cross.push(null); continue; }
            const f = (c - v[a]) / (v[b] - v[a]);
            cross.push(px(x0 + (cx[a] + f * (cx[b] - cx[a])) * dx, y0 + (cy[a] + f * (cy[b] - cy[a])) * dy));
          }
          let pairs;
          if (mask === 5 || mask === 10) {
            const centre = (v[0] + v[1] + v[2] + v[3]) / 4 > c;
            // corner n lies between edges n-1 and n
            pairs = [0, 1, 2, 3].filter(n => above[n] !== centre).map(n => [(n + 3) % 4, n]);
          } else {
            const crossed = [0, 1, 2, 3].filter(e => cross[e]);
            pairs = [crossed];
          }
          for (const [e1, e2] of pairs) {
            const p = cross[e1], q = cross[e2];
            d.push(`M${p[0].toFixed(1)} ${p[1].toFixed(1)}L${q[0].toFixed(1)} ${q[1].toFixed(1)}`);
          }
        }
      }
      // lower levels darker: the eye finds the valley floor first
      const shade = Math.round(120 + 110 * k / Math.max(1, s.levels.length - 1));
      svg('path', { d: d.join(''), fill: 'none', stroke: `rgb(${shade},${shade},${shade})`,
                    'stroke-width': 1, 'data-level': level }, g);
    });
    if (s.minimum) {
      const [mx, my] = px(s.minimum[0], s.minimum[1]);
      svg('path', { class: 'mt-minimum', d: star(mx, my, 8), fill: '#222' }, g);
    }
    return g;
  }

  function star(x, y, r) {             // a five-pointed star centred at (x, y), outer radius r
    let d = '';
    for (let n = 0; n < 10; n++) {
      const a = Math.PI / 2 + n * Math.PI / 5, rr = n % 2 ? r * 0.45 : r;
      d += (n ? 'L' : 'M') + (x + rr * Math.cos(a)).toFixed(1) + ' ' + (y - rr * Math.sin(a)).toFixed(1);
    }
    return d + 'Z';
  }

  function drawAxes(s) {
    axisLayer.replaceChildren();
    const put = (x, y, text, anchor) => {
      const t = svg('text', { x, y, 'text-anchor': anchor }, axisLayer);
      t.textContent = text;
    };
    put(PAD, PAD + SIZE + 14, fmt(s.xlim[0]), 'start');
    put(PAD + SIZE, PAD + SIZE + 14, fmt(s.xlim[1]), 'end');
    put(PAD + SIZE / 2, PAD + SIZE + 26, 'x', 'middle');
    put(PAD - 4, PAD + SIZE, fmt(s.ylim[0]), 'end');
    put(PAD - 4, PAD + 10, fmt(s.ylim[1]), 'end');
    put(PAD - 12, PAD + SIZE / 2, 'y', 'end');
  }

  // ---- one run: a path and a marker per optimizer, a legend row per optimizer -------------
  let rows = [];                         // [{name, path, line, marker, loss, note}]

  function longest() { return Math.max(...rows.map(r => r.path.x.length)) - 1; }

  function showRun(index) {
    run = surface.runs[index];
    runSelect.value = index;
    pathLayer.replaceChildren();
    legend.replaceChildren();
    rows = Object.keys(run.paths).map(name => {
      const path = run.paths[name];
      const line = svg('polyline', { class: 'mt-path', 'data-optimizer': name, fill: 'none',
                                     stroke: color[name], 'stroke-width': 1.6, 'stroke-linejoin': 'round' }, pathLayer);
      const [sx, sy] = toPx(path.x[0], path.y[0]);
      svg('circle', { class: 'mt-start', cx: sx.toFixed(1), cy: sy.toFixed(1), r: 3, fill: '#fff', stroke: '#222' }, pathLayer);
      const marker = svg('circle', { class: 'mt-marker', 'data-optimizer': name, r: 5, fill: color[name],
                                     stroke: '#fff', 'stroke-width': 1.5 }, pathLayer);
      const li = el('li', { 'data-optimizer': name }, legend);
      el('span', { class: 'mt-swatch', style: `background:${color[name]}` }, li);
      el('span', { class: 'mt-name' }, li, name);
      el('span', { class: 'mt-lr' }, li, 'lr ' + fmt(path.lr));
      const note = el('span', { class: 'mt-note' }, li);
      const loss = el('span', { class: 'mt-loss' }, li);
      return { name, path, line, marker, loss, note };
    });
    root.dataset.run = run.label;
    slider.max = longest();
    setStep(Math.min(step, longest()));
  }

  function showSurface(index) {
    surface = data.surfaces[index];
    surfaceSelect.value = index;
    toPx = scales(surface);
    if (!contourCache.has(index)) contourCache.set(index, contours(surface));
    contourLayer.replaceChildren(contourCache.get(index));
    drawAxes(surface);
    runSelect.replaceChildren();
    surface.runs.forEach((r, i) => el('option', { value: i }, runSelect, r.label));
    root.dataset.surface = surface.name;
    showRun(0);
  }

  // Far-away points (a path that diverged) are pulled in to a few plot-widths outside the box:
  // the clipped line still points the right way, and the browser never sees 1e30 pixels.
  const clamp = v => Math.max(-4 * SIZE, Math.min(5 * SIZE, v));

  function setStep(s) {
    step = Math.max(0, Math.min(s, longest()));
    slider.value = step;
    for (const r of rows) {
      const last = r.path.x.length - 1, k = Math.min(step, last);
      const pts = [];
      for (let n = 0; n <= k; n++) {
        const [x, y] = toPx(r.path.x[n], r.path.y[n]);
        pts.push(clamp(x).toFixed(1) + ',' + clamp(y).toFixed(1));
      }
      r.line.setAttribute('points', pts.join(' '));
      const [mx, my] = toPx(r.path.x[k], r.path.y[k]);
      r.marker.setAttribute('cx', clamp(mx).toFixed(1));
      r.marker.setAttribute('cy', clamp(my).toFixed(1));
      r.loss.textContent = fmt(r.path.loss[k]);
      r.note.textContent = step > last ? `stopped at step ${last}` : '';
    }
    root.dataset.step = step;
    stepLabel.textContent = `step ${step} / ${longest()}`;
    const best = rows.reduce((a, b) => (a.path.loss[Math.min(step, a.path.x.length - 1)] <=
                                        b.path.loss[Math.min(step, b.path.x.length - 1)] ? a : b));
    status.textContent = `${surface.name}, ${run.label}: step ${step} of ${longest()}; lowest loss now: ${best.name}.`;
  }

  // ---- play / pause -----------------------------------------------------------------------
  function pause() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    playButton.textContent = 'Play';
    root.dataset.playing = 'false';
  }
  function play() {
    if (step >= longest()) setStep(0);   // from the end, play starts over
    const stride = Math.max(1, Math.ceil(longest() / 200));   // about 8 s for a whole run
    timer = setInterval(() => {
      setStep(step + stride);
      if (step >= longest()) pause();
    }, TICK_MS);
    playButton.textContent = 'Pause';
    root.dataset.playing = 'true';
  }

  playButton.addEventListener('click', () => (timer === null ? play() : pause()));
  slider.addEventListener('input', () => { pause(); setStep(Number(slider.value)); });
  surfaceSelect.addEventListener('change', () => { pause(); showSurface(Number(surfaceSelect.value)); });
  runSelect.addEventListener('change', () => { pause(); showRun(Number(runSelect.value)); });

  root.dataset.playing = 'false';
  showSurface(0);
};
