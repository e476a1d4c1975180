window.mytorchWidgets = window.mytorchWidgets || {};

// The live computation graph: the graph of a Value or a Tensor, laid out by mytorch.viz in Python,
// with the backward pass replayed one node at a time. `data` is what mytorch.viz.GraphWidget builds:
//   {kind: 'Value' | 'Tensor', width, height,
//    nodes: [{id, title, lines: [title, (shape,) data], grad: 'grad ...', leaf, output,
//             value_full, grad_full, x, y, w, h}],          x, y: the box's centre; w, h: its size
//    edges: [{source, target, points: [[x, y], ...]}],       source feeds target; points run from
//                                                            source's right side to target's left side
//    order: [node ids in the order the engine's backward reaches them]}
// Everything lives inside `root`: no global ids, no shared state, so several graphs can share a page.
mytorchWidgets.graph = function (root, data) {
  'use strict';
  const SVG = 'http://www.w3.org/2000/svg';
  const LINE_H = 15, PAD_Y = 5;   // text line height and box padding: the sizes Python computed assume these
  const ARROW = 8;                // arrowhead length; the edge's curve stops where the arrowhead starts
  const TICK_MS = 700;            // one backward step while playing

  // ---- small DOM helpers -------------------------------------------------------------
  function el(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function svg(tag, attrs, parent, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  const f1 = v => (Math.round(v * 10) / 10).toString();

  // ---- geometry ------------------------------------------------------------------------
  // An edge is a chain of cubic Bézier segments through its points (the points between the ends
  // are where a long edge crosses a layer). Each segment's two control points sit halfway across
  // in x, one at the height of each end, so the curve leaves and enters every point horizontally:
  // no kinks where segments meet, and the last stretch arrives level with the arrowhead.
  function curve(points) {
    const pts = points.slice(0, -1);
    const tip = points[points.length - 1];
    pts.push([tip[0] - ARROW, tip[1]]);  // stop at the arrowhead's base
    let d = `M${f1(pts[0][0])},${f1(pts[0][1])}`;
    for (let i = 1; i < pts.length; i++) {
      const [ax, ay] = pts[i - 1], [bx, by] = pts[i], mx = (ax + bx) / 2;
      d += ` C${f1(mx)},${f1(ay)} ${f1(mx)},${f1(by)} ${f1(bx)},${f1(by)}`;
    }
    return d;
  }
  function arrowhead(points) {          // a triangle pointing right, its tip on the target's left side
    const [x, y] = points[points.length - 1];
    return `${f1(x - ARROW)},${f1(y - 4)} ${f1(x)},${f1(y)} ${f1(x - ARROW)},${f1(y + 4)}`;
  }

  // ---- styles, scoped to this widget's root class ---------------------------------------
  root.classList.add('mytorch-graph');
  root.textContent = '';
  el('style', {}, root, `
    .mytorch-graph { font: 13px/1.4 system-ui, sans-serif; color: #222; margin: 1em 0; }
    .mytorch-graph .mt-controls { display: flex; flex-wrap: wrap; gap: .4em; align-items: center; margin-bottom: .4em; }
    .mytorch-graph button { font: inherit; padding: 1px 10px; border: 1px solid #aaa; border-radius: 4px;
                            background: #f6f6f6; color: #222; cursor: pointer; }
    .mytorch-graph button:disabled { opacity: .4; cursor: default; }
    .mytorch-graph .mt-status { color: #444; font-size: 12px; margin: .2em 0 .4em; min-height: 1.4em; }
    .mytorch-graph .mt-body { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
    .mytorch-graph .mt-canvas { overflow: auto; max-width: 100%; border: 1px solid #ddd; background: #fff; }
    .mytorch-graph .mt-panel { flex: 1 1 240px; max-width: 420px; font-size: 12px; border-left: 3px solid #ddd;
                               padding: 0 .6em; }
    .mytorch-graph .mt-panel h4 { margin: 0 0 .2em; font-size: 13px; font-family: monospace; }
    .mytorch-graph .mt-panel .mt-label { color: #666; margin-top: .3em; }
    .mytorch-graph .mt-panel pre { margin: 1px 0 4px; padding: 3px 5px; background: #f5f5f5; white-space: pre-wrap;
                                   font: 11px/1.3 monospace; max-height: 11em; overflow: auto; }
    .mytorch-graph svg text { font-family: monospace; font-size: 12px; fill: #222; pointer-events: none; }
    .mytorch-graph svg text.mt-title { font-weight: bold; }
    .mytorch-graph svg text.mt-unknown { fill: #999; }
    .mytorch-graph .mt-node { cursor: pointer; outline: none; }
    .mytorch-graph .mt-node rect { fill: #f4f4f4; stroke: #777; stroke-width: 1; }
    .mytorch-graph .mt-node.leaf rect { fill: #e8f1fb; stroke: #4a7ab5; }
    .mytorch-graph .mt-node.output rect { fill: #fff4e0; stroke: #c77700; stroke-width: 2; }
    .mytorch-graph .mt-node:not(.visited) { opacity: .45; }
    .mytorch-graph .mt-node.current rect { stroke: #2a8d3a; stroke-width: 3; }
    .mytorch-graph .mt-node.on-path rect { stroke: #c8324a; stroke-width: 2.5; }
    .mytorch-graph .mt-node.selected rect { fill: #fde4e8; stroke: #c8324a; stroke-width: 3.5; }
    .mytorch-graph .mt-node:focus-visible rect { stroke-dasharray: 4 2; }
    .mytorch-graph .mt-edge path { fill: none; stroke: #777; stroke-width: 1.2; }
    .mytorch-graph .mt-edge polygon { fill: #777; }
    .mytorch-graph .mt-edge.on-path path { stroke: #c8324a; stroke-width: 2.5; }
    .mytorch-graph .mt-edge.on-path polygon { fill: #c8324a; }
  `);

  // ---- the page skeleton --------------------------------------------------------------
  const controls = el('div', { class: 'mt-controls' }, root);
  const buttons = {};
  [['reset', 'reset', 'back to before backward'], ['prev', '◀ back', 'undo one backward step'],
   ['next', 'step ▶', 'run backward one node further'], ['play', 'play', 'replay backward']].forEach(
    ([action, label, help]) => {
      buttons[action] = el('button', { type: 'button', 'data-action': action, title: help }, controls, label);
    });
  const status = el('div', { class: 'mt-status', role: 'status', 'aria-live': 'polite' }, root);
  const body = el('div', { class: 'mt-body' }, root);
  const canvas = el('div', { class: 'mt-canvas' }, body);
  const panel = el('div', { class: 'mt-panel' }, body);
  const plot = svg('svg', { width: data.width, height: data.height, viewBox: `0 0 ${data.width} ${data.height}`,
                            role: 'img', 'aria-label': 'computation graph' }, canvas);
  const edgeLayer = svg('g', { class: 'mt-edges' }, plot);   // drawn first: the boxes sit on top
  const nodeLayer = svg('g', { class: 'mt-nodes' }, plot);

  // ---- the graph ----------------------------------------------------------------------
  const nodes = data.nodes, N = nodes.length;
  const rank = new Array(N);            // rank[id]: the backward step (0-based) at which node id is reached
  data.order.forEach((id, r) => { rank[id] = r; });
  const consumers = nodes.map(() => []);  // consumers[id]: the edges leaving node id (towards the output)
  const edgeEls = data.edges.map((e, k) => {
    consumers[e.source].push(k);
    const g = svg('g', { class: 'mt-edge', 'data-source': e.source, 'data-target': e.target }, edgeLayer);
    svg('path', { d: curve(e.points) }, g);
    svg('polygon', { points: arrowhead(e.points) }, g);
    return g;
  });
  const gradText = [];
  const nodeEls = nodes.map(n => {
    const cls = 'mt-node' + (n.leaf ? ' leaf' : '') + (n.output ? ' output' : '');
    const g = svg('g', { class: cls, 'data-node-id': n.id, tabindex: 0, role: 'button',
                         transform: `translate(${f1(n.x - n.w / 2)},${f1(n.y - n.h / 2)})`,
                         'aria-label': n.title }, nodeLayer);
    svg('rect', { width: n.w, height: n.h, rx: 5 }, g);
    // one <text> per line, centred in the box; the last line (the gradient) changes as backward runs
    const lineY = i => f1(PAD_Y + (i + 0.5) * LINE_H);
    n.lines.forEach((line, i) => {
      const unknown = / —$/.test(line);
      svg('text', { x: f1(n.w / 2), y: lineY(i), 'text-anchor': 'middle', 'dominant-baseline': 'central',
                    class: i === 0 ? 'mt-title' : (unknown ? 'mt-unknown' : '') }, g, line);
    });
    gradText.push(svg('text', { x: f1(n.w / 2), y: lineY(n.lines.length), 'text-anchor': 'middle',
                                'dominant-baseline': 'central', class: 'mt-grad' }, g));
    g.addEventListener('mouseenter', () => { hover = n.id; render(); });
    g.addEventListener('mouseleave', () => { hover = null; render(); });
    g.addEventListener('click', ev => { ev.stopPropagation(); select(n.id); });
    g.addEventListener('keydown', ev => {
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); select(n.id); }
    });
    return g;
  });
  plot.addEventListener('click', () => { selected = null; render(); });  // a click on the background

  // The path(s) the gradient took from the output to node `id`: every node reachable from `id`
  // along the edges (each such node leads on to the output, the graph's only sink), and every edge
  // between two of them.
  function pathFrom(id) {
    const on = new Set([id]), todo = [id];
    while (todo.length) {
      for (const k of consumers[todo.pop()]) {
        const t = data.edges[k].target;
        if (!on.has(t)) { on.add(t); todo.push(t); }
      }
    }
    const edges = new Set();
    data.edges.forEach((e, k) => { if (on.has(e.source) && on.has(e.target)) edges.add(k); });
    return { nodes: on, edges: edges };
  }

  // ---- state ------------------------------------------------------------------------------
  let step = N;              // how many nodes backward has reached: all of them when the widget opens
  let selected = null, hover = null, timer = null;

  function select(id) { selected = (selected === id) ? null : id; render(); }
  function setStep(s) {
    step = Math.max(0, Math.min(N, s));
    selected = step > 0 && step < N ? data.order[step - 1] : selected;   // follow the replay
    render();
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    buttons.play.textContent = 'play';
  }

  buttons.reset.addEventListener('click', () => { stop(); selected = null; setStep(0); });
  buttons.prev.addEventListener('click', () => { stop(); setStep(step - 1); });
  buttons.next.addEventListener('click', () => { stop(); setStep(step + 1); });
  buttons.play.addEventListener('click', () => {
    if (timer !== null) { stop(); render(); return; }
    if (step >= N) { selected = null; setStep(0); }
    buttons.play.textContent = 'pause';
    timer = setInterval(() => {
      setStep(step + 1);
      if (step >= N) { stop(); render(); }
    }, TICK_MS);
  });

  // ---- drawing the state ------------------------------------------------------------------
  function describe(id) {
    panel.textContent = '';
    if (id === null) {
      el('p', {}, panel, 'Hover over or click a node: its value, its gradient, and the path the gradient ' +
         'took from the output to it. The buttons replay the backward pass one node at a time.');
      return;
    }
    const n = nodes[id], reached = rank[id] < step;
    el('h4', {}, panel, n.title);
    el('div', { class: 'mt-label' }, panel, n.output ? 'the output' : (n.leaf ? 'a leaf' : 'an op'));
    if (n.lines.length > 2) el('div', { class: 'mt-label' }, panel, 'shape ' + n.lines[1]);
    el('div', { class: 'mt-label' }, panel, 'value');
    el('pre', { class: 'mt-value' }, panel, n.value_full);
    el('div', { class: 'mt-label' }, panel, 'gradient of the output with respect to it');
    el('pre', { class: 'mt-grad-full' }, panel, reached ? n.grad_full :
       `not reached yet: backward reaches it at step ${rank[id] + 1} of ${N}`);
    const path = pathFrom(id);
    el('div', { class: 'mt-label mt-path' }, panel, n.output ? 'Backward starts here, with gradient 1.' :
       `The gradient came from the output along ${path.edges.size} edge(s) through ` +
       `${path.nodes.size - 1} node(s), shown in red.`);
  }

  function render() {
    const focus = hover !== null ? hover : selected;
    const path = focus === null ? { nodes: new Set(), edges: new Set() } : pathFrom(focus);
    nodes.forEach((n, id) => {
      const g = nodeEls[id], reached = rank[id] < step;
      g.classList.toggle('visited', reached);
      g.classList.toggle('current', step < N && rank[id] === step - 1);
      g.classList.toggle('on-path', path.nodes.has(id));
      g.classList.toggle('selected', id === focus);
      gradText[id].textContent = reached ? n.grad : 'grad ?';
      gradText[id].setAttribute('class', 'mt-grad' + (reached && !/ —$/.test(n.grad) ? '' : ' mt-unknown'));
    });
    edgeEls.forEach((g, k) => g.classList.toggle('on-path', path.edges.has(k)));
    describe(focus);
    if (step === 0) status.textContent = `Before backward: no gradients yet. Press step ▶ to run the ` +
                                         `engine one node at a time (${N} nodes).`;
    else if (step === N) status.textContent = `Backward done: all ${N} nodes reached, in the engine's order. ` +
                                              `Reset, then step, to replay it.`;
    else {
      const n = nodes[data.order[step - 1]];
      status.textContent = `Step ${step} of ${N}: backward reached ${n.title} (${n.grad}).`;
    }
    buttons.reset.disabled = buttons.prev.disabled = step === 0;
    buttons.next.disabled = step === N;
  }

  render();
};
